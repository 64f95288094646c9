package slack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	slackgo "github.com/slack-go/slack"

	"github.com/arbiterhq/arbiter"
)

// Store is what answering a click needs from the store: the connection,
// the member linked to a Slack user (or a link to offer), the task, the
// desk's decision, and the replay guard.
type Store interface {
	FindSlackConnection(ctx context.Context, accountID string) (*arbiter.SlackConnection, error)
	ListSlackConnections(ctx context.Context, mode, teamID string) ([]*arbiter.SlackConnection, error)
	FindTaskByID(ctx context.Context, accountID, id string) (*arbiter.Task, error)
	DecideTask(ctx context.Context, accountID, taskID string, d arbiter.HumanDecision) (*arbiter.Task, error)
	FirstSlackRequest(ctx context.Context, signature string) (bool, error)
	FindChatMember(ctx context.Context, accountID string, u arbiter.ChatUser) (*arbiter.Membership, error)
	OfferChatLink(ctx context.Context, accountID string, u arbiter.ChatUser) (string, error)
}

// The answers a clicking person sees, ephemerally.
const (
	RefusalText  = "You cannot decide tasks for this account."
	unknownText  = "This task is not in this account."
	failedText   = "Arbiter could not record your decision; try again, or open the desk."
	decidedText  = "You decided “%s”."
	votedText    = "Your vote, “%s”, is recorded; the task is decided when enough reviewers have voted."
	endedPrefix  = "This task already ended: "
	audited      = "You answered the blind audit."
	linkText     = "Before your clicks decide, link your Slack account to Arbiter, once: <%s|open this link> and sign in as %s (the link works for 15 minutes). Then click again."
	noLinkText   = "Link your Slack account to Arbiter before deciding here; this server cannot offer the link, so decide on the desk."
	handleBudget = 30 * time.Second
)

// Interactions answers what people do with Arbiter's Slack messages, in
// both modes: a click on a verdict decides as the desk does, "Add a
// reason" opens a modal whose submission decides with the rationale.
// Handle is the work after the ack; Dispatch and TryDispatch run it in
// the background, so that the ack goes first, at most MaxInFlight at
// once.
type Interactions struct {
	Store  Store
	Slack  *Client
	Logger *slog.Logger
	// LinkURL is the reviewer site's page of a chat link's token
	// (arbiter.ChatLinkService), where a person links the Slack user
	// who clicked to themselves; nil offers no link.
	LinkURL func(token string) string
	// MaxInFlight bounds the interactions handled at once in this
	// process (default DefaultMaxInFlight): each holds a goroutine and
	// up to three calls to Slack for as long as handleBudget.
	MaxInFlight int

	slotsOnce sync.Once
	slots     chan struct{}
	wg        sync.WaitGroup
}

// DefaultMaxInFlight is Interactions.MaxInFlight's default: far above
// the clicks people make, far below what a process can hold.
const DefaultMaxInFlight = 64

func (in *Interactions) slotsOf() chan struct{} {
	in.slotsOnce.Do(func() {
		n := in.MaxInFlight
		if n <= 0 {
			n = DefaultMaxInFlight
		}
		in.slots = make(chan struct{}, n)
	})
	return in.slots
}

// TryDispatch handles cb in the background, after the caller
// acknowledged it, and reports true; or reports false, doing nothing,
// when MaxInFlight interactions are being handled already.
func (in *Interactions) TryDispatch(ctx context.Context, conn *arbiter.SlackConnection, cb *slackgo.InteractionCallback) bool {
	select {
	case in.slotsOf() <- struct{}{}:
		in.run(ctx, conn, cb)
		return true
	default:
		return false
	}
}

// Dispatch handles cb in the background, after the caller acknowledged
// it, once fewer than MaxInFlight are being handled: it waits for a
// slot (or for ctx to end, dropping cb). Wait waits for every
// dispatched one.
func (in *Interactions) Dispatch(ctx context.Context, conn *arbiter.SlackConnection, cb *slackgo.InteractionCallback) {
	select {
	case in.slotsOf() <- struct{}{}:
		in.run(ctx, conn, cb)
	case <-ctx.Done():
	}
}

// run handles cb in a goroutine holding a slot, which it gives back.
func (in *Interactions) run(ctx context.Context, conn *arbiter.SlackConnection, cb *slackgo.InteractionCallback) {
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		defer func() { <-in.slots }()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handleBudget)
		defer cancel()
		in.Handle(ctx, conn, cb)
	}()
}

// Wait waits until every dispatched interaction is handled.
func (in *Interactions) Wait() { in.wg.Wait() }

func (in *Interactions) logger() *slog.Logger {
	if in.Logger != nil {
		return in.Logger
	}
	return slog.Default()
}

// Handle does what the interaction asks of the connection's account:
// the first of its actions that is Arbiter's, only. A click is one action
// (Slack sends one per block_actions payload), and a payload listing
// many must not buy many decisions, lookups and answers.
func (in *Interactions) Handle(ctx context.Context, conn *arbiter.SlackConnection, cb *slackgo.InteractionCallback) {
	switch cb.Type {
	case slackgo.InteractionTypeBlockActions:
		for _, a := range cb.ActionCallback.BlockActions {
			switch {
			case a.ActionID == ActionReason || a.ActionID == ActionEdit:
				taskID, digest, _, ok := DecodeValue(a.Value)
				if !ok {
					taskID = a.Value // a message posted before actions: the task id alone
				}
				if arbiter.ValidTaskID(taskID) {
					in.openModal(ctx, conn, cb, a.ActionID, taskID, digest)
				}
				return
			case strings.HasPrefix(a.ActionID, ActionDecide):
				value := a.Value
				if value == "" {
					value = a.SelectedOption.Value
				}
				if taskID, digest, verdict, ok := DecodeValue(value); ok {
					in.decide(ctx, conn, cb, cb.ResponseURL, taskID, arbiter.HumanDecision{Verdict: verdict, ActionDigest: digest})
				}
				return
			}
		}
	case slackgo.InteractionTypeViewSubmission:
		m := parseMetadata(cb.View.PrivateMetadata)
		switch cb.View.CallbackID {
		case CallbackReason:
			taskID, digest, verdict, rationale := ReasonOf(cb.View)
			if arbiter.ValidTaskID(taskID) && verdict != "" {
				in.decide(ctx, conn, cb, m.ResponseURL, taskID, arbiter.HumanDecision{Verdict: verdict, Rationale: rationale, ActionDigest: digest})
			}
		case CallbackEdit:
			if arbiter.ValidTaskID(m.TaskID) {
				in.decideEdit(ctx, conn, cb, m)
			}
		}
	}
}

// decideEdit decides with the edit modal's submission: the edited args,
// checked against the action in the decision.
func (in *Interactions) decideEdit(ctx context.Context, conn *arbiter.SlackConnection, cb *slackgo.InteractionCallback, m editMetadata) {
	t, err := in.Store.FindTaskByID(ctx, conn.AccountID, m.TaskID)
	if err != nil {
		in.respondTo(ctx, m.ResponseURL, unknownText)
		return
	}
	verdict, args, err := EditOf(t, cb.View)
	if err != nil {
		in.respondTo(ctx, m.ResponseURL, arbiter.ErrorMessage(err))
		return
	}
	in.decide(ctx, conn, cb, m.ResponseURL, m.TaskID, arbiter.HumanDecision{Verdict: verdict, ActionDigest: m.Digest, EditedArgs: args})
}

// member returns the account's member linked to the Slack user, when
// their role may decide. A user linked to nobody whose address Slack
// confirmed is a member's gets a link to link themselves, answered here
// (offered is true): Slack's word for an address is not enough, since
// whoever administers a workspace can give any user any address (see
// arbiter's chatlink.go).
func (in *Interactions) member(ctx context.Context, conn *arbiter.SlackConnection, cb *slackgo.InteractionCallback) (_ *arbiter.Membership, offered bool, err error) {
	u := arbiter.ChatUser{Provider: arbiter.ChatSlack, Workspace: conn.TeamID, UserID: cb.User.ID}
	m, err := in.Store.FindChatMember(ctx, conn.AccountID, u)
	switch {
	case err == nil && arbiter.Can(m.Role, arbiter.ActionReview):
		return m, false, nil
	case err == nil:
		return nil, false, nil
	case arbiter.ErrorCode(err) != arbiter.ENOTFOUND:
		return nil, false, err
	}
	if u.Email, err = in.Slack.VerifiedEmail(ctx, conn.BotToken, cb.User.ID); err != nil || u.Email == "" {
		return nil, false, err
	}
	if in.LinkURL == nil {
		in.respond(ctx, cb, noLinkText)
		return nil, true, nil
	}
	token, err := in.Store.OfferChatLink(ctx, conn.AccountID, u)
	if arbiter.ErrorCode(err) == arbiter.ENOTFOUND {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	in.respond(ctx, cb, fmt.Sprintf(linkText, in.LinkURL(token), escape(u.Email)))
	return nil, true, nil
}

// decide records dec, a person's verdict (with the digest of the action
// their copy showed, and their edit), as the member linked to the Slack
// user, and answers them at responseURL.
func (in *Interactions) decide(ctx context.Context, conn *arbiter.SlackConnection, cb *slackgo.InteractionCallback, responseURL, taskID string, dec arbiter.HumanDecision) {
	verdict := dec.Verdict
	respond := func(text string) { in.respondTo(ctx, responseURL, text) }
	m, offered, err := in.member(ctx, conn, cb)
	switch {
	case err != nil:
		in.logger().Warn("Slack interaction: find the member", "account_id", conn.AccountID, "error", err.Error())
		respond(failedText)
		return
	case offered:
		return
	case m == nil:
		respond(RefusalText)
		return
	}
	dec.Reviewer, dec.ReviewerID, dec.Client, dec.Via = m.Email, m.PersonID, arbiter.Client{UserAgent: "Slack"}, "Slack"
	t, err := in.Store.DecideTask(ctx, conn.AccountID, taskID, dec)
	switch code := arbiter.ErrorCode(err); {
	case err == nil && t.AuditState == arbiter.AuditStateDone:
		respond(audited)
	case err == nil && !Ended(t):
		// A vote that did not decide: the task still waits for others.
		respond(strings.Replace(votedText, "%s", verdict, 1))
	case err == nil:
		respond(strings.Replace(decidedText, "%s", verdict, 1))
	case errors.Is(err, arbiter.ErrNotAllowed):
		respond(RefusalText)
	case code == arbiter.ENOTFOUND:
		respond(unknownText)
	case code == arbiter.ECONFLICT || code == arbiter.EINVALID:
		// Decided, expired or held by someone else: say how it stands.
		if now, ferr := in.Store.FindTaskByID(ctx, conn.AccountID, taskID); ferr == nil && Ended(now) {
			respond(endedPrefix + OutcomeLine(now))
			return
		}
		respond(arbiter.ErrorMessage(err))
	default:
		in.logger().Warn("Slack interaction: decide", "account_id", conn.AccountID, "task_id", taskID, "error", err.Error())
		respond(failedText)
	}
}

// openModal opens the "Add a reason" (action ActionReason) or the "Edit
// and approve" modal (ActionEdit) of the task for a member who may decide
// it, carrying the digest of the action the message showed.
func (in *Interactions) openModal(ctx context.Context, conn *arbiter.SlackConnection, cb *slackgo.InteractionCallback, action, taskID, digest string) {
	m, offered, err := in.member(ctx, conn, cb)
	if offered {
		return
	} else if err != nil || m == nil {
		in.respond(ctx, cb, RefusalText)
		return
	}
	t, err := in.Store.FindTaskByID(ctx, conn.AccountID, taskID)
	if err != nil {
		in.respond(ctx, cb, unknownText)
		return
	}
	if Ended(t) {
		in.respond(ctx, cb, endedPrefix+OutcomeLine(t))
		return
	}
	view := ReasonModal(t, digest, cb.ResponseURL)
	if action == ActionEdit {
		if cur, ok := t.CurrentAction(); !ok || cur.Digest != digest {
			in.respond(ctx, cb, arbiter.ActionChangedError(cur).Message)
			return
		} else if editButton(t) == nil {
			in.respond(ctx, cb, "This task's action cannot be edited in Slack; open it in the desk.")
			return
		}
		view = EditModal(t, cb.ResponseURL)
	}
	if err := in.Slack.OpenReason(ctx, conn.BotToken, cb.TriggerID, view); err != nil {
		in.logger().Warn("Slack interaction: open a modal", "account_id", conn.AccountID, "error", err.Error())
	}
}

// respond answers the person who clicked, seen by them only.
func (in *Interactions) respond(ctx context.Context, cb *slackgo.InteractionCallback, text string) {
	in.respondTo(ctx, cb.ResponseURL, text)
}

// respondTo answers a person at a response URL, seen by them only: the
// one of their click, or the one a modal's metadata carries (a modal's
// submission has none of its own). Without one, the outcome shows on the
// message alone.
func (in *Interactions) respondTo(ctx context.Context, responseURL, text string) {
	if responseURL == "" {
		return
	}
	if err := in.Slack.Respond(ctx, responseURL, text); err != nil {
		in.logger().Info("Slack interaction: respond", "error", err.Error())
	}
}

// ParseInteraction reads the body Slack posts to the interactions URL
// (a form whose payload field is the interaction's JSON).
func ParseInteraction(body []byte) (*slackgo.InteractionCallback, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, err
	}
	var cb slackgo.InteractionCallback
	if err := json.Unmarshal([]byte(form.Get("payload")), &cb); err != nil {
		return nil, err
	}
	return &cb, nil
}

// Verify checks a request Slack signed with secret: its signature over
// the timestamp and the body, compared in constant time, and a timestamp
// within five minutes of now.
func Verify(header http.Header, body []byte, secret string) error {
	sv, err := slackgo.NewSecretsVerifier(header, secret)
	if err != nil {
		return err
	}
	if _, err := sv.Write(body); err != nil {
		return err
	}
	return sv.Ensure()
}

package teams

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
)

// Store is what the bot needs from the store: the conversations it was
// added to, the member linked to a Teams user (or a link to offer), the
// people whose own view a card names, the task, and the desk's decision.
type Store interface {
	SaveTeamsConversation(ctx context.Context, c *arbiter.TeamsConversation) (*arbiter.TeamsConversation, error)
	RemoveTeamsConversation(ctx context.Context, accountID, conversationID string) error
	TeamsDeciders(ctx context.Context, accountID, appID string) ([]string, error)
	FindChatMember(ctx context.Context, accountID string, u arbiter.ChatUser) (*arbiter.Membership, error)
	OfferChatLink(ctx context.Context, accountID string, u arbiter.ChatUser) (string, error)
	FindTaskByID(ctx context.Context, accountID, id string) (*arbiter.Task, error)
	DecideTask(ctx context.Context, accountID, taskID string, d arbiter.HumanDecision) (*arbiter.Task, error)
}

// What a person who clicked reads on their card.
const (
	RefusalText  = "You cannot decide tasks for this account."
	unknownText  = "This task is not in this account."
	failedText   = "Arbiter could not record your decision; try again, or open the desk."
	linkText     = "Before your clicks decide, link your Teams account to Arbiter, once: open the link below and sign in as %s (it works for 15 minutes). Then click Decide again."
	noLinkText   = "Link your Teams account to Arbiter before deciding here; this server cannot offer the link, so decide on the desk."
	votedText    = "Your vote, “%s”, is recorded; the task is decided when enough reviewers have voted."
	auditedText  = "You answered the blind audit."
	reviewerText = "Your role in this account does not decide tasks."
	// InvokeBudget is how long an invoke may take: Teams waits a few
	// seconds for the card it answers with.
	InvokeBudget = 4 * time.Second
)

// Bot answers what Teams posts to the bot: a conversation it was added
// to or removed from, and the Action.Execute invokes of its cards.
type Bot struct {
	Store     Store
	Connector *Connector
	// DeskURL is the desk's page of a task; LinkURL the reviewer site's
	// page of a chat link's token (nil offers no link).
	DeskURL func(taskID string) string
	LinkURL func(token string) string
	Logger  *slog.Logger
}

func (b *Bot) logger() *slog.Logger {
	if b.Logger != nil {
		return b.Logger
	}
	return slog.Default()
}

// ConversationUpdate keeps the conversations the bot is in: one it was
// added to is stored with a name for notify targets (its team and
// channel, or its person's address in a personal chat, which the Bot
// Connector tells), one it was removed from is forgotten. Other updates
// change nothing.
func (b *Bot) ConversationUpdate(ctx context.Context, conn *arbiter.TeamsConnection, a *Activity) error {
	switch {
	case a.Conversation == nil || a.Conversation.ID == "":
		return nil
	case a.RemovesBot() || a.ChannelData != nil && (a.ChannelData.EventType == "teamDeleted" || a.ChannelData.EventType == "channelDeleted"):
		return b.Store.RemoveTeamsConversation(ctx, conn.AccountID, a.Conversation.ID)
	case !a.AddsBot() && !(a.Type == TypeInstallation):
		return nil
	}
	c := &arbiter.TeamsConversation{AccountID: conn.AccountID, ID: a.Conversation.ID, ServiceURL: a.ServiceURL, Kind: a.Kind()}
	switch c.Kind {
	case arbiter.TeamsChannel:
		team, channel := "", "General"
		if d := a.ChannelData; d != nil {
			if d.Team != nil {
				team = d.Team.Name
			}
			if d.Channel != nil && d.Channel.Name != "" {
				channel = d.Channel.Name
			}
		}
		c.Name, c.Title = arbiter.TeamsConversationName(c.Kind, team, channel, ""), team+" › "+channel
	case arbiter.TeamsPersonal:
		person, title := "", "a person"
		if a.From != nil {
			title = a.From.Name
			if m, err := b.Connector.Member(ctx, conn, a.ServiceURL, a.Conversation.ID, a.From.ID); err == nil {
				person, title = m.Address(), m.Name
			} else {
				b.logger().Info("Teams: read the member of a personal chat", "account_id", conn.AccountID, "error", err.Error())
			}
		}
		if person == "" {
			person = "chat"
		}
		c.Name, c.Title = arbiter.TeamsConversationName(c.Kind, "", "", person), "Chat with "+title
	default:
		c.Kind = arbiter.TeamsGroupChat
		c.Name, c.Title = arbiter.TeamsConversationName(c.Kind, "", a.Conversation.Name, ""), "Group chat "+a.Conversation.Name
	}
	_, err := b.Store.SaveTeamsConversation(ctx, c)
	return err
}

// InvokeResponse is the body answering an invoke.
type InvokeResponse struct {
	StatusCode int    `json:"statusCode"`
	Type       string `json:"type"`
	Value      any    `json:"value"`
}

// ContentTypeError is an invoke answer's type for an error.
const ContentTypeError = "application/vnd.microsoft.error"

// actionValue is an adaptiveCard/action invoke's value: the action, whose
// data holds the card's data and its inputs' values.
type actionValue struct {
	Action struct {
		Type string            `json:"type"`
		Verb string            `json:"verb"`
		Data map[string]string `json:"data"`
	} `json:"action"`
	Trigger string `json:"trigger"`
}

// Invoke answers an adaptiveCard/action invoke of the connection's bot
// with the card the person sees next: a decision's outcome, their own
// view of the question, a link to link their Teams user, or a refusal. A
// click decides as the desk does, as the member the Teams user is linked
// to, through the same store call (reservations, votes, blind rules,
// deadlines, exactly once); a repeated invoke decides nothing more and
// answers how the task stands.
func (b *Bot) Invoke(ctx context.Context, conn *arbiter.TeamsConnection, a *Activity) InvokeResponse {
	var v actionValue
	if a.Name != InvokeCardAction || json.Unmarshal(a.Value, &v) != nil || v.Action.Type != "Action.Execute" {
		return invokeError(400, "BadRequest", "Arbiter answers Action.Execute only.")
	}
	taskID := v.Action.Data["taskId"]
	if !arbiter.ValidTaskID(taskID) || (v.Action.Verb != VerbView && v.Action.Verb != VerbDecide) || a.From == nil || a.Conversation == nil {
		return invokeError(400, "BadRequest", "This card's action is not Arbiter's.")
	}
	t, err := b.Store.FindTaskByID(ctx, conn.AccountID, taskID)
	if arbiter.ErrorCode(err) == arbiter.ENOTFOUND {
		return card(Notice(unknownText))
	} else if err != nil {
		b.logger().Warn("Teams invoke: find the task", "account_id", conn.AccountID, "error", err.Error())
		return card(Notice(failedText))
	}
	desk := b.DeskURL(t.ID)
	if !t.InReviewQueue() {
		return card(Outcome(t, desk))
	}
	deciders, err := b.Store.TeamsDeciders(ctx, conn.AccountID, conn.AppID)
	if err != nil {
		b.logger().Warn("Teams invoke: find the deciders", "account_id", conn.AccountID, "error", err.Error())
	}
	m, p := b.member(ctx, conn, a)
	if m == nil {
		return card(Question(t, desk, deciders, p))
	}
	if v.Action.Verb == VerbView {
		return card(Question(t, desk, deciders, viewOf(t, m)))
	}
	verdict := v.Action.Data["verdict"]
	if verdict == "" {
		verdict = v.Action.Data[InputChoice]
	}
	reason := strings.TrimSpace(v.Action.Data[InputReason])
	decided, err := b.Store.DecideTask(ctx, conn.AccountID, t.ID, arbiter.HumanDecision{Verdict: verdict, Rationale: reason,
		Reviewer: m.Email, ReviewerID: m.PersonID, Client: arbiter.Client{UserAgent: "Microsoft Teams"}, Via: "Microsoft Teams"})
	switch code := arbiter.ErrorCode(err); {
	case err == nil && decided.AuditState == arbiter.AuditStateDone:
		return card(Outcome(decided, desk))
	case err == nil && decided.InReviewQueue():
		return card(Question(decided, desk, deciders, Personal{Note: strings.Replace(votedText, "%s", verdict, 1)}))
	case err == nil:
		return card(Outcome(decided, desk))
	case errors.Is(err, arbiter.ErrNotAllowed):
		return card(Question(t, desk, deciders, Personal{Note: RefusalText}))
	case code == arbiter.ECONFLICT || code == arbiter.EINVALID:
		// Decided, expired, voted already or held by someone else.
		if now, ferr := b.Store.FindTaskByID(ctx, conn.AccountID, t.ID); ferr == nil && !now.InReviewQueue() {
			return card(Outcome(now, desk))
		}
		return card(Question(t, desk, deciders, Personal{Note: arbiter.ErrorMessage(err)}))
	default:
		b.logger().Warn("Teams invoke: decide", "account_id", conn.AccountID, "task_id", t.ID, "error", err.Error())
		return card(Question(t, desk, deciders, Personal{Note: failedText}))
	}
}

// member returns the account's member linked to the Teams user who
// clicked, when their role may decide. Otherwise it returns what their
// card says instead: a link to link themselves, when the Bot Connector
// gives an address of a member of the account for the user (Teams'
// word for an address is not enough, see arbiter's chatlink.go), else a
// refusal.
func (b *Bot) member(ctx context.Context, conn *arbiter.TeamsConnection, a *Activity) (*arbiter.Membership, Personal) {
	u := arbiter.ChatUser{Provider: arbiter.ChatTeams, Workspace: conn.AppID, UserID: a.From.ID}
	m, err := b.Store.FindChatMember(ctx, conn.AccountID, u)
	switch {
	case err == nil && arbiter.Can(m.Role, arbiter.ActionReview):
		return m, Personal{}
	case err == nil:
		return nil, Personal{Note: reviewerText}
	case arbiter.ErrorCode(err) != arbiter.ENOTFOUND:
		b.logger().Warn("Teams invoke: find the member", "account_id", conn.AccountID, "error", err.Error())
		return nil, Personal{Note: failedText}
	}
	member, err := b.Connector.Member(ctx, conn, a.ServiceURL, a.Conversation.ID, a.From.ID)
	if err != nil {
		b.logger().Info("Teams invoke: read the member", "account_id", conn.AccountID, "error", err.Error())
		return nil, Personal{Note: RefusalText}
	}
	if u.Email = member.Address(); u.Email == "" {
		return nil, Personal{Note: RefusalText}
	}
	if b.LinkURL == nil {
		return nil, Personal{Note: noLinkText}
	}
	token, err := b.Store.OfferChatLink(ctx, conn.AccountID, u)
	if arbiter.ErrorCode(err) == arbiter.ENOTFOUND {
		return nil, Personal{Note: RefusalText}
	} else if err != nil {
		b.logger().Warn("Teams invoke: offer a link", "account_id", conn.AccountID, "error", err.Error())
		return nil, Personal{Note: failedText}
	}
	return nil, Personal{Note: strings.Replace(linkText, "%s", u.Email, 1), LinkURL: b.LinkURL(token)}
}

// viewOf is a member's own view of an open task: the buttons, or a note
// when they voted on it already.
func viewOf(t *arbiter.Task, m *arbiter.Membership) Personal {
	for _, a := range t.Attempts {
		if a.Tier == arbiter.TierHuman && a.PersonID == m.PersonID && !a.Audit && a.Verdict != nil && t.Review != nil && t.Review.Multi() {
			return Personal{Note: strings.Replace(votedText, "%s", *a.Verdict, 1)}
		}
	}
	return Personal{Decide: true}
}

func card(c Card) InvokeResponse {
	return InvokeResponse{StatusCode: 200, Type: ContentTypeCard, Value: c}
}

func invokeError(status int, code, message string) InvokeResponse {
	return InvokeResponse{StatusCode: status, Type: ContentTypeError, Value: map[string]string{"code": code, "message": message}}
}

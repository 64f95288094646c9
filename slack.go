package arbiter

import (
	"context"
	"regexp"
	"strings"
	"time"
)

// Slack (issue 31): an account connects a Slack app; tasks that need a
// person are posted to a channel with one button per verdict, a click
// decides as the desk does, and every posted copy is updated when the
// task ends. The messages go through an outbox (slack_messages), written
// in the transaction that changes the task.

// Slack connection modes.
const (
	// SlackModeHTTP receives interactions at
	// {APP_URL}/integrations/slack/interactions, signed with the app's
	// signing secret.
	SlackModeHTTP = "http"
	// SlackModeSocket receives them over Socket Mode with an app-level
	// token: no public URL needed.
	SlackModeSocket = "socket"
)

// SlackConnection is an account's Slack app: how it receives interactions,
// its tokens (secrets, sealed at rest and never shown again), its
// workspace and the channel questions go to.
type SlackConnection struct {
	AccountID      string
	Mode           string
	BotToken       string
	AppToken       string
	SigningSecret  string
	TeamID         string
	DefaultChannel string
	CreatedAt      Timestamp
}

// SlackConnectionInput is what an owner or admin types to connect Slack.
type SlackConnectionInput struct {
	Mode           string
	BotToken       string
	AppToken       string
	SigningSecret  string
	DefaultChannel string
}

var (
	slackChannelName = regexp.MustCompile(`^#[a-z0-9][a-z0-9_-]{0,79}$`)
	slackChannelID   = regexp.MustCompile(`^[CG][A-Z0-9]{6,20}$`)
	slackSecret      = regexp.MustCompile(`^[0-9a-f]{16,128}$`)
)

// ValidSlackChannel reports whether s names a channel: "#name" (Slack's
// lower-case names) or a channel id such as C0123456.
func ValidSlackChannel(s string) bool {
	return slackChannelName.MatchString(s) || slackChannelID.MatchString(s)
}

// Validate trims the input and checks it for its mode: a bot token
// (xoxb-), and the signing secret in HTTP mode or an app-level token
// (xapp-) in Socket Mode, and a channel. Returns EINVALID naming the
// field, never echoing a token.
func (in *SlackConnectionInput) Validate() error {
	in.Mode, in.BotToken, in.AppToken = strings.TrimSpace(in.Mode), strings.TrimSpace(in.BotToken), strings.TrimSpace(in.AppToken)
	in.SigningSecret, in.DefaultChannel = strings.TrimSpace(in.SigningSecret), strings.TrimSpace(in.DefaultChannel)
	switch {
	case in.Mode != SlackModeHTTP && in.Mode != SlackModeSocket:
		return FieldErrorf("mode", "Choose how Slack reaches Arbiter: HTTP or Socket Mode.")
	case !strings.HasPrefix(in.BotToken, "xoxb-") || len(in.BotToken) > 256:
		return FieldErrorf("bot_token", "The bot token starts with xoxb- (OAuth & Permissions in the app's settings).")
	case in.Mode == SlackModeHTTP && !slackSecret.MatchString(in.SigningSecret):
		return FieldErrorf("signing_secret", "The signing secret is the hexadecimal secret under Basic Information in the app's settings.")
	case in.Mode == SlackModeSocket && (!strings.HasPrefix(in.AppToken, "xapp-") || len(in.AppToken) > 256):
		return FieldErrorf("app_token", "Socket Mode needs the app-level token, which starts with xapp- (Basic Information, App-Level Tokens, scope connections:write).")
	case !ValidSlackChannel(in.DefaultChannel):
		return FieldErrorf("channel", "The channel is #name in lower case, or a channel id such as C0123456.")
	}
	if in.Mode == SlackModeHTTP {
		in.AppToken = ""
	} else {
		in.SigningSecret = ""
	}
	return nil
}

// ErrSlackNeedsKey refuses to store Slack's tokens when the operator set
// no ARBITER_SECRET_KEY to seal them under.
var ErrSlackNeedsKey = Errorf(ECONFLICT, "Slack cannot be connected until the operator sets ARBITER_SECRET_KEY, which keeps its tokens encrypted.")

// MaxSlackAccountsPerWorkspace bounds the accounts one Slack workspace
// connects to in HTTP mode: an interaction names only its workspace, so
// its signature is checked against the signing secret of each of them.
const MaxSlackAccountsPerWorkspace = 10

// ErrSlackWorkspaceFull refuses to connect a workspace connected to
// MaxSlackAccountsPerWorkspace other accounts already.
var ErrSlackWorkspaceFull = Errorf(ECONFLICT, "This Slack workspace is connected to %d Arbiter accounts already, the most one workspace may be: disconnect it from one of them first.", MaxSlackAccountsPerWorkspace)

// Slack audit event kinds.
const (
	AuditSlackConnected    = "slack_connected"
	AuditSlackDisconnected = "slack_disconnected"
)

// NewSlackAuditEvent is the audit log's line for a Slack connection
// change: the mode, workspace and channel, never a token.
func NewSlackAuditEvent(kind, accountID string, c *SlackConnection, by Actor) *AuditEvent {
	detail := "Slack"
	if c != nil {
		detail = c.Mode + " mode, workspace " + c.TeamID + ", channel " + c.DefaultChannel
	}
	return &AuditEvent{AccountID: accountID, Kind: kind, Actor: by.Email, Detail: detail,
		ClientIP: by.Client.IP, UserAgent: by.Client.UserAgent}
}

// Slack message kinds: the question posted when a task needs a person,
// and the update of every posted copy when it ends.
const (
	SlackPost   = "post"
	SlackUpdate = "update"
)

// Slack message statuses.
const (
	SlackPending = "pending" // waiting for its next attempt
	SlackSent    = "sent"    // Slack took it
	SlackFailed  = "failed"  // given up: a permanent error or too many attempts
	SlackSkipped = "skipped" // nothing to send: the task ended before its question went out
)

// SlackMessage is a row of the Slack outbox.
type SlackMessage struct {
	ID        string
	AccountID string
	TaskID    string
	Kind      string
	Channel   string
	Attempts  int
	// ChannelID and TS are what Slack answered to a post: where the
	// message is, for chat.update.
	ChannelID, TS string
	// PostStartedAt, when not zero, is when an attempt at this post began
	// whose outcome was never recorded (its process died, or its call
	// ended without Slack's answer): the post may be in Slack already,
	// and is looked for before it is posted again.
	PostStartedAt Timestamp
	// TraceParent is the W3C trace context of the span that queued the
	// message ("" when tracing was off): its delivery's span is a child.
	TraceParent string
}

// NewSlackMessageID returns a fresh Slack message id.
func NewSlackMessageID() string { return NewID("slm_", 12) }

// SlackDelivery is a claimed Slack message with what sending it needs:
// the account's connection (its tokens opened), the task as it is now,
// and for an update the posted copies to update.
type SlackDelivery struct {
	Message    *SlackMessage
	Connection *SlackConnection
	Task       *Task
	// Posts are the task's posted messages (Kind SlackPost, Slack's
	// ChannelID and TS set), for an update.
	Posts []*SlackMessage
	// PostsPending reports whether a post of the task has not been
	// sent yet, so an update waits for it.
	PostsPending bool
	// ChannelID is the id Slack gave the message's channel in answer to
	// an earlier post to it, "" when none is known: where to look for an
	// unrecorded post.
	ChannelID string
}

// SlackResult is the outcome of one attempt at a Slack message.
type SlackResult struct {
	// Sent is true when Slack took the message; ChannelID and TS are its
	// answer to a post.
	Sent          bool
	ChannelID, TS string
	// Skipped is true when there was nothing to send.
	Skipped bool
	// Error says why the attempt failed ("" when Sent or Skipped).
	Error string
	// Permanent marks an error no retry mends (a channel the app is not
	// in, a revoked token).
	Permanent bool
	// RetryAfter, when positive, is how long Slack asked to wait (429);
	// it does not count as a failed attempt.
	RetryAfter time.Duration
	// Defer, when positive, moves the message later without an attempt:
	// its channel's pace, or an update waiting for its post.
	Defer time.Duration
	// Unposted reports that no copy of this post can be in Slack: any
	// earlier unrecorded attempt was looked for and not found, and Slack
	// refused this one. The next attempt need not look for it.
	Unposted bool
	// Recovered reports that the post was found in Slack, posted by an
	// attempt whose outcome was never recorded, rather than posted now.
	Recovered bool
	// Quiet is how long the message's channel takes no other message
	// after this attempt: the deliverer's pace, or longer when Slack
	// asked (RetryAfter).
	Quiet time.Duration
}

// MaxSlackAttempts bounds the failed attempts at a Slack message.
const MaxSlackAttempts = 8

// SlackRetry is Slack's retry rule (NextDelivery): failures back off 2^n
// seconds, up to MaxSlackAttempts; a 429 paces the channel, waiting its
// Retry-After, and counts nothing.
var SlackRetry = RetryRule{Delays: slackDelays()}

// slackDelays are 1, 2, 4 … seconds, one fewer than MaxSlackAttempts.
func slackDelays() []time.Duration {
	delays := make([]time.Duration, MaxSlackAttempts-1)
	for i := range delays {
		delays[i] = time.Duration(1<<i) * time.Second
	}
	return delays
}

// NextSlackAttempt returns the status a message takes after an attempt
// that ended in r, its attempts counted so far (r's included when it
// counts), and the delay before its next attempt when it stays pending,
// by SlackRetry: a 429 and a deferral wait as asked and count nothing;
// other failures back off 2^n seconds up to MaxSlackAttempts.
func NextSlackAttempt(attempts int, r SlackResult) (status string, counted int, delay time.Duration) {
	step := NextDelivery(SlackRetry, attempts, DeliveryOutcome{Sent: r.Sent, Skipped: r.Skipped, Permanent: r.Permanent,
		RetryAfter: r.RetryAfter, Defer: r.Defer}, 0)
	switch step.State {
	case DeliveryDone:
		status = SlackSent
	case DeliverySkipped:
		status = SlackSkipped
	case DeliveryRetry:
		status = SlackPending
	default:
		status = SlackFailed
	}
	return status, step.Attempts, step.Delay
}

// SlackPostSettled reports whether, after an attempt that ended in r and
// left its message in status (NextSlackAttempt), no attempt at the post
// can have reached Slack unrecorded: the post was sent (its ts is
// recorded), skipped or given up, or r says it is not in Slack.
// Otherwise the next attempt looks for it first.
func SlackPostSettled(status string, r SlackResult) bool {
	return status != SlackPending || r.Unposted
}

// SlackReplayWindow is how long the signature of a request Slack signed
// is remembered: the five minutes a timestamp is accepted, and one more.
const SlackReplayWindow = 6 * time.Minute

// SlackService connects accounts to Slack.
type SlackService interface {
	// ConnectSlack stores the account's connection (replacing one) with
	// its workspace's teamID, and records it in the audit log. Returns
	// EINVALID for input Validate refuses, ErrSlackNeedsKey without a key
	// to seal the tokens, ErrSlackWorkspaceFull past
	// MaxSlackAccountsPerWorkspace, ErrNotAllowed when by may not manage
	// settings.
	ConnectSlack(ctx context.Context, accountID string, in SlackConnectionInput, teamID string, by Actor) (*SlackConnection, error)

	// DisconnectSlack forgets the account's connection and its pending
	// messages, and records it in the audit log. ENOTFOUND without one.
	DisconnectSlack(ctx context.Context, accountID string, by Actor) error

	// FindSlackConnection returns the account's connection, its tokens
	// opened, or ENOTFOUND.
	FindSlackConnection(ctx context.Context, accountID string) (*SlackConnection, error)

	// FirstSlackRequest records the signature of a request Slack signed
	// and reports whether it is the first seen with it, by any process,
	// within SlackReplayWindow: the same signature again is a replay.
	FirstSlackRequest(ctx context.Context, signature string) (bool, error)

	// ListSlackConnections returns every account's connection in a mode
	// (SlackModeHTTP or SlackModeSocket), tokens opened, or, for teamID
	// not "", those of that workspace.
	ListSlackConnections(ctx context.Context, mode, teamID string) ([]*SlackConnection, error)
}

// SlackDeliveryService is the Slack outbox's side of the store.
type SlackDeliveryService interface {
	// ClaimSlackMessages leases up to max due messages to owner for lease.
	ClaimSlackMessages(ctx context.Context, owner string, max int, lease time.Duration) ([]*SlackDelivery, error)

	// BeginSlackAttempt takes the turn of the channel of a message owner
	// holds, for lease at most, and returns 0 and false. Otherwise it
	// returns how long until the channel's pause (its last Quiet) ends,
	// or true when another message holds the turn now: that ends when its
	// attempt is recorded, which no one can say. Every process shares the
	// turns. For a post it records, before the call, that an attempt
	// began (SlackMessage.PostStartedAt), until its outcome is recorded.
	// ECONFLICT when the lease was lost.
	BeginSlackAttempt(ctx context.Context, owner, id string, lease time.Duration) (pause time.Duration, held bool, err error)

	// RecordSlackAttempt records the outcome of an attempt at a message
	// owner holds (NextSlackAttempt), ending its lease, and gives back its
	// channel's turn, if it held it, quiet for r.Quiet. ECONFLICT when
	// the lease was lost.
	RecordSlackAttempt(ctx context.Context, owner, id string, r SlackResult) error

	// SlackMessagesQueued receives after this process queued messages.
	SlackMessagesQueued() <-chan struct{}
}

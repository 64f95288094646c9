package arbiter

import (
	"context"
	"regexp"
	"strings"
	"time"
	"unicode"
)

// Microsoft Teams (issue 48): an account connects its Azure Bot
// registration; tasks that need a person are posted as Adaptive Cards to
// the Teams conversations the bot was added to, a click (an Action.Execute
// invoke) decides as the desk does, and every posted card is updated when
// the task ends. Incoming activities are verified (the Bot Framework's
// JWT); outgoing calls use the bot's client-credentials token. Like
// Slack's, a Teams user decides only as the member who linked it
// (chatlink.go).

// TeamsConnection is an account's bot: its Azure Bot registration's app
// id and client secret (sealed at rest, never shown again), the Microsoft
// Entra tenant it belongs to, and the conversation questions go to when a
// task names none.
type TeamsConnection struct {
	AccountID    string
	AppID        string
	ClientSecret string
	TenantID     string
	// DefaultConversation is the Name of the conversation questions go
	// to, "" until one is chosen.
	DefaultConversation string
	CreatedAt           Timestamp
}

// TeamsConnectionInput is what an owner or admin types to connect Teams.
type TeamsConnectionInput struct {
	AppID, ClientSecret, TenantID string
}

var teamsGUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// Validate trims the input and checks it: the app id and the tenant are
// GUIDs (lower-cased), the client secret 8 to 256 printable characters.
// Returns EINVALID naming the field, never echoing the secret.
func (in *TeamsConnectionInput) Validate() error {
	in.AppID = strings.ToLower(strings.TrimSpace(in.AppID))
	in.TenantID = strings.ToLower(strings.TrimSpace(in.TenantID))
	in.ClientSecret = strings.TrimSpace(in.ClientSecret)
	switch {
	case !teamsGUID.MatchString(in.AppID):
		return FieldErrorf("app_id", "The app id is the Microsoft App ID of the Azure Bot (Configuration), a GUID such as 1f0e2c7a-5b1d-4e8f-9a3c-7d6b5e4f3a21.")
	case !teamsGUID.MatchString(in.TenantID):
		return FieldErrorf("tenant_id", "The tenant is the Directory (tenant) ID of the bot's app registration, a GUID.")
	case len(in.ClientSecret) < 8 || len(in.ClientSecret) > 256 || strings.IndexFunc(in.ClientSecret, notPrintable) >= 0:
		return FieldErrorf("client_secret", "The client secret is the Value of a secret under Certificates & secrets in the bot's app registration.")
	}
	return nil
}

func notPrintable(r rune) bool { return r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' ' }

// ErrTeamsNeedsKey refuses to store a client secret when the operator set
// no ARBITER_SECRET_KEY to seal it under.
var ErrTeamsNeedsKey = Errorf(ECONFLICT, "Teams cannot be connected until the operator sets ARBITER_SECRET_KEY, which keeps its client secret encrypted.")

// ErrTeamsAppTaken refuses a bot another account connected: one bot
// serves one account, since an activity names only its bot.
var ErrTeamsAppTaken = FieldErrorf("app_id", "Another Arbiter account is connected to this bot. Register a bot of your own in Azure.")

// Teams audit event kinds.
const (
	AuditTeamsConnected    = "teams_connected"
	AuditTeamsDisconnected = "teams_disconnected"
	AuditTeamsDefault      = "teams_default_conversation"
)

// NewTeamsAuditEvent is the audit log's line for a Teams connection
// change: the bot, the tenant and the conversation, never the secret.
func NewTeamsAuditEvent(kind, accountID string, c *TeamsConnection, by Actor) *AuditEvent {
	detail := "Microsoft Teams"
	if c != nil {
		detail = "bot " + c.AppID + ", tenant " + c.TenantID
		if c.DefaultConversation != "" {
			detail += ", conversation " + c.DefaultConversation
		}
	}
	return &AuditEvent{AccountID: accountID, Kind: kind, Actor: by.Email, Detail: detail,
		ClientIP: by.Client.IP, UserAgent: by.Client.UserAgent}
}

// Teams conversation kinds, as Teams names them.
const (
	TeamsChannel   = "channel"
	TeamsPersonal  = "personal"
	TeamsGroupChat = "groupChat"
)

// TeamsConversation is a Teams conversation the bot was added to: a
// team's channel or a person's chat, and what posting to it later needs
// (its service URL and id, a conversation reference).
type TeamsConversation struct {
	AccountID string
	// ID is Teams' conversation id; ServiceURL where the Bot Connector
	// serving it answers.
	ID, ServiceURL string
	// Name is how notify targets and the settings name it ("teams:" +
	// Name): TeamsConversationName of its team and channel, or of the
	// person of a personal chat.
	Name string
	// Kind is TeamsChannel, TeamsPersonal or TeamsGroupChat; Title what
	// people read ("Finance › Approvals", "Chat with Ann Lee").
	Kind, Title string
	AddedAt     Timestamp
}

// MaxTeamsDeciders is how many people a card names for Teams to fetch
// their own view of it: Teams' limit on an Adaptive Card's
// refresh.userIds.
const MaxTeamsDeciders = 60

// MaxTeamsNameChars bounds a conversation's name.
const MaxTeamsNameChars = 100

var teamsName = regexp.MustCompile(`^[a-z0-9@][a-z0-9@._/-]{0,99}$`)

// ValidTeamsTarget reports whether s can name a Teams conversation:
// lower-case letters, digits and . _ - / @, as TeamsConversationName
// makes them.
func ValidTeamsTarget(s string) bool { return teamsName.MatchString(s) }

// TeamsConversationName names a conversation for notify targets: a
// channel by its team's and its own names ("finance/approvals"), a
// personal chat by its person's address ("@ann@example.com"), a group
// chat "chat/" and its title, each part lower-cased with anything but
// letters, digits, dots, underscores and @ turned to a hyphen. A name
// taken already is made unique by its caller.
func TeamsConversationName(kind, team, channel, person string) string {
	var name string
	switch kind {
	case TeamsChannel:
		name = slugOf(team) + "/" + slugOf(channel)
	case TeamsPersonal:
		name = "@" + slugOf(person)
	default:
		name = "chat/" + slugOf(channel)
	}
	if len(name) > MaxTeamsNameChars {
		name = strings.TrimRight(name[:MaxTeamsNameChars], "-/")
	}
	return name
}

// slugOf lower-cases s and turns every run of other characters than
// letters, digits, '.', '_' and '@' into one hyphen, trimmed.
func slugOf(s string) string {
	var b strings.Builder
	hyphen := false
	for _, r := range strings.ToLower(s) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == '_' || r == '@') {
			b.WriteRune(r)
			hyphen = false
		} else if !hyphen && b.Len() > 0 {
			b.WriteByte('-')
			hyphen = true
		}
	}
	out := strings.Trim(b.String(), "-.")
	if out == "" {
		return "x"
	}
	return out
}

// NotifyTeamsPrefix starts a Teams target of a task's notify list.
const NotifyTeamsPrefix = "teams:"

// TeamsTargets returns the Teams conversations of a notify list.
func TeamsTargets(notify []string) []string {
	var out []string
	for _, t := range notify {
		if c, ok := strings.CutPrefix(t, NotifyTeamsPrefix); ok {
			out = append(out, c)
		}
	}
	return out
}

// TeamsService connects accounts to Teams and keeps the conversations
// their bots were added to.
type TeamsService interface {
	// ConnectTeams stores the account's bot (replacing one), its secret
	// sealed, and records it in the audit log. Returns EINVALID for input
	// Validate refuses, ErrTeamsNeedsKey without a key to seal with,
	// ErrTeamsAppTaken for another account's bot, ErrNotAllowed when by
	// may not manage settings.
	ConnectTeams(ctx context.Context, accountID string, in TeamsConnectionInput, by Actor) (*TeamsConnection, error)

	// DisconnectTeams forgets the account's bot, its conversations and
	// its unsent messages, and records it in the audit log. ENOTFOUND
	// without one.
	DisconnectTeams(ctx context.Context, accountID string, by Actor) error

	// FindTeamsConnection returns the account's bot, its secret opened,
	// or ENOTFOUND.
	FindTeamsConnection(ctx context.Context, accountID string) (*TeamsConnection, error)

	// FindTeamsConnectionByApp returns the connection of the bot appID,
	// its secret opened, or ENOTFOUND.
	FindTeamsConnectionByApp(ctx context.Context, appID string) (*TeamsConnection, error)

	// SetTeamsDefault makes the account's conversation named name the one
	// questions go to ("" for none), and records it in the audit log.
	// ENOTFOUND for a name no conversation has.
	SetTeamsDefault(ctx context.Context, accountID, name string, by Actor) error

	// SaveTeamsConversation stores a conversation the account's bot was
	// added to, or updates it (its service URL, its title), and returns
	// it with its name: c.Name, or c.Name with "-2", "-3"… when another
	// conversation of the account has it.
	SaveTeamsConversation(ctx context.Context, c *TeamsConversation) (*TeamsConversation, error)

	// RemoveTeamsConversation forgets a conversation the bot was removed
	// from (nothing when it is not stored).
	RemoveTeamsConversation(ctx context.Context, accountID, conversationID string) error

	// ListTeamsConversations returns the account's conversations by name.
	ListTeamsConversations(ctx context.Context, accountID string) ([]*TeamsConversation, error)

	// TeamsDeciders returns the Teams ids of the account's reviewers
	// whose Teams user of the bot appID is linked to them, at most
	// MaxTeamsDeciders, the latest linked first.
	TeamsDeciders(ctx context.Context, accountID, appID string) ([]string, error)
}

// Teams message kinds: the card posted when a task needs a person, and
// the update of every posted card of a conversation when it changes.
const (
	TeamsPost   = "post"
	TeamsUpdate = "update"
)

// Teams message statuses.
const (
	TeamsPending = "pending" // waiting for its next attempt
	TeamsSent    = "sent"    // the Bot Connector took it
	TeamsFailed  = "failed"  // given up: a permanent error or too many attempts
	TeamsSkipped = "skipped" // nothing to send: the task ended before its card went out
)

// TeamsMessage is a row of the Teams outbox.
type TeamsMessage struct {
	ID, AccountID, TaskID, Kind string
	// Conversation is the Name of the conversation it goes to.
	Conversation string
	Attempts     int
	// ActivityID, ConversationID and ServiceURL say where a sent post's
	// card is, for an update.
	ActivityID, ConversationID, ServiceURL string
	// TraceParent is the W3C trace context of the span that queued the
	// message ("" when tracing was off): its delivery's span is a child.
	TraceParent string
}

// NewTeamsMessageID returns a fresh Teams message id.
func NewTeamsMessageID() string { return NewID("tmm_", 12) }

// TeamsDelivery is a claimed Teams message with what sending it needs: the
// account's bot (its secret opened), the conversation it goes to (nil
// when the bot is no longer in one of that name), the task as it is now,
// the people whose own view its card names, and for an update the posted
// cards to update.
type TeamsDelivery struct {
	Message      *TeamsMessage
	Connection   *TeamsConnection
	Conversation *TeamsConversation
	Task         *Task
	Deciders     []string
	// Posts are the task's sent posts in the message's conversation, for
	// an update; PostsPending reports one not sent yet, which the update
	// waits for.
	Posts        []*TeamsMessage
	PostsPending bool
}

// TeamsResult is the outcome of one attempt at a Teams message.
type TeamsResult struct {
	DeliveryOutcome
	// ActivityID, ConversationID and ServiceURL are where a post's card
	// went.
	ActivityID, ConversationID, ServiceURL string
	// Error says why the attempt failed ("" when sent or skipped).
	Error string
	// Quiet is how long the message's conversation takes no other message
	// after this attempt: the deliverer's pace, or longer when the Bot
	// Connector asked (RetryAfter).
	Quiet time.Duration
}

// MaxTeamsAttempts bounds the failed attempts at a Teams message.
const MaxTeamsAttempts = 8

// TeamsRetry is the Teams outbox's retry rule: 1, 2, 4 … 64 seconds after
// each failure, varied by a tenth, failing at the eighth; a 429 waits its
// Retry-After without counting, as it paces the conversation (Slack's
// rule: the Bot Connector throttles per conversation as Slack per
// channel).
var TeamsRetry = RetryRule{Delays: teamsDelays(), Jitter: 0.1}

func teamsDelays() []time.Duration {
	delays := make([]time.Duration, MaxTeamsAttempts-1)
	for i := range delays {
		delays[i] = time.Duration(1<<i) * time.Second
	}
	return delays
}

// TeamsStatusOf is the message status a delivery step leaves it in.
func TeamsStatusOf(step DeliveryStep) string {
	switch step.State {
	case DeliveryDone:
		return TeamsSent
	case DeliverySkipped:
		return TeamsSkipped
	case DeliveryRetry:
		return TeamsPending
	}
	return TeamsFailed
}

// TeamsDeliveryService is the Teams outbox's side of the store.
type TeamsDeliveryService interface {
	// ClaimTeamsMessages leases up to max due messages to owner for lease,
	// each with what sending it needs (TeamsDelivery).
	ClaimTeamsMessages(ctx context.Context, owner string, max int, lease time.Duration) ([]*TeamsDelivery, error)

	// BeginTeamsAttempt takes the turn of the conversation of a message
	// owner holds, for lease at most, and returns 0 and false; otherwise
	// how long until its pause ends, or true while another message holds
	// it. Every process shares the turns. ECONFLICT when the lease was
	// lost.
	BeginTeamsAttempt(ctx context.Context, owner, id string, lease time.Duration) (pause time.Duration, held bool, err error)

	// RecordTeamsAttempt moves a message owner holds on as step says
	// (NextDelivery with TeamsRetry of the attempt's r), keeps where a
	// post's card went, ends its lease, and gives back its
	// conversation's turn, quiet for r.Quiet. ECONFLICT when the lease
	// was lost.
	RecordTeamsAttempt(ctx context.Context, owner, id string, step DeliveryStep, r TeamsResult) error

	// ReleaseTeamsMessages ends the leases owner still holds, for a
	// deliverer that stops with messages unsent.
	ReleaseTeamsMessages(ctx context.Context, owner string) error

	// TeamsMessagesQueued receives after this process queued messages.
	TeamsMessagesQueued() <-chan struct{}
}

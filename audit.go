package arbiter

import "context"

// Audit event kinds.
const (
	AuditSignIn        = "sign_in"
	AuditSignOut       = "sign_out"
	AuditKeyCreated    = "key_created"
	AuditKeyRevoked    = "key_revoked"
	AuditReviewDecided = "review_decided"
	// AuditActionExecuted records a claim on the execution of a task's
	// approved action (ExecutionService).
	AuditActionExecuted = "action_executed"
	// AuditReviewVoted is one vote on a task that asks several; the
	// decision is the votes' together.
	AuditReviewVoted = "review_voted"
)

// AuditEvent is one line of an account's audit log: a sign-in or sign-out,
// a key created or revoked, or a reviewer's decision, with who did it and
// from where.
type AuditEvent struct {
	ID        int64
	AccountID string
	Kind      string // one of the Audit* kinds
	Actor     string // who: the signed-in person's e-mail
	Detail    string // what: the sign-in method, the key's name and prefix, or the verdict and task
	ClientIP  string
	UserAgent string
	CreatedAt Timestamp
}

// Actor is who made a change the audit log records, and from where.
type Actor struct {
	Email string // the signed-in person's e-mail, or OperatorActor
	// PersonID is the signed-in person, whose role the store checks; ""
	// for the operator, whose admin commands may do everything.
	PersonID string
	Client   Client
}

// OperatorActor names the operator's admin commands as the actor of what
// they change.
const OperatorActor = "the operator (arbiter admin)"

// NewKeyAuditEvent returns the audit event of the key k created or revoked
// by the actor.
func NewKeyAuditEvent(kind string, by Actor, k *APIKey) *AuditEvent {
	return &AuditEvent{
		AccountID: k.AccountID,
		Kind:      kind,
		Actor:     by.Email,
		Detail:    k.Name + " (" + k.Prefix + "…)",
		ClientIP:  by.Client.IP,
		UserAgent: by.Client.UserAgent,
	}
}

// NewSignOutAuditEvent returns the audit event of the session's person
// signing out; the detail is how they had signed in.
func NewSignOutAuditEvent(s *Session, c Client) *AuditEvent {
	return &AuditEvent{
		AccountID: s.AccountID,
		Kind:      AuditSignOut,
		Actor:     s.Email,
		Detail:    s.Method,
		ClientIP:  c.IP,
		UserAgent: c.UserAgent,
	}
}

// NewReviewAuditEvent returns the audit event of a reviewer's decision on
// the account's task: the verdict and the task, as “reject” on tsk_….
func NewReviewAuditEvent(accountID, taskID string, d HumanDecision) *AuditEvent {
	via := ""
	if d.Via != "" {
		via = " via " + d.Via
	}
	return &AuditEvent{
		AccountID: accountID,
		Kind:      AuditReviewDecided,
		Actor:     d.Reviewer,
		Detail:    "“" + d.Verdict + "” on " + taskID + via,
		ClientIP:  d.Client.IP,
		UserAgent: d.Client.UserAgent,
	}
}

// NewVoteAuditEvent is the audit event of a reviewer's vote d on a task
// that asks several votes.
func NewVoteAuditEvent(accountID, taskID string, d HumanDecision) *AuditEvent {
	e := NewReviewAuditEvent(accountID, taskID, d)
	e.Kind = AuditReviewVoted
	return e
}

// AuditService keeps accounts' audit logs.
type AuditService interface {
	// RecordAuditEvent appends an event to its account's log, stamped with
	// the store's clock.
	RecordAuditEvent(ctx context.Context, e *AuditEvent) error

	// ListAuditEvents returns the account's latest events, newest first,
	// at most limit of them.
	ListAuditEvents(ctx context.Context, accountID string, limit int) ([]*AuditEvent, error)
}

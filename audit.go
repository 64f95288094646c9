package arbiter

import "context"

// Audit event kinds.
const (
	AuditSignIn     = "sign_in"
	AuditKeyCreated = "key_created"
	AuditKeyRevoked = "key_revoked"
)

// AuditEvent is one line of an account's audit log: a sign-in, or a key
// created or revoked, with who did it and from where.
type AuditEvent struct {
	ID        int64
	AccountID string
	Kind      string // AuditSignIn, AuditKeyCreated or AuditKeyRevoked
	Actor     string // who: the signed-in person's e-mail
	Detail    string // what: the sign-in method, or the key's name and prefix
	ClientIP  string
	UserAgent string
	CreatedAt Timestamp
}

// NewKeyAuditEvent returns the audit event of a key created or revoked by the
// session's person.
func NewKeyAuditEvent(kind string, s *Session, k *APIKey, c Client) *AuditEvent {
	return &AuditEvent{
		AccountID: k.AccountID,
		Kind:      kind,
		Actor:     s.Email,
		Detail:    k.Name + " (" + k.Prefix + "…)",
		ClientIP:  c.IP,
		UserAgent: c.UserAgent,
	}
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

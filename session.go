package arbiter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// SessionTTL is how long a dashboard session lasts after sign-in.
const SessionTTL = 30 * 24 * time.Hour

// DefaultSessionIdle is how long a session may go unused before it ends,
// unless the operator sets another (ARBITER_SESSION_IDLE_TIMEOUT).
const DefaultSessionIdle = 14 * 24 * time.Hour

// maxSessionTouchInterval bounds how stale a session's last-seen time may
// be: a session's use is written at most once in this long.
const maxSessionTouchInterval = time.Hour

// SessionIdle reports whether a session last seen at lastSeen has gone
// unused for idle or longer at now, and so is over.
func SessionIdle(lastSeen, now Timestamp, idle time.Duration) bool {
	return now-lastSeen >= Timestamp(idle.Milliseconds())
}

// SessionTouchDue reports whether a session used at now should have its
// last-seen time written: it was last written an hour ago or more (a
// quarter of idle, when that is shorter), so a session in use writes at
// most once an hour and still never looks idle while it is used.
func SessionTouchDue(lastSeen, now Timestamp, idle time.Duration) bool {
	every := min(maxSessionTouchInterval, idle/4)
	return now-lastSeen >= Timestamp(every.Milliseconds())
}

// Sign-in methods, recorded on sessions and in the audit log.
const (
	SignInEmail  = "email"
	SignInGitHub = "github"
	SignInGoogle = "google"
	SignInOIDC   = "oidc"
)

// SignInMethodLabel names a sign-in method for people.
func SignInMethodLabel(method string) string {
	switch method {
	case SignInEmail:
		return "E-mail link"
	case SignInGitHub:
		return "GitHub"
	case SignInGoogle:
		return "Google"
	case SignInOIDC:
		return "OpenID Connect"
	}
	return method
}

// Session is a signed-in person's stay on the dashboard and the reviewer
// site. Its token lives in a cookie; the store keeps only its SHA-256, so a
// copy of the database cannot be used to sign in.
type Session struct {
	ID       string
	PersonID string
	Email    string // the person's e-mail, for display and the audit log
	// AccountID is the account the person works in now, chosen in the
	// navigation's switcher; "" when they are a member of none. A session
	// whose account removed the person falls back to another of theirs.
	AccountID   string
	AccountName string // the current account's e-mail, which names it
	Role        string // the person's role in the current account
	// Accounts are the person's memberships, for the switcher.
	Accounts  []*Membership
	Method    string // how the person signed in: SignInEmail, SignInGitHub, …
	CreatedAt Timestamp
	ExpiresAt Timestamp
}

// Client describes who sent a request, for the audit log.
type Client struct {
	IP        string
	UserAgent string
}

// MaxUserAgentChars bounds the user agent kept in the audit log.
const MaxUserAgentChars = 512

// NewSecretToken returns a fresh random token of 32 bytes in hex, for
// sessions and sign-in links.
func NewSecretToken() string { return NewID("", 32) }

// HashToken returns the stored form of a secret token, an API key's
// plaintext or a session or sign-in token: its hex SHA-256. Tokens are
// random, so an unsalted fast hash suffices.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// SessionService keeps dashboard sessions.
type SessionService interface {
	// CreateSession starts a session for the person in the first account
	// they are a member of, and records the sign-in in that account's audit
	// log, in one step. It returns the session and its token, which is
	// stored only hashed. Returns ENOTFOUND for an unknown person and
	// ErrDemoSignIn for the demo account's address.
	CreateSession(ctx context.Context, personID, method string, client Client) (*Session, string, error)

	// SwitchAccount makes accountID the session's current account.
	// Returns ENOTFOUND when the session's person is not a member of it,
	// and EUNAUTHORIZED for an ended session.
	SwitchAccount(ctx context.Context, token, accountID string) error

	// FindSessionByToken returns the live session with the token, its
	// person's memberships and their role in the current account, and
	// notes its use (SessionTouchDue: at most one write an hour). Returns
	// EUNAUTHORIZED for an unknown, ended or expired one, for one unused
	// for the store's idle limit (SessionIdle), which it deletes, and for
	// any session of the demo account's address; memberships of the demo
	// account are never listed.
	FindSessionByToken(ctx context.Context, token string) (*Session, error)

	// DeleteSession ends the session with the token; ending an unknown
	// session is not an error.
	DeleteSession(ctx context.Context, token string) error

	// DeletePersonSessions ends every session of the person, on every
	// device ("sign out everywhere"), and returns how many it ended.
	DeletePersonSessions(ctx context.Context, personID string) (int, error)

	// SessionSecret returns the key that signs and encrypts session
	// cookies, generating and storing it on first use so every process and
	// every restart shares it.
	SessionSecret(ctx context.Context) (string, error)
}

type sessionKey struct{}

// NewContextWithSession returns a context carrying the signed-in session.
func NewContextWithSession(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// SessionFromContext returns the signed-in session, or nil.
func SessionFromContext(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionKey{}).(*Session)
	return s
}

package arbiter

import (
	"context"
	"net/mail"
	"strings"
	"time"
)

// Account owns tasks and API keys. People sign in to it; its e-mail is the
// verified address of its first identity.
type Account struct {
	ID       string
	Email    string
	DailyCap *int // nil means the operator's default cap
	// ReservationLength is how long opening a task on the desk reserves
	// it for the reviewer (DefaultReservation unless the account set one).
	ReservationLength time.Duration
	// NotifyAfter, when set, has the account's reviewers e-mailed once a
	// task has waited that long (at most one digest an hour each).
	NotifyAfter *time.Duration
	// GoldRate is how often an ask for the next task on the desk serves a
	// waiting gold task first (GoldFirst); DefaultGoldRate unless set.
	GoldRate  float64
	CreatedAt Timestamp
}

// The daily task cap: how many tasks an account may create per UTC day.
// The store keeps a cap as a 32-bit integer, so MaxDailyTaskCap is the
// largest it can hold.
const (
	DefaultDailyTaskCap = 1000
	MaxDailyTaskCap     = 1<<31 - 1
)

// CheckDailyCap returns EINVALID unless n is a cap the store can hold:
// from 0 (no creates at all) to MaxDailyTaskCap.
func CheckDailyCap(n int) error {
	if n < 0 || n > MaxDailyTaskCap {
		return Errorf(EINVALID, "The daily cap must be a whole number from 0 to %d.", MaxDailyTaskCap)
	}
	return nil
}

// DemoAccountID owns the curated demo queue.
const DemoAccountID = "acct_demo"

// DemoAccountEmail is the demo account's address. The .invalid top-level
// domain never receives mail, and no sign-in may claim it (see
// CheckSignInEmail).
const DemoAccountEmail = "demo@arbiter.invalid"

// ErrDemoSignIn refuses every sign-in to the demo account.
var ErrDemoSignIn = Errorf(EUNAUTHORIZED, "Nobody can sign in to the demo account. Try the demo without signing in, on the reviewer site.")

// CheckSignInEmail returns ErrDemoSignIn for the demo account's address, by
// whatever method it comes: an e-mail link asked for it, or an identity
// provider vouching for it. The demo queue is shown to every anonymous
// visitor, so whoever signed in to it could show them anything.
func CheckSignInEmail(email string) error {
	if strings.EqualFold(strings.TrimSpace(email), DemoAccountEmail) {
		return ErrDemoSignIn
	}
	return nil
}

// CheckSignInAccount returns ErrDemoSignIn for the demo account, whichever
// address or identity leads to it, so no session is ever started for it.
func CheckSignInAccount(a *Account) error {
	if a.ID == DemoAccountID {
		return ErrDemoSignIn
	}
	return CheckSignInEmail(a.Email)
}

// NewAccountID returns a fresh account id.
func NewAccountID() string { return NewID("acct_", 8) }

// NormalizeEmail lower-cases the ASCII letters of an e-mail address and
// checks it. Returns EINVALID when it is not a plain address.
//
// Only ASCII letters are lower-cased: Unicode case mapping folds other
// characters onto ASCII ones (the Kelvin sign K to k, İ to i), so a
// look-alike address that a provider verified for someone else would
// become another person's address, and join their accounts or take their
// invitations. Other characters are kept as they are, and compared
// exactly.
func NormalizeEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Address != s || len(s) > 254 {
		return "", Errorf(EINVALID, "%q is not a valid e-mail address.", s)
	}
	return lowerASCII(s), nil
}

// SameEmail reports whether two addresses are the same: equal once their
// ASCII letters are lower-cased, with no Unicode case folding (ſ is not s,
// the Kelvin sign is not k), for the reason NormalizeEmail gives.
func SameEmail(a, b string) bool {
	return lowerASCII(strings.TrimSpace(a)) == lowerASCII(strings.TrimSpace(b))
}

// lowerASCII lower-cases the ASCII letters of s and keeps every other byte.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// AccountService finds and creates accounts.
type AccountService interface {
	// FindOrCreateAccountByEmail returns the account with the e-mail,
	// creating it when absent, with the person of that address as its
	// owner.
	FindOrCreateAccountByEmail(ctx context.Context, email string) (*Account, error)

	// FindAccountByEmail returns ENOTFOUND when no account has the e-mail.
	FindAccountByEmail(ctx context.Context, email string) (*Account, error)

	// FindAccountByID returns ENOTFOUND for an unknown account.
	FindAccountByID(ctx context.Context, id string) (*Account, error)

	// SetReservationLength sets how long opening a task reserves it.
	// Returns EINVALID for a length CheckReservation refuses, and
	// ErrNotAllowed when by's role may not manage settings.
	SetReservationLength(ctx context.Context, accountID string, d time.Duration, by Actor) error

	// SetNotifyAfter sets after how long a wait reviewers are e-mailed;
	// nil turns it off. Returns EINVALID for a wait CheckNotifyAfter
	// refuses, and ErrNotAllowed when by's role may not manage settings.
	SetNotifyAfter(ctx context.Context, accountID string, d *time.Duration, by Actor) error

	// SetGoldRate sets how often the desk serves a waiting gold task
	// first. Returns EINVALID for a rate CheckGoldRate refuses, and
	// ErrNotAllowed when by's role may not manage settings.
	SetGoldRate(ctx context.Context, accountID string, rate float64, by Actor) error

	// SetDailyCap sets the account's own daily task cap; nil returns it to the
	// default. Returns EINVALID for a cap CheckDailyCap refuses and
	// ENOTFOUND for an unknown account.
	SetDailyCap(ctx context.Context, accountID string, cap *int) error

	// UsageToday returns how many tasks the account created today (UTC) and
	// its effective cap.
	UsageToday(ctx context.Context, accountID string) (used, cap int, err error)

	// DeleteAccount deletes the account and everything it holds: its
	// tasks, keys, webhooks, members, invitations and audit log, in one
	// transaction. Its members' sessions fall back to their other accounts.
	// Returns ErrNotAllowed when by's role may not delete it, and EINVALID
	// when CheckAccountDeletion refuses confirm.
	DeleteAccount(ctx context.Context, accountID, confirm string, by Actor) error
}

// CheckAccountDeletion returns nil when the account may be deleted by a
// person who typed confirm: its e-mail address, which names it (case and
// surrounding spaces aside). The demo account is never deleted. Returns
// EINVALID otherwise.
func CheckAccountDeletion(a *Account, confirm string) error {
	if a.ID == DemoAccountID {
		return Errorf(EINVALID, "The demo account cannot be deleted.")
	}
	if !strings.EqualFold(strings.TrimSpace(confirm), a.Email) {
		return Errorf(EINVALID, "To delete the account, type its name, %s (capitals or not).", a.Email)
	}
	return nil
}

type accountIDKey struct{}

// NewContextWithAccountID returns a context carrying the authenticated
// account's id, as set by the API key check or the session.
func NewContextWithAccountID(ctx context.Context, accountID string) context.Context {
	return context.WithValue(ctx, accountIDKey{}, accountID)
}

// AccountIDFromContext returns the authenticated account's id, or "".
func AccountIDFromContext(ctx context.Context) string {
	id, _ := ctx.Value(accountIDKey{}).(string)
	return id
}

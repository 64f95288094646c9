package dashboard

import "github.com/arbiterhq/arbiter"

// PersonView is the signed-in person's own page: who they are signed in as,
// the accounts they belong to, and the way to end every session.
type PersonView struct {
	// Email is the person's address.
	Email string
	// Method is how this session signed in (arbiter.SignInEmail, …).
	Method string
	// Accounts are the person's memberships.
	Accounts []*arbiter.Membership
	// IdleFor says how long an unused session lasts, e.g. "14 days".
	IdleFor string
}

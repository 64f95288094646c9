// Package limits keeps the limits a deployment states per client, key,
// account or channel, so that they mean one thing however many processes
// serve it. On Postgres (Shared) every process spends from the same
// buckets and counts against the same slots, kept in tables of the
// database; on SQLite, where one process is the deployment, they live in
// that process's memory (Local).
//
// A rate limit is a token bucket per key (arbiter.RateLimit); a slot
// limit bounds what runs at once per key (arbiter.SlotLimit); a state is
// a small value that several processes change in turns (State), such as a
// verifier provider's adaptive limiter.
package limits

import (
	"context"
	"time"

	"github.com/arbiterhq/arbiter"
)

// Limits makes the limits of a deployment. Each limit has a name, unique
// in the deployment, that the keys it counts are kept under: two
// processes that make the limit of one name share it (on Postgres).
type Limits interface {
	// Rate returns the rate limit name: burst requests of a key at once,
	// and one more every every.
	Rate(name string, burst int, every time.Duration) arbiter.RateLimit
	// Slots returns the slot limit name: at most max requests of a key at
	// once.
	Slots(name string, max int) arbiter.SlotLimit
	// Shared reports whether the limits hold across processes.
	Shared() bool
}

// State keeps small values, by key, that several processes change in
// turns: Update runs fn on the key's value (nil the first time) and
// stores what it returns, while no other Update of the key runs, in any
// process. now is the time all of them agree on (the database's), for a
// value that holds times.
type State interface {
	Update(ctx context.Context, key string, fn func(value []byte, now time.Time) ([]byte, error)) error
}

// Local keeps the limits in this process: for SQLite, whose one process
// is the deployment, and for tests. Now is the clock of its rate limits
// (nil: time.Now).
type Local struct {
	Now arbiter.Clock
}

// Rate implements Limits with an arbiter.RateLimiter.
func (l Local) Rate(_ string, burst int, every time.Duration) arbiter.RateLimit {
	return arbiter.NewRateLimiter(burst, every, l.Now)
}

// Slots implements Limits with an arbiter.InFlightLimiter.
func (l Local) Slots(_ string, max int) arbiter.SlotLimit {
	return arbiter.NewInFlightLimiter(max)
}

// Shared implements Limits: Local's limits are this process's.
func (Local) Shared() bool { return false }

// Waiters returns the bound on the requests that wait for a task at once:
// perKey of an API key and perAccount of an account. On Postgres (Shared)
// it is one budget for the deployment, a slot of the key and one of the
// account held by each wait ("waiters-key", "waiters-account"), which each
// process reserves in blocks, so that most waits cost no statement (see
// blockSlots); otherwise it is this process's counts.
func Waiters(l Limits, perKey, perAccount int) arbiter.WaiterLimiter {
	s, ok := l.(*Shared)
	if !ok {
		return arbiter.NewWaiterCounts(perKey, perAccount)
	}
	return arbiter.SlotWaiters{
		Keys: s.blocks("waiters-key", perKey), Accounts: s.blocks("waiters-account", perAccount),
		PerKey: perKey, PerAccount: perAccount,
	}
}

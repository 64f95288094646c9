package db

import (
	"context"
	"sync"
	"time"
)

// Grouping of hot-path calls on Postgres. Calls that arrive while earlier
// ones are in flight queue up and go together in the next group: one
// statement and one round trip (and, for writes, one commit) for all of
// them instead of one each. Under load this is what bounds latency; a call
// that arrives alone is a group of one and runs at once.
const (
	// maxGroup bounds the calls in one statement, unless a grouper sets
	// its own max.
	maxGroup = 128
	// groupsInFlight is how many groups of one kind may run at once, so
	// that one waiting on the disk or the network does not hold up the
	// next.
	groupsInFlight = 2
)

// call is one caller's part of a group.
type call[In, Out any] struct {
	in In
	// deadline is when the caller stops waiting; zero for none.
	deadline time.Time
	out      Out
	err      error
	taken    bool          // in a running group; guarded by the grouper's mu
	done     chan struct{} // closed once out and err are set
}

// grouper queues calls and hands them to run in groups. run must set out
// or err on every call it is given; the grouper closes done.
type grouper[In, Out any] struct {
	run func(ctx context.Context, calls []*call[In, Out])
	// max bounds the calls in one group (default maxGroup).
	max int
	// timeout bounds one group, the store's timeout. A group runs
	// detached from the callers' contexts, so that a caller that gives up
	// does not cancel the others, but not past the last of their
	// deadlines: work that every caller stopped waiting for is not worth
	// doing.
	timeout time.Duration

	mu      sync.Mutex
	queue   []*call[In, Out]
	running int   // group loops running
	grouped int64 // calls that shared a statement (counted by run)
}

// do queues in and waits for its group, until ctx ends. A caller whose
// context ends while its call is still queued withdraws it; one whose call
// is in a running group stops waiting and the group goes on without it, so
// its outcome is unknown: a create may or may not have been stored (which
// the store's EUNAVAILABLE says), and its idempotency key settles it.
func (g *grouper[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := &call[In, Out]{in: in, done: make(chan struct{})}
	c.deadline, _ = ctx.Deadline()
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.running < groupsInFlight {
		g.running++
		go g.loop()
	}
	g.mu.Unlock()

	select {
	case <-c.done:
		return c.out, c.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	select {
	case <-c.done: // the outcome came as the caller gave up
		g.mu.Unlock()
		return c.out, c.err
	default:
	}
	if !c.taken {
		for i, q := range g.queue {
			if q == c {
				g.queue = append(g.queue[:i], g.queue[i+1:]...)
				break
			}
		}
	}
	g.mu.Unlock()
	var zero Out
	return zero, ctx.Err()
}

// loop takes groups off the queue and runs them until the queue is empty.
func (g *grouper[In, Out]) loop() {
	for {
		g.mu.Lock()
		limit := g.max
		if limit <= 0 {
			limit = maxGroup
		}
		n := min(len(g.queue), limit)
		if n == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		calls := make([]*call[In, Out], n)
		copy(calls, g.queue)
		for _, c := range calls {
			c.taken = true
		}
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.mu.Unlock()

		ctx, cancel := context.WithDeadline(context.Background(), groupDeadline(calls, time.Now().Add(g.timeout)))
		g.run(ctx, calls)
		cancel()
		for _, c := range calls {
			close(c.done)
		}
	}
}

// groupDeadline returns the last deadline of calls, or limit when that is
// earlier or some call has none. A group that falls back to one statement
// per call does so within it, not with a new timeout.
func groupDeadline[In, Out any](calls []*call[In, Out], limit time.Time) time.Time {
	var last time.Time
	for _, c := range calls {
		if c.deadline.IsZero() {
			return limit
		}
		if c.deadline.After(last) {
			last = c.deadline
		}
	}
	if last.After(limit) {
		return limit
	}
	return last
}

// addGrouped counts n calls answered by a shared statement.
func (g *grouper[In, Out]) addGrouped(n int) {
	g.mu.Lock()
	g.grouped += int64(n)
	g.mu.Unlock()
}

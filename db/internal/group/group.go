// Package group runs calls in groups: calls that arrive while earlier ones
// are in flight queue up and go together in the next group, so that the
// caller's run answers all of them with one statement and one round trip
// (and, for writes, one commit) instead of one each. Under load this is
// what bounds latency; a call that arrives alone is a group of one and runs
// at once. The package knows no SQL: the store gives each grouper its run.
package group

import (
	"context"
	"sync"
	"time"
)

const (
	// MaxGroup bounds the calls in one group, unless a grouper sets its
	// own Max.
	MaxGroup = 128
	// InFlight is how many groups of one grouper may run at once, so that
	// one waiting on the disk or the network does not hold up the next.
	InFlight = 2
)

// Call is one caller's part of a group. Run reads In and sets Out or Err.
type Call[In, Out any] struct {
	In  In
	Out Out
	Err error
	// deadline is when the caller stops waiting; zero for none.
	deadline time.Time
	taken    bool          // in a running group; guarded by the grouper's mu
	done     chan struct{} // closed once Out and Err are set
}

// Grouper queues calls and hands them to Run in groups. Run must set Out
// or Err on every call it is given; the grouper tells the callers. The zero
// value with Run set is ready to use.
type Grouper[In, Out any] struct {
	// Run answers a group of calls.
	Run func(ctx context.Context, calls []*Call[In, Out])
	// Max bounds the calls in one group (default MaxGroup).
	Max int
	// Timeout bounds one group, the store's timeout. A group runs
	// detached from the callers' contexts, so that a caller that gives up
	// does not cancel the others, but not past the last of their
	// deadlines: work that every caller stopped waiting for is not worth
	// doing.
	Timeout time.Duration

	mu      sync.Mutex
	queue   []*Call[In, Out]
	running int   // group loops running
	grouped int64 // calls that shared a statement (counted by Run)
}

// Do queues in and waits for its group, until ctx ends. A caller whose
// context ends while its call is still queued withdraws it; one whose call
// is in a running group stops waiting and the group goes on without it, so
// its outcome is unknown: a create may or may not have been stored (which
// the store's EUNAVAILABLE says), and its idempotency key settles it.
func (g *Grouper[In, Out]) Do(ctx context.Context, in In) (Out, error) {
	c := &Call[In, Out]{In: in, done: make(chan struct{})}
	c.deadline, _ = ctx.Deadline()
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.running < InFlight {
		g.running++
		go g.loop()
	}
	g.mu.Unlock()

	select {
	case <-c.done:
		return c.Out, c.Err
	case <-ctx.Done():
	}
	g.mu.Lock()
	select {
	case <-c.done: // the outcome came as the caller gave up
		g.mu.Unlock()
		return c.Out, c.Err
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
func (g *Grouper[In, Out]) loop() {
	for {
		g.mu.Lock()
		limit := g.Max
		if limit <= 0 {
			limit = MaxGroup
		}
		n := min(len(g.queue), limit)
		if n == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		calls := make([]*Call[In, Out], n)
		copy(calls, g.queue)
		for _, c := range calls {
			c.taken = true
		}
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.mu.Unlock()

		ctx, cancel := context.WithDeadline(context.Background(), deadline(calls, time.Now().Add(g.Timeout)))
		g.Run(ctx, calls)
		cancel()
		for _, c := range calls {
			close(c.done)
		}
	}
}

// deadline returns the last deadline of calls, or limit when that is
// earlier or some call has none. A group that falls back to one statement
// per call does so within it, not with a new timeout.
func deadline[In, Out any](calls []*Call[In, Out], limit time.Time) time.Time {
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

// AddGrouped counts n calls answered by a shared statement; Run calls it.
func (g *Grouper[In, Out]) AddGrouped(n int) {
	g.mu.Lock()
	g.grouped += int64(n)
	g.mu.Unlock()
}

// Grouped returns how many calls AddGrouped has counted.
func (g *Grouper[In, Out]) Grouped() int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.grouped
}

// Queued returns how many calls wait for a group.
func (g *Grouper[In, Out]) Queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// Hold keeps new calls queued, as if every group slot were busy, until the
// returned function is called; tests use it to gather a group.
func (g *Grouper[In, Out]) Hold() (release func()) {
	g.mu.Lock()
	held := InFlight - g.running
	g.running += held
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.running -= held
		queued := len(g.queue) > 0
		if queued {
			g.running++
		}
		g.mu.Unlock()
		if queued {
			go g.loop()
		}
	}
}

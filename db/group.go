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
	in    In
	out   Out
	err   error
	taken bool          // in a running group; guarded by the grouper's mu
	done  chan struct{} // closed once out and err are set
}

// grouper queues calls and hands them to run in groups. run must set out
// or err on every call it is given; the grouper closes done.
type grouper[In, Out any] struct {
	run func(ctx context.Context, calls []*call[In, Out])
	// max bounds the calls in one group (default maxGroup).
	max int
	// timeout bounds one group, the store's timeout. A group runs
	// detached from the callers' contexts: a caller that gives up must
	// not cancel the others.
	timeout time.Duration

	mu      sync.Mutex
	queue   []*call[In, Out]
	running int   // group loops running
	grouped int64 // calls that shared a statement (counted by run)
}

// do queues in and waits for its group. A caller whose context ends while
// its call is still queued withdraws it; once the call is in a running
// group the caller waits for the outcome, so an error never hides a write
// that was made.
func (g *grouper[In, Out]) do(ctx context.Context, in In) (Out, error) {
	c := &call[In, Out]{in: in, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, c)
	if g.running < groupsInFlight {
		g.running++
		go g.loop()
	}
	g.mu.Unlock()

	select {
	case <-c.done:
	case <-ctx.Done():
		g.mu.Lock()
		if !c.taken {
			for i, q := range g.queue {
				if q == c {
					g.queue = append(g.queue[:i], g.queue[i+1:]...)
					break
				}
			}
			g.mu.Unlock()
			var zero Out
			return zero, ctx.Err()
		}
		g.mu.Unlock()
		<-c.done
	}
	return c.out, c.err
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

		ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
		g.run(ctx, calls)
		cancel()
		for _, c := range calls {
			close(c.done)
		}
	}
}

// addGrouped counts n calls answered by a shared statement.
func (g *grouper[In, Out]) addGrouped(n int) {
	g.mu.Lock()
	g.grouped += int64(n)
	g.mu.Unlock()
}

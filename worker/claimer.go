package worker

import (
	"context"
	"sync"
	"time"
)

// ClaimerConfig configures a Claimer of items of type T.
type ClaimerConfig[T any] struct {
	// Claim claims up to n items (n ≥ 1) under the caller's lease and
	// returns them: none when nothing is due, or when the claim failed,
	// which Claim logs itself. Its ctx ends when the claimer stops
	// claiming. The claimer reads the slice before it calls Claim again,
	// so Claim may reuse it.
	Claim func(ctx context.Context, n int) []T
	// Work works one claimed item, in a goroutine of its own that holds
	// one slot. Its ctx is the work's: it outlives Run's by Grace. The
	// work may give its slot back before it ends by calling free, for a
	// last step the slots do not bound (the agent worker's record, once
	// its verifier has answered): then the item holds one of Finishing's
	// places until it ends, and when those are all taken free does
	// nothing and the item keeps its slot.
	Work func(ctx context.Context, item T, free func())
	// Release, when set, is called once at shutdown, after the work in
	// flight has finished or been cancelled, to give back the leases of
	// what was claimed and not worked; its ctx is bounded by
	// recordTimeout.
	Release func(ctx context.Context)
	// Slots bounds the items worked at once (at least 1), but for those
	// that gave their slot back (Work's free).
	Slots int
	// Finishing bounds the items that gave their slot back and have not
	// ended; 0 makes free do nothing. At most Slots + Finishing items are
	// in flight.
	Finishing int
	// Cooldown is the least time between two claims, so that work
	// finishing one after another frees its slots for one claim of many
	// items rather than many claims of one (River's FetchCooldown).
	Cooldown time.Duration
	// Poll is the wait before the next claim when nothing woke the
	// claimer sooner (River's FetchPollInterval).
	Poll time.Duration
	// Wake, when set, wakes the claimer when items were queued, in this
	// process or another (the store's notifications).
	Wake <-chan struct{}
	// Grace, when positive, bounds how long the work in flight may
	// finish after Run's ctx ends: then GraceEnded is called and the
	// work's context cancelled. Zero waits for the work however long it
	// takes (it bounds itself).
	Grace      time.Duration
	GraceEnded func()
}

// Claimer is the claim loop of the worker's tiers, as River's producer:
// it claims as many items as it has free slots and works each in a
// goroutine of its own while it holds a slot. It claims again when a slot
// frees, when woken (Notify, Wake), or after Poll; two claims are at least
// Cooldown apart. The agent worker claims tasks with it, the webhook
// deliverer and the Slack deliverer messages. Create it with NewClaimer.
type Claimer[T any] struct {
	cfg   ClaimerConfig[T]
	wake  chan struct{}
	slots chan struct{} // one token per item in flight
	// finishing holds one token per item that gave its slot back.
	finishing chan struct{}
	freed     chan struct{} // an item finished: there may be room to claim
	work      context.Context
	wg        sync.WaitGroup
	// stopping is closed once Run's ctx has ended.
	stopping chan struct{}
}

// NewClaimer returns a claimer; Run starts it.
func NewClaimer[T any](cfg ClaimerConfig[T]) *Claimer[T] {
	return &Claimer[T]{
		cfg:       cfg,
		wake:      make(chan struct{}, 1),
		slots:     make(chan struct{}, max(cfg.Slots, 1)),
		finishing: make(chan struct{}, max(cfg.Finishing, 0)),
		freed:     make(chan struct{}, 1),
		stopping:  make(chan struct{}),
	}
}

// Stopping returns a channel closed once Run's ctx has ended: the claimer
// claims no more, and the work in flight finishes. Work that would wait
// for something (a store to come back) gives up then.
func (c *Claimer[T]) Stopping() <-chan struct{} { return c.stopping }

// Notify wakes the claim loop at once. It never blocks.
func (c *Claimer[T]) Notify() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// Go runs f in a goroutine of its own, under the work's context, as part of
// the work in flight: Run waits for it before Release. Call it from Claim
// or Work, for a step that a claim's items share.
func (c *Claimer[T]) Go(f func(ctx context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f(c.work)
	}()
}

// Run claims and works items until ctx ends. Then it stops claiming, waits
// for the work in flight (within Grace, when set, and cancels the rest) and
// calls Release.
func (c *Claimer[T]) Run(ctx context.Context) {
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	c.work = work
	c.claimLoop(ctx, work)
	close(c.stopping)

	if c.cfg.Grace <= 0 {
		c.wg.Wait()
	} else {
		done := make(chan struct{})
		go func() { c.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(c.cfg.Grace):
			if c.cfg.GraceEnded != nil {
				c.cfg.GraceEnded()
			}
			cancelWork()
			<-done
		}
	}
	if c.cfg.Release != nil {
		final, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		c.cfg.Release(final)
	}
}

// claimLoop claims as many items as there are free slots and starts the
// work of each, until ctx ends.
func (c *Claimer[T]) claimLoop(ctx, work context.Context) {
	poll := time.NewTimer(0)
	defer poll.Stop()
	cooldown := time.NewTimer(0)
	defer cooldown.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
		case <-c.wake:
		case <-c.cfg.Wake:
		case <-c.freed:
		}
		// The cooldown since the last claim, while more work finishes.
		select {
		case <-ctx.Done():
			return
		case <-cooldown.C:
		}
		free := cap(c.slots) - len(c.slots)
		if free == 0 {
			cooldown.Reset(0)
			continue // finishing work sends on freed
		}
		items := c.cfg.Claim(ctx, free)
		cooldown.Reset(c.cfg.Cooldown)
		for _, item := range items {
			c.slots <- struct{}{}
			c.wg.Add(1)
			go c.workOne(work, item)
		}
		if len(items) == free {
			c.Notify() // there may be more waiting
		}
		poll.Reset(c.cfg.Poll)
	}
}

// workOne works item in the slot the claim loop took for it, and gives
// back what the item holds when it ends: its slot, or its place among the
// finishing items when it gave the slot back (free).
func (c *Claimer[T]) workOne(work context.Context, item T) {
	finishing := false
	free := func() {
		if finishing {
			return
		}
		select {
		case c.finishing <- struct{}{}:
		default:
			return // every place taken: the item keeps its slot
		}
		finishing = true
		c.freeSlot()
	}
	defer func() {
		if finishing {
			<-c.finishing
		} else {
			c.freeSlot()
		}
		c.wg.Done()
	}()
	c.cfg.Work(work, item, free)
}

// freeSlot gives back an item's slot and says so to the claim loop.
func (c *Claimer[T]) freeSlot() {
	<-c.slots
	select {
	case c.freed <- struct{}{}:
	default:
	}
}

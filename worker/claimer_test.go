package worker_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/worker"
)

// waitUntil polls cond until it holds; the bound only ends a test whose
// state never comes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come", what)
		}
	}
}

// runUntilStopped calls run in a goroutine until the test ends or stop is
// called, which cancels run's context and waits for it to return, within
// bound (the worker, the deliverer and the claimer each stop this way).
func runUntilStopped(t *testing.T, what string, bound time.Duration, run func(context.Context)) (stop func()) {
	t.Helper()
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		run(runCtx)
		close(done)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(bound):
				t.Errorf("the %s did not stop", what)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// runClaimer runs c until the test ends or stop is called.
func runClaimer[T any](t *testing.T, c *worker.Claimer[T]) (stop func()) {
	t.Helper()
	return runUntilStopped(t, "claimer", 30*time.Second, c.Run)
}

// countedQueue is a queue of queued items for a claimer's tests: it counts
// the items in flight, the most at once and the claims that asked for more
// than the bound allowed; work holds an item until proceed is closed.
type countedQueue struct {
	queued  int
	proceed chan struct{}

	mu                   sync.Mutex
	next, inFlight, most int
	askedBeyond          int
	finished             atomic.Int64
}

// claim returns the claimer's Claim, counting a claim that asks for more
// than bound less the items in flight.
func (q *countedQueue) claim(bound int) func(context.Context, int) []int {
	return func(_ context.Context, n int) []int {
		q.mu.Lock()
		defer q.mu.Unlock()
		if n > bound-q.inFlight {
			q.askedBeyond++
		}
		var items []int
		for ; n > 0 && q.next < q.queued; n-- {
			items = append(items, q.next)
			q.next++
			q.inFlight++
		}
		q.most = max(q.most, q.inFlight)
		return items
	}
}

// work works an item once proceed is closed.
func (q *countedQueue) work() {
	<-q.proceed
	q.mu.Lock()
	q.inFlight--
	q.mu.Unlock()
	q.finished.Add(1)
}

func (q *countedQueue) inFlightNow() int { q.mu.Lock(); defer q.mu.Unlock(); return q.inFlight }

// TestClaimer_ClaimsNoMoreThanItsFreeSlots: with a queue deeper than its
// slots, the claimer asks for the free slots only, never works more items
// at once than it has slots, and claims again as soon as work finishes.
func TestClaimer_ClaimsNoMoreThanItsFreeSlots(t *testing.T) {
	const slots, queued = 4, 40
	q := &countedQueue{queued: queued, proceed: make(chan struct{})}
	c := worker.NewClaimer(worker.ClaimerConfig[int]{
		Claim: q.claim(slots),
		Work:  func(context.Context, int, func()) { q.work() },
		Slots: slots, Cooldown: time.Millisecond, Poll: time.Hour,
	})
	runClaimer(t, c)
	waitUntil(t, "a full claim", func() bool { return q.inFlightNow() == slots })
	close(q.proceed)
	waitUntil(t, "the whole queue worked", func() bool { return q.finished.Load() == queued })
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.most > slots || q.askedBeyond > 0 {
		t.Errorf("%d items in flight at most (slots %d); %d claims asked beyond the free slots", q.most, slots, q.askedBeyond)
	}
}

// TestClaimer_WakesOnNotifyAndOnItsWakeChannel: with an hour between polls,
// Notify and a send on Wake each bring a claim at once.
func TestClaimer_WakesOnNotifyAndOnItsWakeChannel(t *testing.T) {
	var claims atomic.Int64
	wake := make(chan struct{}, 1)
	c := worker.NewClaimer(worker.ClaimerConfig[int]{
		Claim: func(context.Context, int) []int { claims.Add(1); return nil },
		Work:  func(context.Context, int, func()) {},
		Slots: 1, Cooldown: time.Millisecond, Poll: time.Hour, Wake: wake,
	})
	runClaimer(t, c)
	waitUntil(t, "the first claim", func() bool { return claims.Load() == 1 })
	c.Notify()
	waitUntil(t, "a claim on Notify", func() bool { return claims.Load() == 2 })
	wake <- struct{}{}
	waitUntil(t, "a claim on Wake", func() bool { return claims.Load() == 3 })
}

// TestClaimer_ReleasesOnceTheWorkHasFinished: at shutdown the claimer stops
// claiming, waits for the work in flight and the steps started with Go,
// and only then calls Release, once.
func TestClaimer_ReleasesOnceTheWorkHasFinished(t *testing.T) {
	var (
		claimed          atomic.Bool
		worked, stepped  atomic.Int64
		releases         atomic.Int64
		workedAtRelease  atomic.Int64
		steppedAtRelease atomic.Int64
	)
	started := make(chan struct{}, 2)
	var c *worker.Claimer[int]
	c = worker.NewClaimer(worker.ClaimerConfig[int]{
		Claim: func(context.Context, int) []int {
			if claimed.Swap(true) {
				return nil
			}
			c.Go(func(context.Context) {
				time.Sleep(50 * time.Millisecond) // a slow shared step
				stepped.Add(1)
			})
			return []int{1, 2}
		},
		Work: func(context.Context, int, func()) {
			started <- struct{}{}
			time.Sleep(50 * time.Millisecond)
			worked.Add(1)
		},
		Release: func(ctx context.Context) {
			if _, ok := ctx.Deadline(); !ok {
				t.Error("Release's context has no deadline")
			}
			releases.Add(1)
			workedAtRelease.Store(worked.Load())
			steppedAtRelease.Store(stepped.Load())
		},
		Slots: 2, Cooldown: time.Millisecond, Poll: time.Millisecond,
	})
	stop := runClaimer(t, c)
	<-started
	<-started
	stop()
	if releases.Load() != 1 || workedAtRelease.Load() != 2 || steppedAtRelease.Load() != 1 {
		t.Fatalf("%d releases, with %d of 2 items worked and %d of 1 step done before", releases.Load(), workedAtRelease.Load(), steppedAtRelease.Load())
	}
}

// TestClaimer_GraceEndsTheWorkLeft: work that outlives the grace period
// has its context cancelled, GraceEnded is called, and Release follows.
func TestClaimer_GraceEndsTheWorkLeft(t *testing.T) {
	var graceEnded, released, cancelled atomic.Bool
	started := make(chan struct{})
	var once sync.Once
	c := worker.NewClaimer(worker.ClaimerConfig[int]{
		Claim: func(context.Context, int) []int {
			var items []int
			once.Do(func() { items = []int{1} })
			return items
		},
		Work: func(ctx context.Context, _ int, _ func()) {
			close(started)
			<-ctx.Done()
			cancelled.Store(true)
		},
		Release:    func(context.Context) { released.Store(graceEnded.Load() && cancelled.Load()) },
		GraceEnded: func() { graceEnded.Store(true) },
		Slots:      1, Cooldown: time.Millisecond, Poll: time.Millisecond, Grace: 20 * time.Millisecond,
	})
	stop := runClaimer(t, c)
	<-started
	stop()
	if !released.Load() {
		t.Fatalf("grace ended %t, work cancelled %t, then released: want all three", graceEnded.Load(), cancelled.Load())
	}
}

// BenchmarkClaimer works b.N items claimed from memory, 64 slots, with no
// cooldown: the claimer's own cost per item (allocs/op is per item).
func BenchmarkClaimer(b *testing.B) {
	var left, worked atomic.Int64
	left.Store(int64(b.N))
	done := make(chan struct{})
	batch := make([]int, 0, 64)
	c := worker.NewClaimer(worker.ClaimerConfig[int]{
		Claim: func(_ context.Context, n int) []int {
			batch = batch[:0]
			for ; n > 0 && left.Add(-1) >= 0; n-- {
				batch = append(batch, n)
			}
			return batch
		},
		Work: func(context.Context, int, func()) {
			if worked.Add(1) == int64(b.N) {
				close(done)
			}
		},
		Slots: 64, Cooldown: time.Nanosecond, Poll: time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	b.ReportAllocs()
	b.ResetTimer()
	go c.Run(ctx)
	<-done
	b.StopTimer()
	cancel()
}

// TestClaimer_AnItemThatGaveItsSlotBackLetsAnotherIn: an item that gives
// its slot back (free) lets the claimer claim another while it finishes,
// up to Finishing such items; then free does nothing and the items keep
// their slots, so no more than Slots + Finishing are ever in flight.
func TestClaimer_AnItemThatGaveItsSlotBackLetsAnotherIn(t *testing.T) {
	const slots, finishing, queued = 2, 3, 20
	q := &countedQueue{queued: queued, proceed: make(chan struct{})}
	c := worker.NewClaimer(worker.ClaimerConfig[int]{
		Claim: q.claim(slots + finishing),
		Work: func(_ context.Context, _ int, free func()) {
			free()
			free() // a second free gives back nothing more
			q.work()
		},
		Slots: slots, Finishing: finishing, Cooldown: time.Millisecond, Poll: time.Hour,
	})
	runClaimer(t, c)
	waitUntil(t, "the slots and the finishing places full", func() bool { return q.inFlightNow() == slots+finishing })
	close(q.proceed)
	waitUntil(t, "the whole queue worked", func() bool { return q.finished.Load() == queued })
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.most != slots+finishing || q.askedBeyond > 0 {
		t.Errorf("%d items in flight at most, want %d (slots %d, finishing %d)", q.most, slots+finishing, slots, finishing)
	}
}

package agent

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/arbiterhq/arbiter"
)

// fakeClock is a clock that moves only when told.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) Advance(d time.Duration) { c.now = c.now.Add(d) }
func newFakeClock() *fakeClock               { return &fakeClock{now: time.UnixMilli(1763805600000)} }
func halfJitter() float64                    { return 0.5 }
func (l *Limiter) currentLimit() rate.Limit {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bucket.Limit()
}
func wantDelay(t *testing.T, l *Limiter, want time.Duration) {
	t.Helper()
	delay, _, ok := l.reserve(time.Hour)
	if !ok || delay != want {
		t.Fatalf("the next turn is in %v (%v), want %v", delay, ok, want)
	}
}

// TestLimiter_ThrottledCallPausesEveryCall: after a 429 with Retry-After,
// no call of the backend goes before the Retry-After has passed, and a
// caller that cannot wait that long is told how long to wait elsewhere.
func TestLimiter_ThrottledCallPausesEveryCall(t *testing.T) {
	clock := newFakeClock()
	l := newLimiter(0, clock.Now, halfJitter)
	wantDelay(t, l, 0) // no limit before the provider throttles
	wantDelay(t, l, 0)
	if wait := l.throttled(l.sent(), 5*time.Second); wait != 5*time.Second {
		t.Fatalf("the task waits %v, want the Retry-After 5s", wait)
	}
	if delay, _, ok := l.reserve(4 * time.Second); ok || delay != 5*time.Second {
		t.Fatalf("a turn 5s away with 4s to wait = %v, %v; want none taken, 5s away", delay, ok)
	}
	clock.Advance(time.Second)
	wantDelay(t, l, 4*time.Second) // the turn that was given back is taken again
	// A call sent before the pause, throttled after it, moves the pause on
	// but does not cut the rate again.
	limit := l.currentLimit()
	sentBeforeTheCut := clock.Now().Add(-1001 * time.Millisecond)
	clock.Advance(time.Second)
	if wait := l.throttled(sentBeforeTheCut, 5*time.Second); wait != 5*time.Second {
		t.Fatalf("the second task waits %v, want 5s", wait)
	}
	if l.currentLimit() != limit {
		t.Errorf("a call of the round that was cut cut the rate again: %v, was %v", l.currentLimit(), limit)
	}
	if left := l.pauseLeft(); left != 5*time.Second {
		t.Fatalf("paused for %v more, want the last Retry-After, 5s", left)
	}
	clock.Advance(5 * time.Second)
	if left := l.pauseLeft(); left != 0 {
		t.Errorf("still paused %v after the last Retry-After passed", left)
	}
}

// TestLimiter_AIMD: a throttled round halves the rate of calls, once per
// round; successful calls add it back a step at a time, and the limit is
// lifted once the rate is back where the provider began to throttle.
func TestLimiter_AIMD(t *testing.T) {
	clock := newFakeClock()
	l := newLimiter(0, clock.Now, halfJitter)
	var sent []time.Time
	for range 8 { // eight slots call at once
		sent = append(sent, l.sent())
	}
	clock.Advance(100 * time.Millisecond)
	for _, at := range sent { // and all are throttled
		l.throttled(at, time.Second)
	}
	if got := l.currentLimit(); got != 4 {
		t.Fatalf("after a round of 8 calls a second throttled, the rate is %v, want 4", got)
	}
	for _, want := range []rate.Limit{2, 1, minRate, minRate} {
		clock.Advance(time.Second)
		l.throttled(l.sent(), time.Second)
		if got := l.currentLimit(); got != want {
			t.Fatalf("after another throttled round the rate is %v, want %v", got, want)
		}
	}
	// Each success adds a step, at most doubling the rate, until it is
	// back at 8 a second; then nothing limits the calls.
	prev, successes := l.currentLimit(), 0
	for l.currentLimit() != rate.Inf {
		clock.Advance(time.Second)
		l.sent()
		l.succeeded()
		successes++
		got := l.currentLimit()
		if got != rate.Inf && (got <= prev || got > 2*prev) {
			t.Fatalf("a success took the rate from %v to %v", prev, got)
		}
		if successes > 100 {
			t.Fatalf("the rate never recovered: %v", got)
		}
		prev = got
	}
	t.Logf("recovered from %v calls a second to no limit in %d successes", minRate, successes)
}

// TestLimiter_BackoffWithoutRetryAfter: a 429 that says nothing of when to
// come back waits an exponential backoff with jitter, from about a second
// to at most a minute, and a success starts it over.
func TestLimiter_BackoffWithoutRetryAfter(t *testing.T) {
	clock := newFakeClock()
	for _, tc := range []struct {
		jitter float64
		want   []time.Duration
	}{
		{0, []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}},
		{0.999999, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}},
	} {
		l := newLimiter(0, clock.Now, func() float64 { return tc.jitter })
		for round := range 2 {
			for i, want := range tc.want {
				got := l.throttled(l.sent(), 0)
				if got < want-time.Millisecond || got > want {
					t.Errorf("jitter %v, round %d, throttle %d: waits %v, want %v", tc.jitter, round, i+1, got, want)
				}
			}
			l.succeeded()
		}
	}
}

// TestLimiter_MaxRPS: a fixed limit spaces the calls, and the AIMD rate
// never goes above it.
func TestLimiter_MaxRPS(t *testing.T) {
	clock := newFakeClock()
	l := newLimiter(2, clock.Now, halfJitter)
	wantDelay(t, l, 0)
	wantDelay(t, l, 500*time.Millisecond)
	wantDelay(t, l, time.Second)
	clock.Advance(time.Second)
	l.throttled(l.sent(), time.Second)
	if got := l.currentLimit(); got != 1 {
		t.Fatalf("a throttle halves the fixed limit to %v, want 1", got)
	}
	for range 50 {
		l.succeeded()
	}
	if got := l.currentLimit(); got != 2 {
		t.Errorf("recovered to %v, want the fixed limit 2", got)
	}
}

// TestLimiter_PaceEndsWithItsContext: a caller waiting for its turn stops
// when its context ends, and gives the turn back.
func TestLimiter_PaceEndsWithItsContext(t *testing.T) {
	l := NewLimiter(0)
	l.throttled(l.sent(), time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Pace(ctx, 2*time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Pace = %v, want the context's end", err)
	}
	// A turn further away than the caller may wait: it waits what it
	// may, and is told how long the rest is.
	var throttled *arbiter.ThrottledError
	began := time.Now()
	err := l.Pace(context.Background(), 50*time.Millisecond)
	if !errors.As(err, &throttled) || throttled.RetryAfter < 59*time.Minute || throttled.RetryAfter > time.Hour-50*time.Millisecond {
		t.Fatalf("Pace with 50ms to wait for a turn an hour away = %v, want a ThrottledError for the rest of the hour", err)
	}
	if waited := time.Since(began); waited < 50*time.Millisecond {
		t.Errorf("Pace gave up after %v, want it to wait the 50ms it may", waited)
	}
}

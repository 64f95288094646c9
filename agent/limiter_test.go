package agent

import (
	"context"
	"errors"
	"math"
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
	return l.state.Limit
}
func wantDelay(t *testing.T, l *Limiter, want time.Duration) {
	t.Helper()
	delay, _, ok, _ := l.reserve(context.Background(), time.Hour)
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
	if wait := l.Throttled(l.Sent(), 5*time.Second); wait != 5*time.Second {
		t.Fatalf("the task waits %v, want the Retry-After 5s", wait)
	}
	if delay, _, ok, _ := l.reserve(context.Background(), 4*time.Second); ok || delay != 5*time.Second {
		t.Fatalf("a turn 5s away with 4s to wait = %v, %v; want none taken, 5s away", delay, ok)
	}
	clock.Advance(time.Second)
	wantDelay(t, l, 4*time.Second) // the turn that was given back is taken again
	// A call sent before the pause, throttled after it, moves the pause on
	// but does not cut the rate again.
	limit := l.currentLimit()
	sentBeforeTheCut := clock.Now().Add(-1001 * time.Millisecond)
	clock.Advance(time.Second)
	if wait := l.Throttled(sentBeforeTheCut, 5*time.Second); wait != 5*time.Second {
		t.Fatalf("the second task waits %v, want 5s", wait)
	}
	if l.currentLimit() != limit {
		t.Errorf("a call of the round that was cut cut the rate again: %v, was %v", l.currentLimit(), limit)
	}
	if left, _ := l.pauseLeft(context.Background()); left != 5*time.Second {
		t.Fatalf("paused for %v more, want the last Retry-After, 5s", left)
	}
	clock.Advance(5 * time.Second)
	if left, _ := l.pauseLeft(context.Background()); left != 0 {
		t.Errorf("still paused %v after the last Retry-After passed", left)
	}
}

// TestLimiter_HalvesWhileNothingIsAnswered: while the provider answers no
// call, a throttled round halves the rate of calls, once per round, down
// to minRate; successful calls then grow it back, never faster than
// doubling a second, and the limit is lifted once the rate is twice where
// the provider last throttled.
func TestLimiter_HalvesWhileNothingIsAnswered(t *testing.T) {
	clock := newFakeClock()
	l := newLimiter(0, clock.Now, halfJitter)
	var sent []time.Time
	for range 8 { // eight slots call at once
		sent = append(sent, l.Sent())
	}
	clock.Advance(100 * time.Millisecond)
	for _, at := range sent { // and all are throttled
		l.Throttled(at, time.Second)
	}
	if got := l.currentLimit(); got != 4 {
		t.Fatalf("after a round of 8 calls a second throttled, the rate is %v, want 4", got)
	}
	for _, want := range []rate.Limit{2, 1, minRate, minRate} {
		clock.Advance(time.Second)
		l.Throttled(l.Sent(), time.Second)
		if got := l.currentLimit(); got != want {
			t.Fatalf("after another throttled round the rate is %v, want %v", got, want)
		}
	}
	prev, successes := l.currentLimit(), 0
	for l.currentLimit() != rate.Inf {
		clock.Advance(time.Second)
		l.Sent()
		l.Succeeded()
		successes++
		got := l.currentLimit()
		if got != rate.Inf && (got < prev || got > 2*prev) {
			t.Fatalf("a success took the rate from %v to %v", prev, got)
		}
		if successes > 100 {
			t.Fatalf("the rate never recovered: %v", got)
		}
		prev = got
	}
	if prev < 2*minRate {
		t.Errorf("the limit was lifted at %v calls a second, want twice the %v where the provider throttled", prev, minRate)
	}
	t.Logf("recovered from %v calls a second to no limit in %d successes", minRate, successes)
}

// TestLimiter_PacesFromTheObservedLimit: a provider that answers 10 of the
// 40 calls a second sent to it, and throttles the rest, has the calls
// paced at cutShare of 10 a second, not at half of 40; the rate then
// stays near 10 for regrowTime and more, and never passes twice 10.
func TestLimiter_PacesFromTheObservedLimit(t *testing.T) {
	clock := newFakeClock()
	l := newLimiter(0, clock.Now, halfJitter)
	// Four seconds of 40 calls a second, of which the provider answers 10
	// a second. The first throttled call of the first second cuts the
	// rate by half: nothing was answered yet.
	for second := range 4 {
		for i := range 40 {
			at := l.Sent()
			if i%4 == 0 {
				l.Succeeded()
			} else if second == 3 && i == 39 {
				l.Throttled(at, 0)
			}
			clock.Advance(25 * time.Millisecond)
		}
	}
	if got := l.currentLimit(); math.Abs(float64(got)-cutShare*10) > 0.2 {
		t.Fatalf("after 10 calls a second answered out of 40, the rate is %v, want about %v", got, cutShare*10)
	}
	for _, tc := range []struct {
		after    time.Duration
		min, max rate.Limit
	}{
		{regrowTime / 3, cutShare * 10, 10},
		{regrowTime, 9.9, 10.1},
		{2 * regrowTime, 10, 11.1},
	} {
		clock.now = l.state.LastCut.Add(tc.after)
		l.Succeeded()
		if got := l.currentLimit(); got < tc.min || got > tc.max {
			t.Errorf("%v after the cut the rate is %v, want %v to %v", tc.after, got, tc.min, tc.max)
		}
	}
}

// TestCutRate: a throttled round paces the calls at cutShare of the rate
// the provider answered, or of the rate sent when that is lower, and at
// half the rate sent when it answered nothing; never below minRate.
func TestCutRate(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		sending, accepted      rate.Limit
		wantLimit, wantCeiling rate.Limit
	}{
		{"the provider answered fewer than were sent", 40, 10, 10 * cutShare, 10},
		{"nothing answered over a whole window", 40, 0, 20, 40},
		{"as many answered as sent", 8, 8, 8 * cutShare, 8},
		{"more answered than sent, from the provider's burst", 8, 12, 8 * cutShare, 8},
		{"at the floor", 1, 0, minRate, 1},
		{"answered below the floor", 5, 0.5, minRate, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit, ceiling := cutRate(tc.sending, tc.accepted)
			if math.Abs(float64(limit-tc.wantLimit)) > 1e-9 || ceiling != tc.wantCeiling {
				t.Errorf("cutRate(%v, %v) = %v, %v; want %v, %v", tc.sending, tc.accepted, limit, ceiling, tc.wantLimit, tc.wantCeiling)
			}
		})
	}
}

// TestRegrownRate: after a cut, the rate grows back as a cubic of the
// time: quickly from a deep cut, slowly near the rate where the provider
// throttled, faster again beyond it, and the limiter lets go at twice
// that rate.
func TestRegrownRate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		start, ceil  rate.Limit
		since        time.Duration
		min, max     rate.Limit
		wantLiftedAt bool
	}{
		{"at the cut", 9, 10, 0, 9, 9, false},
		{"a third of the way back", 9, 10, regrowTime / 3, 9.6, 9.75, false},
		{"back at the ceiling", 9, 10, regrowTime, 10, 10, false},
		{"as slowly past it", 9, 10, 2 * regrowTime, 10.9, 11.1, false},
		{"faster beyond", 9, 10, 3 * regrowTime, 17.9, 18.1, false},
		{"let go at twice the ceiling", 9, 10, 4 * regrowTime, 20, 100, true},
		{"a deep cut grows back quickly at first", 5, 10, 10 * time.Second, 6.5, 8, false},
		{"a deep cut is back later", 5, 10, 51 * time.Second, 9.9, 10.1, false},
		{"never below the floor", minRate, 0.5, 0, minRate, minRate, false},
		{"no ceiling: let go", 4, 0, 0, 4, 4, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, lifted := regrownRate(tc.start, tc.ceil, tc.since)
			if got < tc.min || got > tc.max || lifted != tc.wantLiftedAt {
				t.Errorf("regrownRate(%v, %v, %v) = %v, %v; want %v to %v, %v", tc.start, tc.ceil, tc.since, got, lifted, tc.min, tc.max, tc.wantLiftedAt)
			}
		})
	}
	// The rate never falls as time passes.
	prev := rate.Limit(0)
	for since := time.Duration(0); since < 4*regrowTime; since += time.Second {
		got, _ := regrownRate(5, 10, since)
		if got < prev {
			t.Fatalf("the rate fell from %v to %v at %v", prev, got, since)
		}
		prev = got
	}
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
				got := l.Throttled(l.Sent(), 0)
				if got < want-time.Millisecond || got > want {
					t.Errorf("jitter %v, round %d, throttle %d: waits %v, want %v", tc.jitter, round, i+1, got, want)
				}
			}
			l.Succeeded()
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
	l.Throttled(l.Sent(), time.Second)
	if got := l.currentLimit(); got != 1 {
		t.Fatalf("a throttle halves the fixed limit to %v, want 1", got)
	}
	for range 60 {
		clock.Advance(time.Second)
		l.Succeeded()
	}
	if got := l.currentLimit(); got != 2 {
		t.Errorf("recovered to %v, want the fixed limit 2", got)
	}
}

// TestLimiter_PaceEndsWithItsContext: a caller waiting for its turn stops
// when its context ends, and gives the turn back.
func TestLimiter_PaceEndsWithItsContext(t *testing.T) {
	l := NewLimiter(0)
	l.Throttled(l.Sent(), time.Hour)
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

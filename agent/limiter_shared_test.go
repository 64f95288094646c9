package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// twoWorkerProcesses returns the limiters of one verifier in two worker
// processes of one deployment (two stores on one Postgres schema).
func twoWorkerProcesses(t *testing.T, maxRPS float64) (a, b *SharedLimiter) {
	t.Helper()
	url := dbtest.URL(t, db.Postgres)
	logger := slog.New(slog.DiscardHandler)
	sa, sb := dbtest.OpenURL(t, url, db.Options{}), dbtest.OpenURL(t, url, db.Options{})
	return NewSharedLimiter(sa.LimitState(), "openai", maxRPS, logger), NewSharedLimiter(sb.LimitState(), "openai", maxRPS, logger)
}

// TestSharedLimiter_MaxRPSIsTheDeploymentsBudget: two worker processes
// of 8 slots each, at max_rps 20, make their 30 calls in no less than the
// 1.45 s that 20 calls a second take: the budget is shared, not each
// process's (which would take 0.7 s).
func TestSharedLimiter_MaxRPSIsTheDeploymentsBudget(t *testing.T) {
	t.Parallel()
	a, b := twoWorkerProcesses(t, 20)
	limiters := []*SharedLimiter{a, b}
	turns := make(chan struct{}, 30)
	for range 30 {
		turns <- struct{}{}
	}
	close(turns)
	var mu sync.Mutex
	var times []time.Time
	var wg sync.WaitGroup
	began := time.Now()
	for i := range 16 {
		wg.Go(func() {
			for range turns {
				if err := limiters[i%2].Pace(context.Background(), time.Minute); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				times = append(times, time.Now())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(times) != 30 {
		t.Fatalf("%d turns taken, want 30", len(times))
	}
	// The first turn is at once; each of the 29 others a 20th of a second
	// after the one before, whichever process takes it.
	if elapsed, least := time.Since(began), 29*time.Second/20-20*time.Millisecond; elapsed < least {
		t.Fatalf("two processes took 30 turns at max_rps 20 in %v, want at least %v", elapsed, least)
	}
}

// TestSharedLimiter_ACutPacesEveryProcess: a 429 that one process meets
// pauses the other's calls for its Retry-After, and cuts the rate both
// go at, from the calls both had answered.
func TestSharedLimiter_ACutPacesEveryProcess(t *testing.T) {
	t.Parallel()
	a, b := twoWorkerProcesses(t, 0)
	ctx := context.Background()
	// Both processes send calls, and the provider answers them all.
	for range 10 {
		for _, l := range []*SharedLimiter{a, b} {
			if err := l.Pace(ctx, time.Minute); err != nil {
				t.Fatal(err)
			}
			l.Sent()
			l.Succeeded()
		}
	}
	// Then one of a's is throttled, asking for 30 seconds.
	sent := a.Sent()
	if wait := a.Throttled(sent, 30*time.Second); wait != 30*time.Second {
		t.Fatalf("the throttled call's task waits %v, want the Retry-After", wait)
	}
	// b's next call is held back for the rest of the pause.
	var throttled *arbiter.ThrottledError
	err := b.Pace(ctx, 10*time.Millisecond)
	if !errors.As(err, &throttled) || throttled.RetryAfter < 25*time.Second || throttled.RetryAfter > 30*time.Second {
		t.Fatalf("b's Pace during a's pause = %v, want held back for the rest of 30 s", err)
	}
	// The rate was cut, for both: it is the state they share.
	var limit rate.Limit
	err = b.update(ctx, func(s *limiterState, _ time.Time, _ func(time.Time) time.Time) { limit = s.Limit })
	if err != nil {
		t.Fatal(err)
	}
	if limit == rate.Inf || limit <= 0 {
		t.Fatalf("after a 429 the shared rate is %v, want a cut", limit)
	}
}

func TestLimiterState_JSONKeepsEveryField(t *testing.T) {
	now := time.UnixMilli(1763805600000).UTC()
	for _, s := range []limiterState{
		newLimiterState(rate.Inf),
		{Limit: 12.5, Next: now, LastTurn: now.Add(-time.Second), PausedUntil: now.Add(time.Minute), Ceiling: 14, Start: 12.5,
			LastCut: now.Add(-2 * time.Second), Throttles: 3,
			SentCalls: callCount{Span: time.Second, Start: now, Since: now, Cur: 4, Prev: 7},
			Answered:  callCount{Span: answeredSpan, Start: now, Since: now, Cur: 2, Prev: 9}},
	} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var back limiterState
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if back != s {
			t.Errorf("%s decoded as %+v, want %+v", b, back, s)
		}
	}
}

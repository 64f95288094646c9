package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/arbiterhq/arbiter"
)

// Limiter paces the calls of one backend, in every worker slot of the
// process, while its provider throttles. A throttled call (HTTP 429, or 503
// with Retry-After) pauses every call until the provider's Retry-After has
// passed (or, when it sent none, an exponential backoff with jitter), and
// halves the rate of calls: once per round, so the calls already sent when
// the rate was cut do not cut it again. Each successful call then adds back
// a little (additive increase, multiplicative decrease: AIMD), until the
// rate is back where the provider first throttled, and the limiter lets
// calls go as fast as the slots allow, or at MaxRPS when that is set. The
// rate is a token bucket (golang.org/x/time/rate) of one token.
type Limiter struct {
	now    func() time.Time
	jitter func() float64 // in [0, 1)
	max    rate.Limit     // the fixed limit, rate.Inf when none

	mu          sync.Mutex
	bucket      *rate.Limiter
	peak        rate.Limit // the rate when the provider began to throttle; 0 when it does not
	pausedUntil time.Time
	lastCut     time.Time
	throttles   int // throttled calls since the last success, for the backoff
	// Calls sent in the second that began at window and in the one before,
	// for the rate of calls when nothing limits it.
	window            time.Time
	sentNow, sentPrev int
}

// Bounds of the Limiter.
const (
	// minRate is the slowest the limiter goes between pauses: a call a
	// second. The pauses slow it further, as long as the provider asks;
	// a rate lower still would leave turns taken at it far ahead, long
	// after the provider recovered.
	minRate rate.Limit = 1
	// firstBackoff is the pause after a throttled call that said nothing
	// of when to come back; it doubles with each throttled call in a row,
	// up to maxBackoff.
	firstBackoff = time.Second
	maxBackoff   = time.Minute
)

// NewLimiter returns the limiter of one backend: at most maxRPS calls a
// second when maxRPS is above zero, and as many as the slots make
// otherwise, while the provider does not throttle.
func NewLimiter(maxRPS float64) *Limiter {
	return newLimiter(maxRPS, time.Now, rand.Float64)
}

func newLimiter(maxRPS float64, now func() time.Time, jitter func() float64) *Limiter {
	max := rate.Inf
	if maxRPS > 0 {
		max = rate.Limit(maxRPS)
	}
	return &Limiter{now: now, jitter: jitter, max: max, bucket: rate.NewLimiter(max, 1)}
}

// errHeldBack is the cause of a call the limiter held back.
var errHeldBack = errors.New("the backend's limiter held the call back while its provider throttles")

// Pace waits for the next call's turn, up to maxWait. When the turn is
// further away, it takes none, waits maxWait all the same (so that a worker
// does not run through its whole queue while the provider pauses it), and
// returns a *arbiter.ThrottledError whose RetryAfter is the rest of the
// provider's pause, for the task to wait in the queue; when ctx ends
// first, ctx's error.
func (l *Limiter) Pace(ctx context.Context, maxWait time.Duration) error {
	for {
		delay, cancel, ok := l.reserve(maxWait)
		if !ok {
			if err := sleep(ctx, maxWait); err != nil {
				return err
			}
			// The task comes back when the pause ends, not at the turn
			// it would have had: the rate may have grown by then.
			return &arbiter.ThrottledError{RetryAfter: l.pauseLeft(), Err: errHeldBack}
		}
		if err := sleep(ctx, delay); err != nil {
			cancel()
			return err
		}
		// A call throttled meanwhile may have moved the pause on.
		if l.pauseLeft() == 0 {
			return nil
		}
		maxWait -= delay
	}
}

// sleep waits d, or until ctx ends, and returns ctx's error then.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// reserve takes the next turn and returns how long until it comes, and the
// function that gives it back. When the turn is more than maxWait away, it
// takes none, and says how far it is and false.
func (l *Limiter) reserve(maxWait time.Duration) (time.Duration, func(), bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	at := l.turnTime(now)
	r := l.bucket.ReserveN(at, 1)
	delay := r.DelayFrom(now)
	if delay > maxWait {
		r.CancelAt(at)
		return delay, nil, false
	}
	return delay, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		r.CancelAt(l.turnTime(l.now()))
	}, true
}

// turnTime is the earliest a call may go: now, or the end of a pause. The
// bucket is only ever given times that do not go back.
func (l *Limiter) turnTime(now time.Time) time.Time {
	if l.pausedUntil.After(now) {
		return l.pausedUntil
	}
	return now
}

// pauseLeft is how long calls are still paused, 0 when they are not.
func (l *Limiter) pauseLeft() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(0, l.pausedUntil.Sub(l.now()))
}

// sent counts a call going out and returns its time, for throttled.
func (l *Limiter) sent() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.roll(now)
	l.sentNow++
	return now
}

// roll moves the counting window to the second now is in.
func (l *Limiter) roll(now time.Time) {
	switch elapsed := now.Sub(l.window); {
	case elapsed >= 2*time.Second:
		l.window, l.sentNow, l.sentPrev = now, 0, 0
	case elapsed >= time.Second:
		l.window, l.sentNow, l.sentPrev = l.window.Add(time.Second), 0, l.sentNow
	}
}

// observed is the rate of calls over the last second, by the sliding
// window of the two counts.
func (l *Limiter) observed(now time.Time) rate.Limit {
	l.roll(now)
	share := 1 - float64(now.Sub(l.window))/float64(time.Second)
	return rate.Limit(float64(l.sentPrev)*share + float64(l.sentNow))
}

// throttled records a call sent at sent that the provider turned away,
// asking callers to wait retryAfter (0 when it did not say), and returns
// how long the call's task is to wait: retryAfter, or the backoff.
func (l *Limiter) throttled(sent time.Time, retryAfter time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.throttles++
	wait := retryAfter
	if wait <= 0 {
		wait = l.backoff()
	}
	if until := now.Add(wait); until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
	// One cut per round: a call sent before the last cut went out at the
	// rate that was cut already.
	if sent.Before(l.lastCut) {
		return wait
	}
	base := l.bucket.Limit()
	if base == rate.Inf {
		base = l.observed(now)
	}
	if l.peak == 0 {
		l.peak = base
	}
	l.setLimit(now, max(minRate, base/2))
	l.lastCut = now
	return wait
}

// backoff is the jittered pause after the throttles-th throttled call in a
// row that said nothing of when to come back: between half and all of
// firstBackoff doubled each time, up to maxBackoff.
func (l *Limiter) backoff() time.Duration {
	d := maxBackoff
	if n := l.throttles - 1; n < 6 {
		d = min(maxBackoff, firstBackoff<<n)
	}
	return d/2 + time.Duration(l.jitter()*float64(d/2))
}

// succeeded records a call the provider answered: the rate grows by an
// eighth of the rate where throttling began per second of successful
// calls (at most doubling at each), and the limit is lifted once it
// reaches that rate.
func (l *Limiter) succeeded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.throttles = 0
	if l.peak == 0 {
		return
	}
	limit := l.bucket.Limit()
	limit = min(2*limit, limit+max(minRate, l.peak/8)/limit)
	if limit >= l.peak {
		limit, l.peak = l.max, 0
	}
	l.setLimit(l.now(), limit)
}

// setLimit sets the rate of calls, never above the fixed limit. A bucket
// without a limit is replaced: its tokens are not counted.
func (l *Limiter) setLimit(now time.Time, limit rate.Limit) {
	limit = min(limit, l.max)
	if l.bucket.Limit() == rate.Inf {
		l.bucket = rate.NewLimiter(limit, 1)
		return
	}
	l.bucket.SetLimitAt(l.turnTime(now), limit)
}

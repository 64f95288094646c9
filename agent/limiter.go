package agent

import (
	"context"
	"errors"
	"math"
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
// cuts the rate of calls, once per round, so the calls already sent when
// the rate was cut do not cut it again. The cut paces the calls from the
// provider's limit as observed: a little below the rate it answered over
// the last few seconds, or below the rate of calls when that is lower;
// half the rate of calls when it answered none then. The rate then grows back as a
// cubic of the time since the cut (as TCP CUBIC grows its window): quickly
// at first, slowly near the rate where the provider throttled, and faster
// again beyond it, so that it stays near the provider's limit and still
// finds a limit the provider raised; at twice that rate the limiter lets
// calls go as fast as the slots allow, or at MaxRPS when that is set. The
// rate is a token bucket (golang.org/x/time/rate) of one token.
type Limiter struct {
	now    func() time.Time
	jitter func() float64 // in [0, 1)
	max    rate.Limit     // the fixed limit, rate.Inf when none

	mu          sync.Mutex
	bucket      *rate.Limiter
	pausedUntil time.Time
	// The rate where the provider last throttled and the rate the cut
	// set then, at lastCut; ceiling is 0 when it does not throttle.
	ceiling, start rate.Limit
	lastCut        time.Time
	throttles      int // throttled calls since the last success, for the backoff
	// The calls sent, for the rate of calls when nothing limits it, and
	// the calls the provider answered, for its limit.
	sentCalls, answered callCount
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
	// cutShare is the share of the provider's observed limit a cut paces
	// the calls at.
	cutShare = 0.9
	// regrowTime is how long the rate takes to grow back from a cut to
	// cutShare of the provider's limit to the limit itself; it grows past
	// it as slowly at first, and reaches twice the limit, where the
	// limiter lets go, about 3.2 times regrowTime after the cut.
	regrowTime = 30 * time.Second
	// answeredSpan is how far back the rate the provider answered is
	// counted.
	answeredSpan = 3 * time.Second
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
	return &Limiter{now: now, jitter: jitter, max: max, bucket: rate.NewLimiter(max, 1),
		sentCalls: callCount{span: time.Second}, answered: callCount{span: answeredSpan}}
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

// Sent counts a call going out and returns its time, for Throttled.
func (l *Limiter) Sent() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sentCalls.add(now)
	return now
}

// callCount counts calls over a sliding window of span, by the counts of
// the span that began at start and of the one before.
type callCount struct {
	span      time.Duration
	start     time.Time
	since     time.Time // the first call counted since the counts were last empty
	cur, prev int
}

// add counts a call at now.
func (c *callCount) add(now time.Time) {
	c.roll(now)
	if c.cur == 0 && c.prev == 0 {
		c.since = now
	}
	c.cur++
}

// roll moves the window to the span now is in.
func (c *callCount) roll(now time.Time) {
	switch elapsed := now.Sub(c.start); {
	case elapsed >= 2*c.span:
		c.start, c.cur, c.prev = now, 0, 0
	case elapsed >= c.span:
		c.start, c.cur, c.prev = c.start.Add(c.span), 0, c.cur
	}
}

// rate is the rate of calls over the last span, and whether calls were
// counted over all of it (a rate over less is too low).
func (c *callCount) rate(now time.Time) (rate.Limit, bool) {
	c.roll(now)
	share := 1 - float64(now.Sub(c.start))/float64(c.span)
	n := float64(c.prev)*share + float64(c.cur)
	return rate.Limit(n / c.span.Seconds()), n > 0 && now.Sub(c.since) >= c.span
}

// Throttled records a call sent at sent that the provider turned away,
// asking callers to wait retryAfter (0 when it did not say), and returns
// how long the call's task is to wait: retryAfter, or the backoff.
func (l *Limiter) Throttled(sent time.Time, retryAfter time.Duration) time.Duration {
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
	sending := l.bucket.Limit()
	if sending == rate.Inf {
		sending, _ = l.sentCalls.rate(now)
	}
	accepted, known := l.answered.rate(now)
	if !known {
		accepted = 0
	}
	l.start, l.ceiling = cutRate(sending, accepted)
	l.setLimit(now, l.start)
	l.lastCut = now
	return wait
}

// cutRate is the rate of calls after a throttled round whose calls went at
// sending while the provider answered accepted a second (0 when not
// known), and the rate where the provider throttled: cutShare of the
// lesser of the two when the provider answered calls, half of sending
// when it answered none; never below minRate.
func cutRate(sending, accepted rate.Limit) (limit, ceiling rate.Limit) {
	if accepted > 0 {
		ceiling = min(sending, accepted)
		return max(minRate, ceiling*cutShare), ceiling
	}
	return max(minRate, sending/2), sending
}

// regrownRate is the rate of calls since after a cut to start from
// ceiling, the rate where the provider throttled, and whether the limiter
// is to let go: the cubic ceiling + c·(since − k)³, where c grows the rate
// from cutShare of ceiling back to it in regrowTime, and k is the time it
// takes from start. It lets go at twice ceiling.
func regrownRate(start, ceiling rate.Limit, since time.Duration) (rate.Limit, bool) {
	if ceiling <= 0 {
		return start, true
	}
	t := since.Seconds()
	c := float64(ceiling) * (1 - cutShare) / math.Pow(regrowTime.Seconds(), 3)
	k := math.Cbrt(max(0, float64(ceiling-start)) / c)
	limit := rate.Limit(float64(ceiling) + c*math.Pow(t-k, 3))
	if limit >= 2*ceiling {
		return limit, true
	}
	return max(minRate, start, limit), false
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

// Succeeded records a call the provider answered: the rate grows back
// from the last cut (regrownRate), and the limit is lifted once it
// reaches twice the rate where the provider throttled.
func (l *Limiter) Succeeded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.answered.add(now)
	l.throttles = 0
	if l.ceiling == 0 {
		return
	}
	limit, lift := regrownRate(l.start, l.ceiling, now.Sub(l.lastCut))
	if lift {
		limit, l.ceiling = l.max, 0
	}
	l.setLimit(now, limit)
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

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
// rate is a token bucket of one token (limiterState). SharedLimiter keeps
// the same state in the database, for every worker process at once.
type Limiter struct {
	now    func() time.Time
	jitter func() float64 // in [0, 1)
	max    rate.Limit     // the fixed limit, rate.Inf when none

	mu    sync.Mutex
	state limiterState
}

// limiterState is what a limiter knows of its provider and of the turns
// it gave: in one process (Limiter), or in the database for every process
// of a deployment (SharedLimiter). Its times are the limiter's clock.
type limiterState struct {
	// Limit is the rate of calls (rate.Inf: none). The rate is a token
	// bucket of one token, kept as the earliest the next call may go
	// (Next, GCRA's theoretical arrival time); LastTurn is the latest
	// turn given, which a turn given back counts from.
	Limit          rate.Limit
	Next, LastTurn time.Time
	PausedUntil    time.Time
	// The rate where the provider last throttled and the rate the cut
	// set then, at LastCut; Ceiling is 0 when it does not throttle.
	Ceiling, Start rate.Limit
	LastCut        time.Time
	Throttles      int // throttled calls since the last success, for the backoff
	// The calls sent, for the rate of calls when nothing limits it, and
	// the calls the provider answered, for its limit.
	SentCalls, Answered callCount
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
	return &Limiter{now: now, jitter: jitter, max: max, state: newLimiterState(max)}
}

// newLimiterState is the state of a limiter at max (rate.Inf: none) that
// was never throttled.
func newLimiterState(max rate.Limit) limiterState {
	return limiterState{Limit: max, SentCalls: callCount{Span: time.Second}, Answered: callCount{Span: answeredSpan}}
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
	return pace(ctx, maxWait, l)
}

// turns is a limiter's state as pace takes turns from it.
type turns interface {
	// reserve takes the next turn and returns how long until it comes,
	// and the function that gives it back. When the turn is more than
	// maxWait away, it takes none, and says how far it is and false.
	reserve(ctx context.Context, maxWait time.Duration) (time.Duration, func(), bool, error)
	// pauseLeft is how long calls are still paused, 0 when they are not.
	pauseLeft(ctx context.Context) (time.Duration, error)
}

// pace is Pace over a limiter's turns.
func pace(ctx context.Context, maxWait time.Duration, t turns) error {
	for {
		delay, cancel, ok, err := t.reserve(ctx, maxWait)
		if err != nil {
			return err
		}
		if !ok {
			if err := sleep(ctx, maxWait); err != nil {
				return err
			}
			// The task comes back when the pause ends, not at the turn
			// it would have had: the rate may have grown by then.
			left, err := t.pauseLeft(ctx)
			if err != nil {
				return err
			}
			return &arbiter.ThrottledError{RetryAfter: left, Err: errHeldBack}
		}
		if err := sleep(ctx, delay); err != nil {
			cancel()
			return err
		}
		// A call throttled meanwhile may have moved the pause on.
		if left, err := t.pauseLeft(ctx); err != nil || left == 0 {
			return err
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

// reserve implements turns.
func (l *Limiter) reserve(_ context.Context, maxWait time.Duration) (time.Duration, func(), bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	turn, ok := l.state.reserve(now, maxWait)
	if !ok {
		return turn.Sub(now), nil, false, nil
	}
	return turn.Sub(now), func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.state.cancel(l.now(), turn)
	}, true, nil
}

// pauseLeft implements turns.
func (l *Limiter) pauseLeft(context.Context) (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state.pauseLeft(l.now()), nil
}

// Sent counts a call going out and returns its time, for Throttled.
func (l *Limiter) Sent() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.state.SentCalls.add(now)
	return now
}

// reserve takes the next turn at now and returns its time. When the
// turn is more than maxWait away, it takes none, and says when it would
// be and false. The turn is the later of now, the end of a pause and the
// bucket's next; taking it moves the bucket's next one interval on.
func (s *limiterState) reserve(now time.Time, maxWait time.Duration) (time.Time, bool) {
	turn := s.turnTime(now)
	if s.Limit != rate.Inf && s.Next.After(turn) {
		turn = s.Next
	}
	if turn.Sub(now) > maxWait {
		return turn, false
	}
	if s.Limit != rate.Inf {
		s.Next = turn.Add(s.interval())
	}
	s.LastTurn = turn
	return turn, true
}

// cancel gives back at now the turn at turn, unless its time has come:
// the bucket's next comes one interval sooner, less the turns given after
// it (as rate.Limiter's CancelAt gives back its tokens).
func (s *limiterState) cancel(now, turn time.Time) {
	if s.Limit == rate.Inf || s.Limit <= 0 || turn.Before(s.turnTime(now)) {
		return
	}
	interval := s.interval()
	back := interval - s.LastTurn.Sub(turn)
	if back > 0 {
		s.Next = s.Next.Add(-back)
	}
}

// interval is the time between two turns at the current rate.
func (s *limiterState) interval() time.Duration {
	return time.Duration(float64(time.Second) / float64(s.Limit))
}

// turnTime is the earliest a call may go: now, or the end of a pause.
func (s *limiterState) turnTime(now time.Time) time.Time {
	if s.PausedUntil.After(now) {
		return s.PausedUntil
	}
	return now
}

// pauseLeft is how long calls are still paused at now, 0 when they are
// not.
func (s *limiterState) pauseLeft(now time.Time) time.Duration {
	return max(0, s.PausedUntil.Sub(now))
}

// callCount counts calls over a sliding window of span, by the counts of
// the span that began at start and of the one before.
type callCount struct {
	Span      time.Duration
	Start     time.Time
	Since     time.Time // the first call counted since the counts were last empty
	Cur, Prev int
}

// add counts a call at now.
func (c *callCount) add(now time.Time) {
	c.roll(now)
	if c.Cur == 0 && c.Prev == 0 {
		c.Since = now
	}
	c.Cur++
}

// roll moves the window to the span now is in.
func (c *callCount) roll(now time.Time) {
	switch elapsed := now.Sub(c.Start); {
	case elapsed >= 2*c.Span:
		c.Start, c.Cur, c.Prev = now, 0, 0
	case elapsed >= c.Span:
		c.Start, c.Cur, c.Prev = c.Start.Add(c.Span), 0, c.Cur
	}
}

// rate is the rate of calls over the last span, and whether calls were
// counted over all of it (a rate over less is too low).
func (c *callCount) rate(now time.Time) (rate.Limit, bool) {
	c.roll(now)
	share := 1 - float64(now.Sub(c.Start))/float64(c.Span)
	n := float64(c.Prev)*share + float64(c.Cur)
	return rate.Limit(n / c.Span.Seconds()), n > 0 && now.Sub(c.Since) >= c.Span
}

// Throttled records a call sent at sent that the provider turned away,
// asking callers to wait retryAfter (0 when it did not say), and returns
// how long the call's task is to wait: retryAfter, or the backoff.
func (l *Limiter) Throttled(sent time.Time, retryAfter time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state.throttled(l.now(), sent, retryAfter, l.max, l.jitter())
}

// throttled records at now a call sent at sent that the provider turned
// away (Limiter.Throttled); jitter, in [0, 1), spreads the backoff.
func (s *limiterState) throttled(now, sent time.Time, retryAfter time.Duration, max rate.Limit, jitter float64) time.Duration {
	s.Throttles++
	wait := retryAfter
	if wait <= 0 {
		wait = s.backoff(jitter)
	}
	if until := now.Add(wait); until.After(s.PausedUntil) {
		s.PausedUntil = until
	}
	// One cut per round: a call sent before the last cut went out at the
	// rate that was cut already.
	if sent.Before(s.LastCut) {
		return wait
	}
	sending := s.Limit
	if sending == rate.Inf {
		sending, _ = s.SentCalls.rate(now)
	}
	accepted, known := s.Answered.rate(now)
	if !known {
		accepted = 0
	}
	s.Start, s.Ceiling = cutRate(sending, accepted)
	s.setLimit(now, s.Start, max)
	s.LastCut = now
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

// backoff is the jittered pause after the Throttles-th throttled call in a
// row that said nothing of when to come back: between half and all of
// firstBackoff doubled each time, up to maxBackoff, as jitter says.
func (s *limiterState) backoff(jitter float64) time.Duration {
	d := maxBackoff
	if n := s.Throttles - 1; n < 6 {
		d = min(maxBackoff, firstBackoff<<n)
	}
	return d/2 + time.Duration(jitter*float64(d/2))
}

// Succeeded records a call the provider answered: the rate grows back
// from the last cut (regrownRate), and the limit is lifted once it
// reaches twice the rate where the provider throttled.
func (l *Limiter) Succeeded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state.succeeded(l.now(), l.max)
}

// succeeded records at now a call the provider answered
// (Limiter.Succeeded), under the fixed limit max.
func (s *limiterState) succeeded(now time.Time, max rate.Limit) {
	s.Answered.add(now)
	s.Throttles = 0
	if s.Ceiling == 0 {
		return
	}
	limit, lift := regrownRate(s.Start, s.Ceiling, now.Sub(s.LastCut))
	if lift {
		limit, s.Ceiling = max, 0
	}
	s.setLimit(now, limit, max)
}

// setLimit sets the rate of calls at now, never above the fixed limit
// max, keeping what the bucket holds: a turn owed at the old rate is owed
// at the new one (as rate.Limiter's SetLimitAt keeps its tokens). A bucket
// without a limit starts full.
func (s *limiterState) setLimit(now time.Time, limit, max rate.Limit) {
	limit = min(limit, max)
	at := s.turnTime(now)
	switch {
	case s.Limit == rate.Inf || !s.Next.After(at):
		s.Next = time.Time{}
	case limit != rate.Inf:
		s.Next = at.Add(time.Duration(float64(s.Next.Sub(at)) * float64(s.Limit) / float64(limit)))
	}
	s.Limit = limit
}

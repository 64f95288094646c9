package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/limits"
)

// SharedLimiter is the Limiter of a verifier whose calls come from every
// worker process of a deployment: its state (limiterState) is kept in the
// database (a limits.State, under the verifier's name), so that max_rps
// (ARBITER_AGENT_MAX_RPS) is a budget shared by every process rather than
// each process's, and a cut made by one process after a 429 paces them
// all, from the rate the provider answered all of them. Each turn (Pace)
// and each throttled call is one short transaction on the state's row;
// the calls sent and answered are counted in the process and carried to
// the database with its next turn, on the database's clock.
type SharedLimiter struct {
	store  limits.State
	key    string
	max    rate.Limit
	now    func() time.Time // the process's clock, for the calls counted here
	jitter func() float64
	log    *slog.Logger

	mu             sync.Mutex
	sent, answered []time.Time // on the process's clock, not yet carried
}

// sharedStateTimeout bounds the state's transaction of a call that has no
// context of its own (Throttled, a turn given back).
const sharedStateTimeout = 5 * time.Second

// heldBackRetry is how long a task waits in the queue when its turn could
// not be asked of the database: no call goes unpaced.
const heldBackRetry = time.Second

// NewSharedLimiter returns the limiter of the verifier name, kept in
// store for every worker process: at most maxRPS calls a second in all
// when maxRPS is above zero (every process must set the same), as many as
// the slots make otherwise, while the provider does not throttle. Its
// failures to reach the store are logged to logger.
func NewSharedLimiter(store limits.State, name string, maxRPS float64, logger *slog.Logger) *SharedLimiter {
	max := rate.Inf
	if maxRPS > 0 {
		max = rate.Limit(maxRPS)
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &SharedLimiter{store: store, key: "verifier:" + name, max: max, now: time.Now, jitter: rand.Float64, log: logger}
}

var _ RateLimiter = (*SharedLimiter)(nil)

// Pace implements RateLimiter. A turn that cannot be asked of the
// database is a throttled call: its task waits a second in the queue.
func (l *SharedLimiter) Pace(ctx context.Context, maxWait time.Duration) error {
	err := pace(ctx, maxWait, l)
	var throttled *arbiter.ThrottledError
	if err == nil || ctx.Err() != nil || errors.As(err, &throttled) {
		return err
	}
	l.log.Warn("the verifier's shared limiter cannot be reached; the call waits", "verifier", l.key, "error", err.Error())
	return &arbiter.ThrottledError{RetryAfter: heldBackRetry, Err: err}
}

// reserve implements turns.
func (l *SharedLimiter) reserve(ctx context.Context, maxWait time.Duration) (time.Duration, func(), bool, error) {
	var delay time.Duration
	var turn time.Time
	var ok bool
	err := l.update(ctx, func(s *limiterState, now time.Time, _ func(time.Time) time.Time) {
		turn, ok = s.reserve(now, maxWait)
		delay = turn.Sub(now)
	})
	if err != nil || !ok {
		return delay, nil, false, err
	}
	return delay, func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sharedStateTimeout)
		defer cancel()
		err := l.update(ctx, func(s *limiterState, now time.Time, _ func(time.Time) time.Time) { s.cancel(now, turn) })
		if err != nil {
			l.log.Warn("give back a turn of the verifier's shared limiter", "verifier", l.key, "error", err.Error())
		}
	}, true, nil
}

// pauseLeft implements turns.
func (l *SharedLimiter) pauseLeft(ctx context.Context) (time.Duration, error) {
	var left time.Duration
	err := l.update(ctx, func(s *limiterState, now time.Time, _ func(time.Time) time.Time) { left = s.pauseLeft(now) })
	return left, err
}

// Sent implements RateLimiter: the call is counted here, and in the
// database with the next turn.
func (l *SharedLimiter) Sent() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.sent = append(l.sent, now)
	return now
}

// Succeeded implements RateLimiter: the answer is counted here, and in
// the database with the next turn, which regrows the rate from it.
func (l *SharedLimiter) Succeeded() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answered = append(l.answered, l.now())
}

// Throttled implements RateLimiter. When the database cannot be reached,
// the task waits what the provider asked, or the first backoff.
func (l *SharedLimiter) Throttled(sent time.Time, retryAfter time.Duration) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), sharedStateTimeout)
	defer cancel()
	wait := retryAfter
	err := l.update(ctx, func(s *limiterState, now time.Time, at func(time.Time) time.Time) {
		wait = s.throttled(now, at(sent), retryAfter, l.max, l.jitter())
	})
	if err != nil {
		l.log.Warn("record a throttled call in the verifier's shared limiter", "verifier", l.key, "error", err.Error())
		if wait <= 0 {
			wait = firstBackoff
		}
	}
	return wait
}

// update runs fn on the state in the database, at the database's time,
// after carrying the calls counted here since the last update (at turns a
// time of this process's clock into the database's). The calls carried
// are counted again later if the update fails.
func (l *SharedLimiter) update(ctx context.Context, fn func(s *limiterState, now time.Time, at func(time.Time) time.Time)) error {
	l.mu.Lock()
	sent, answered := l.sent, l.answered
	l.sent, l.answered = nil, nil
	l.mu.Unlock()
	err := l.store.Update(ctx, l.key, func(value []byte, now time.Time) ([]byte, error) {
		s := newLimiterState(l.max)
		if value != nil {
			if err := json.Unmarshal(value, &s); err != nil {
				l.log.Warn("the verifier's shared limiter state is unreadable; starting afresh", "verifier", l.key, "error", err.Error())
				s = newLimiterState(l.max)
			}
		}
		local := l.now()
		at := func(t time.Time) time.Time { return now.Add(t.Sub(local)) }
		s.carry(sent, answered, at, l.max)
		fn(&s, now, at)
		return json.Marshal(s)
	})
	if err != nil {
		l.mu.Lock()
		l.sent, l.answered = append(sent, l.sent...), append(answered, l.answered...)
		l.mu.Unlock()
	}
	return err
}

// carry counts calls sent and answered at their times (at turns them into
// the state's clock), in the order they happened, under the fixed limit
// max.
func (s *limiterState) carry(sent, answered []time.Time, at func(time.Time) time.Time, max rate.Limit) {
	type call struct {
		at       time.Time
		answered bool
	}
	calls := make([]call, 0, len(sent)+len(answered))
	for _, t := range sent {
		calls = append(calls, call{at(t), false})
	}
	for _, t := range answered {
		calls = append(calls, call{at(t), true})
	}
	slices.SortStableFunc(calls, func(a, b call) int { return a.at.Compare(b.at) })
	for _, c := range calls {
		if c.answered {
			s.succeeded(c.at, max)
		} else {
			s.SentCalls.add(c.at)
		}
	}
}

// limiterWire is limiterState as JSON, which has no infinity: Unlimited
// stands for a Limit of rate.Inf.
type limiterWire struct {
	Limit       float64   `json:"limit"`
	Unlimited   bool      `json:"unlimited,omitempty"`
	Next        time.Time `json:"next"`
	LastTurn    time.Time `json:"last_turn"`
	PausedUntil time.Time `json:"paused_until"`
	Ceiling     float64   `json:"ceiling"`
	Start       float64   `json:"start"`
	LastCut     time.Time `json:"last_cut"`
	Throttles   int       `json:"throttles"`
	SentCalls   callCount `json:"sent"`
	Answered    callCount `json:"answered"`
}

// MarshalJSON encodes the state for the database.
func (s limiterState) MarshalJSON() ([]byte, error) {
	w := limiterWire{Limit: float64(s.Limit), Next: s.Next, LastTurn: s.LastTurn, PausedUntil: s.PausedUntil,
		Ceiling: float64(s.Ceiling), Start: float64(s.Start), LastCut: s.LastCut, Throttles: s.Throttles,
		SentCalls: s.SentCalls, Answered: s.Answered}
	if s.Limit == rate.Inf {
		w.Limit, w.Unlimited = 0, true
	}
	return json.Marshal(w)
}

// UnmarshalJSON decodes the state from the database.
func (s *limiterState) UnmarshalJSON(b []byte) error {
	var w limiterWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*s = limiterState{Limit: rate.Limit(w.Limit), Next: w.Next, LastTurn: w.LastTurn, PausedUntil: w.PausedUntil,
		Ceiling: rate.Limit(w.Ceiling), Start: rate.Limit(w.Start), LastCut: w.LastCut, Throttles: w.Throttles,
		SentCalls: w.SentCalls, Answered: w.Answered}
	if w.Unlimited {
		s.Limit = rate.Inf
	}
	return nil
}

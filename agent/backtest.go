package agent

import (
	"context"
	"errors"
	"time"

	"github.com/arbiterhq/arbiter"
)

// maxBacktestWait bounds how long a backtest waits on a throttled call
// before asking again, whatever the provider's Retry-After says.
const maxBacktestWait = 30 * time.Second

// Backtest asks v, the verifier spec names, on each case in order, one
// call at a time and each within timeout; the backend paces the calls
// at the verifier's max_rps as it paces the worker's. A throttled call
// is asked again after its Retry-After (at most maxBacktestWait), up to
// arbiter.BacktestThrottleRetries times. It returns one call a case,
// cut short when ctx ends (the cases not asked have no call), and
// changes nothing: the caller records the calls as a backtest run.
func Backtest(ctx context.Context, v arbiter.Verifier, spec arbiter.VerifierSpec, cases []arbiter.BacktestCase, timeout time.Duration) []arbiter.BacktestCall {
	calls := make([]arbiter.BacktestCall, 0, len(cases))
	for _, c := range cases {
		if ctx.Err() != nil {
			break
		}
		answer, err := askOnce(ctx, v, c.Task, timeout)
		for retry := 0; retry < arbiter.BacktestThrottleRetries; retry++ {
			var throttled *arbiter.ThrottledError
			if !errors.As(err, &throttled) {
				break
			}
			select {
			case <-ctx.Done():
				return calls
			case <-time.After(min(max(throttled.RetryAfter, 0), maxBacktestWait)):
			}
			answer, err = askOnce(ctx, v, c.Task, timeout)
		}
		if ctx.Err() != nil {
			break
		}
		calls = append(calls, arbiter.BacktestCallOf(c.Task.ID, answer, err, spec.Price))
	}
	return calls
}

// askOnce makes one call within timeout.
func askOnce(ctx context.Context, v arbiter.Verifier, t *arbiter.Task, timeout time.Duration) (arbiter.Verification, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return v.Verify(ctx, t)
}

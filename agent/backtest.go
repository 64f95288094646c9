package agent

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
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

// Backtester runs the dashboard's backtests in the background, with the
// verifiers of the server's file: one run per account at a time (the
// store refuses a second while one runs, in every process), each run
// bounded by arbiter.MaxBacktestRunTime and ended when the server stops,
// what it asked stored all the same. It is an arbiter.BacktestStarter.
type Backtester struct {
	verifiers *Verifiers
	store     arbiter.BacktestService
	timeout   time.Duration
	logger    *slog.Logger
	ctx       context.Context
	now       arbiter.Clock
	runs      sync.WaitGroup
}

var _ arbiter.BacktestStarter = (*Backtester)(nil)

// NewBacktester returns a Backtester asking verifiers, each call within
// the verifier's timeout or else timeout, its runs recorded in store and
// ended when ctx ends. Wait waits for them.
func NewBacktester(ctx context.Context, verifiers *Verifiers, store arbiter.BacktestService, timeout time.Duration, logger *slog.Logger) *Backtester {
	return &Backtester{verifiers: verifiers, store: store, timeout: timeout, logger: logger, ctx: ctx, now: time.Now}
}

// VerifierNames names the file's verifiers, in its order.
func (b *Backtester) VerifierNames() []string { return b.verifiers.Set.Names() }

// StartBacktest checks f, reads the account's labelled tasks it selects,
// records a running run and asks the verifier on them in the background;
// it returns the run's id at once.
func (b *Backtester) StartBacktest(ctx context.Context, accountID string, f arbiter.BacktestFilter) (string, error) {
	if err := f.Validate(); err != nil {
		return "", err
	}
	v, spec, ok := b.verifiers.Verifier(f.Verifier)
	if !ok {
		return "", arbiter.FieldErrorf("verifier", "The verifiers file names no verifier %.64q; pick one of %s.", f.Verifier,
			strings.Join(b.VerifierNames(), ", "))
	}
	cases, err := b.store.BacktestCases(ctx, accountID, f)
	if err != nil {
		return "", err
	}
	run := &arbiter.BacktestRun{AccountID: accountID, Filter: f, StartedAt: arbiter.TimestampOf(b.now())}
	if run.ID, err = b.store.StartBacktestRun(ctx, run); err != nil {
		return "", err
	}
	timeout := cmp.Or(spec.Timeout, b.timeout)
	b.runs.Go(func() {
		ctx, cancel := context.WithTimeout(b.ctx, arbiter.MaxBacktestRunTime)
		defer cancel()
		run.Calls = Backtest(ctx, v, spec, cases, timeout)
		run.FinishedAt = arbiter.TimestampOf(b.now())
		run.Report = arbiter.Backtest(spec, cases[:len(run.Calls)], run.Calls, f.TargetErrorRate, f.Confidence)
		// What was asked is stored even when the run was cut short.
		if err := b.store.FinishBacktestRun(context.WithoutCancel(ctx), run); err != nil {
			b.logger.Error("store a backtest run", "run", run.ID, "error", err.Error())
		}
	})
	return run.ID, nil
}

// Wait waits for the runs started to be stored.
func (b *Backtester) Wait() { b.runs.Wait() }

package worker_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/worker"
)

// expiryCounter is a log handler that adds up the tasks the workers report
// expiring.
type expiryCounter struct {
	slog.Handler
	expired *atomic.Int64
}

func (h expiryCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "expired tasks past their deadline" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "count" {
				h.expired.Add(a.Value.Int64())
			}
			return true
		})
	}
	return nil
}

func (h expiryCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h expiryCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }

// TestWorker_ExpiresTasksPastTheirDeadline runs four workers, each with its
// own store as separate processes would, over tasks whose deadline has
// passed (they were created two minutes back by the creating store's
// clock, with a minute to live): the workers never call the verifier on
// them, every task expires, and the expiries they report add up to one per
// task. Tasks that come due while the workers run expire within 5 s.
func TestWorker_ExpiresTasksPastTheirDeadline(t *testing.T) {
	// Not parallel: tasks must expire within 5 s of coming due.
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			creator := dbtest.OpenURL(t, url, db.Options{Now: func() time.Time { return time.Now().Add(-2 * time.Minute) }})
			acct, err := creator.FindOrCreateAccountByEmail(ctx, "a@example.com")
			if err != nil {
				t.Fatal(err)
			}
			overdue := func(n int) []string {
				var ids []string
				for range n {
					task, err := creator.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "p", AllowedVerdicts: []string{"approve"},
						ConfidenceThreshold: 0.5, TaskType: "decide", Touchpoint: "chat", DeadlineSeconds: 60})
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, task.ID)
				}
				return ids
			}
			first := overdue(40)

			var calls, expired atomic.Int64
			verifier := verifierFunc(func(context.Context, *arbiter.Task) (arbiter.Verification, error) {
				calls.Add(1)
				return arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 1, Model: "fake"}, nil
			})
			logger := slog.New(expiryCounter{Handler: slog.DiscardHandler, expired: &expired})
			for range 4 {
				store := dbtest.OpenURL(t, url, db.Options{})
				start(t, store, verifier, func(c *worker.Config) { c.Logger = logger })
			}
			waitExpired := func(ids []string) {
				t.Helper()
				for _, id := range ids {
					waitFor(t, creator, acct.ID, id, func(task *arbiter.Task) bool { return task.Status == arbiter.StatusExpired })
				}
			}
			waitExpired(first)

			created := time.Now()
			second := overdue(10)
			waitExpired(second)
			if took := time.Since(created); took > 5*time.Second {
				t.Errorf("tasks due while the workers ran expired after %s, want within 5 s", took)
			}
			// A worker reports its sweep just after the sweep's commit.
			for deadline := time.Now().Add(10 * time.Second); expired.Load() < 50 && time.Now().Before(deadline); {
				time.Sleep(time.Millisecond)
			}
			if n := expired.Load(); n != 50 {
				t.Errorf("the workers report %d expiries of 50 tasks", n)
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("the verifier was called %d times on tasks past their deadline", n)
			}
		})
	}
}

package worker_test

import (
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/worker"
)

// movableClock is a store clock a test can set.
type movableClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *movableClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *movableClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func TestWorker_PrunesOldDemoVerdicts(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			clk := &movableClock{now: time.Now().Add(-arbiter.DemoVerdictMaxAge - time.Hour)}
			store := dbtest.Open(t, dialect, db.Options{Now: clk.Now})
			tasks, err := store.ListDemoTasks(ctx)
			if err != nil {
				t.Fatal(err)
			}
			old, recent := "anon_old", "anon_recent"
			verdict := func(session *string) {
				t.Helper()
				if _, err := store.CreateDemoVerdict(ctx, arbiter.DemoVerdictCreate{TaskID: tasks[0].ID, Verdict: tasks[0].AllowedVerdicts[0], AnonSessionID: session}); err != nil {
					t.Fatal(err)
				}
			}
			verdict(&old)
			clk.Set(time.Now())
			verdict(&recent)

			start(t, store, answer("approve", 0.9), func(c *worker.Config) { c.Demo = store })
			deadline := time.Now().Add(10 * time.Second)
			for {
				n, err := store.CountDemoVerdicts(ctx, old)
				if err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the worker did not prune a demo verdict older than 30 days")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if n, err := store.CountDemoVerdicts(ctx, recent); err != nil || n != 1 {
				t.Fatalf("recent verdicts after pruning = %d, %v; want 1", n, err)
			}
		})
	}
}

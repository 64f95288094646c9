package worker_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/worker"
)

var ctx = context.Background()

// verifierFunc adapts a function to arbiter.Verifier.
type verifierFunc func(context.Context, *arbiter.Task) (arbiter.Verification, error)

func (f verifierFunc) Verify(ctx context.Context, t *arbiter.Task) (arbiter.Verification, error) {
	return f(ctx, t)
}

func answer(verdict string, confidence float64) verifierFunc {
	return func(context.Context, *arbiter.Task) (arbiter.Verification, error) {
		return arbiter.Verification{Decided: true, Verdict: verdict, Confidence: confidence, Rationale: "because", Model: "fake"}, nil
	}
}

// start runs a worker on store until the test ends, and returns a stop
// function that ends it and waits.
func start(t *testing.T, store *db.DB, v arbiter.Verifier, tune func(*worker.Config)) (stop func()) {
	t.Helper()
	cfg := worker.Config{
		Queue: store, Verifier: v, Health: store, Logger: slog.New(slog.DiscardHandler),
		Concurrency: 8, Poll: 10 * time.Millisecond, Backoff: 10 * time.Millisecond, Grace: time.Second,
	}
	if tune != nil {
		tune(&cfg)
	}
	return runUntilStopped(t, "worker", 10*time.Second, worker.New(cfg).Run)
}

// waitFor polls the task until cond holds or 10 s pass.
func waitFor(t *testing.T, store *db.DB, accountID, id string, cond func(*arbiter.Task) bool) *arbiter.Task {
	t.Helper()
	// The bound only ends a test whose state never comes; a busy machine
	// with the race detector may take many seconds to work 500 tasks.
	deadline := time.Now().Add(time.Minute)
	for {
		task, err := store.FindTaskByID(ctx, accountID, id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task never reached the expected state: %+v", task)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func createTask(t *testing.T, store *db.DB, email string) (accountID, taskID string) {
	t.Helper()
	acct, err := store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	task, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{
		Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8,
		TaskType: "decide", Touchpoint: "chat", Context: []byte(`{"amount":12}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return acct.ID, task.ID
}

func settled(t *arbiter.Task) bool {
	return t.Status == arbiter.StatusCompleted || t.Status == arbiter.StatusHumanNeeded
}

func TestWorker_Routing(t *testing.T) {
	t.Parallel()
	fail := func(context.Context, *arbiter.Task) (arbiter.Verification, error) {
		return arbiter.Verification{}, errors.New("HTTP 500 from the model server")
	}
	cases := []struct {
		name     string
		verifier verifierFunc
		status   string
		attempts int
	}{
		{"ConfidentDecides", answer("approve", 0.9), arbiter.StatusCompleted, 1},
		{"AtThresholdDecides", answer("reject", 0.8), arbiter.StatusCompleted, 1},
		{"UnconfidentGoesToHuman", answer("approve", 0.5), arbiter.StatusHumanNeeded, 1},
		{"DeclinedGoesToHuman", func(context.Context, *arbiter.Task) (arbiter.Verification, error) {
			return arbiter.Verification{Model: "none"}, nil
		}, arbiter.StatusHumanNeeded, 1},
		{"ErrorsRetryThenHuman", fail, arbiter.StatusHumanNeeded, 3},
		{"VerdictOutsideSetRetriesThenHuman", answer("maybe", 0.99), arbiter.StatusHumanNeeded, 3},
		{"PanicIsAFailedAttempt", func(context.Context, *arbiter.Task) (arbiter.Verification, error) {
			panic("backend bug")
		}, arbiter.StatusHumanNeeded, 3},
	}
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					store := dbtest.Open(t, dialect, db.Options{})
					start(t, store, tc.verifier, nil)
					acct, id := createTask(t, store, "a@example.com")
					task := waitFor(t, store, acct, id, settled)
					if task.Status != tc.status || len(task.Attempts) != tc.attempts {
						t.Fatalf("task = %s with %d attempts, want %s with %d", task.Status, len(task.Attempts), tc.status, tc.attempts)
					}
					for _, a := range task.Attempts {
						if a.Tier != "agent" || a.FinishedAt == nil || *a.FinishedAt < a.StartedAt || a.Reviewer != nil {
							t.Errorf("attempt = %+v", a)
						}
						if (tc.attempts > 1) != (a.Error != nil) {
							t.Errorf("attempt error = %v", a.Error)
						}
					}
					if tc.status == arbiter.StatusCompleted {
						a := task.Attempts[0]
						if *task.FinalTier != "agent" || *task.FinalVerdict != *a.Verdict ||
							*task.FinalConfidence != *a.Confidence || task.CompletedAt == nil || *a.Model != "fake" {
							t.Errorf("completed task = %+v", task)
						}
					} else if task.FinalVerdict != nil || task.CompletedAt != nil {
						t.Errorf("human_needed task has final fields: %+v", task)
					}
				})
			}
		})
	}
}

// TestWorker_ATaskLostTooOftenGetsNoCall: a task whose earlier workers all
// vanished mid-call MaxAgentFailures times goes to a human without a call,
// its attempt saying why; a task lost once less still gets its call.
func TestWorker_ATaskLostTooOftenGetsNoCall(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		// Vanished workers claim the tasks with leases that ran out a
		// minute ago: the doomed task MaxAgentFailures times, so that the
		// worker's claim counts the last loss; the survivor once less.
		acct, doomed := createTask(t, store, "lost@example.com")
		vanish := func(n int) {
			t.Helper()
			claimed, err := store.ClaimTasks(ctx, "vanished", n, -time.Minute)
			if err != nil || len(claimed) != n {
				t.Fatalf("claimed %d tasks (%v), want %d", len(claimed), err, n)
			}
			ids := make([]string, n)
			for i, c := range claimed {
				ids[i] = c.ID
			}
			if err := store.StartAgentCalls(ctx, "vanished", ids); err != nil {
				t.Fatal(err)
			}
		}
		vanish(1)
		_, survivor := createTask(t, store, "lost@example.com")
		for range arbiter.MaxAgentFailures - 1 {
			vanish(2)
		}
		var calls sync.Map
		start(t, store, verifierFunc(func(ctx context.Context, task *arbiter.Task) (arbiter.Verification, error) {
			calls.Store(task.ID, true)
			return answer("approve", 0.95)(ctx, task)
		}), nil)

		got := waitFor(t, store, acct, doomed, settled)
		if got.Status != arbiter.StatusHumanNeeded || len(got.Attempts) != 1 || got.Attempts[0].Error == nil ||
			*got.Attempts[0].Error != arbiter.VerifierLost {
			t.Errorf("the task lost %d times: %+v, want it sent to a human with the lost call's attempt", arbiter.MaxAgentFailures, got)
		}
		if _, called := calls.Load(doomed); called {
			t.Error("the verifier was called on a task lost too often")
		}
		got = waitFor(t, store, acct, survivor, settled)
		if _, called := calls.Load(survivor); !called || got.Status != arbiter.StatusCompleted {
			t.Errorf("the task lost %d times: called %v, %+v; want it decided by its call", arbiter.MaxAgentFailures-1, called, got)
		}
	})
}

// unheardClaims is a store whose first claims commit but fail on the
// worker's side, as claims held up by a stalled store did: the worker
// never learns of the tasks, and their leases run out.
type unheardClaims struct {
	*db.DB
	unheard atomic.Int32
}

func (q *unheardClaims) ClaimTasks(ctx context.Context, owner string, max int, lease time.Duration) ([]*arbiter.Task, error) {
	if q.unheard.Add(1) > arbiter.MaxAgentFailures {
		return q.DB.ClaimTasks(ctx, owner, max, lease)
	}
	if _, err := q.DB.ClaimTasks(ctx, owner, max, -time.Minute); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("claim tasks: %w", context.DeadlineExceeded)
}

// TestWorker_AClaimItNeverHeardOfCountsNoLostCall: claims that committed
// while the worker saw them fail leave leases that run out with no call
// made; taking the task again counts nothing, so the task gets its call
// and is decided, where counting them lost sent it to a human uncalled.
func TestWorker_AClaimItNeverHeardOfCountsNoLostCall(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		acct, id := createTask(t, store, "stall@example.com")
		var calls atomic.Int32
		start(t, store, verifierFunc(func(ctx context.Context, task *arbiter.Task) (arbiter.Verification, error) {
			calls.Add(1)
			return answer("approve", 0.95)(ctx, task)
		}), func(c *worker.Config) { c.Queue = &unheardClaims{DB: store} })
		got := waitFor(t, store, acct, id, settled)
		if got.Status != arbiter.StatusCompleted || len(got.Attempts) != 1 || got.Failures != 0 || calls.Load() != 1 {
			t.Fatalf("task = %s with %d attempts and %d failures after %d calls, want completed by its one call, no failure counted",
				got.Status, len(got.Attempts), got.Failures, calls.Load())
		}
	})
}

// unreachableFinishes is a store whose records of attempts
// dbtest.LostRecords fails.
type unreachableFinishes struct {
	*db.DB
	*dbtest.LostRecords
}

func (q unreachableFinishes) FinishAgentAttempt(ctx context.Context, owner, taskID string, step arbiter.AgentStep) (err error) {
	if q.Record(func() error {
		err = q.DB.FinishAgentAttempt(ctx, owner, taskID, step)
		return err
	}) {
		return dbtest.ErrUnreachable
	}
	return err
}

// TestWorker_RecordsAgainWhileTheStoreIsUnreachable: a call whose record
// found the store unreachable (a failover) is recorded once the store
// answers again, from the one call; a record made with its answer lost is
// sent again and changes nothing. The record used to be given up, and
// the task waited for its lease to run out and for a second call.
func TestWorker_RecordsAgainWhileTheStoreIsUnreachable(t *testing.T) {
	t.Parallel()
	for _, c := range dbtest.RecordLosses {
		t.Run(c.Name, func(t *testing.T) {
			dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
				acct, id := createTask(t, store, "failover@example.com")
				var calls atomic.Int32
				q := unreachableFinishes{DB: store, LostRecords: c.Records()}
				start(t, store, verifierFunc(func(ctx context.Context, task *arbiter.Task) (arbiter.Verification, error) {
					calls.Add(1)
					return answer("approve", 0.95)(ctx, task)
				}), func(cfg *worker.Config) {
					cfg.Queue = q
					cfg.Lease = time.Hour // a lost record would wait for it
				})
				got := waitFor(t, store, acct, id, settled)
				waitUntil(t, "the records", func() bool { return len(q.Answers()) == c.Reached() })
				c.Check(t, q.LostRecords)
				if got.Status != arbiter.StatusCompleted || len(got.Attempts) != 1 || calls.Load() != 1 {
					t.Fatalf("task = %s with %d attempts after %d calls, want completed by its one call",
						got.Status, len(got.Attempts), calls.Load())
				}
			})
		})
	}
}

// inProcess is a verifier that answers in the process
// (worker.InProcessVerifier), as the rules backend does.
type inProcess struct{ verifierFunc }

func (inProcess) InProcess() bool { return true }

var (
	_ worker.InProcessVerifier = (*agent.Rules)(nil)
	_ worker.InProcessVerifier = agent.None{}
)

// startsInTheClaim is a store that counts StartAgentCalls, and whose first
// claims that mark the calls started (ClaimTasksStarted) commit but fail
// on the worker's side, as unheardClaims.
type startsInTheClaim struct {
	*db.DB
	unheard, starts atomic.Int32
}

func (q *startsInTheClaim) StartAgentCalls(ctx context.Context, owner string, ids []string) error {
	q.starts.Add(1)
	return q.DB.StartAgentCalls(ctx, owner, ids)
}

func (q *startsInTheClaim) ClaimTasksStarted(ctx context.Context, owner string, max int, lease time.Duration) ([]*arbiter.Task, error) {
	if q.unheard.Add(1) > arbiter.MaxAgentFailures {
		return q.DB.ClaimTasksStarted(ctx, owner, max, lease)
	}
	if _, err := q.DB.ClaimTasksStarted(ctx, owner, max, -time.Minute); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("claim tasks: %w", context.DeadlineExceeded)
}

// TestWorker_AnInProcessVerifiersCallsAreStartedByTheClaim: for a verifier
// that answers in the process, the claim marks the calls started in its
// own statement and the worker makes no StartAgentCalls. Between claim and
// call only the worker itself can be lost, so a lease that runs out counts
// a lost call: a task whose claims were all lost goes to a human uncalled,
// where a verifier with outside calls counts such claims as nothing
// (TestWorker_AClaimItNeverHeardOfCountsNoLostCall). A task claimed
// afterwards is decided by its call as before.
func TestWorker_AnInProcessVerifiersCallsAreStartedByTheClaim(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		acct, lost := createTask(t, store, "in-process@example.com")
		var calls sync.Map
		q := &startsInTheClaim{DB: store}
		start(t, store, inProcess{func(ctx context.Context, task *arbiter.Task) (arbiter.Verification, error) {
			calls.Store(task.ID, true)
			return answer("approve", 0.95)(ctx, task)
		}}, func(c *worker.Config) { c.Queue = q })
		got := waitFor(t, store, acct, lost, settled)
		// The lost calls, and the attempt that says so.
		if got.Status != arbiter.StatusHumanNeeded || got.Failures != arbiter.MaxAgentFailures+1 || len(got.Attempts) != 1 ||
			got.Attempts[0].Error == nil || *got.Attempts[0].Error != arbiter.VerifierLost {
			t.Errorf("task lost with %d claims = %s with %d failures, %+v; want it sent to a human as lost",
				arbiter.MaxAgentFailures, got.Status, got.Failures, got.Attempts)
		}
		if _, called := calls.Load(lost); called {
			t.Error("the verifier was called on a task lost too often")
		}
		_, next := createTask(t, store, "in-process@example.com")
		if got := waitFor(t, store, acct, next, settled); got.Status != arbiter.StatusCompleted || got.Failures != 0 {
			t.Errorf("task claimed afterwards = %s with %d failures, want completed by its call", got.Status, got.Failures)
		}
		if n := q.starts.Load(); n != 0 {
			t.Errorf("the worker marked calls started %d times, want none: the claim marks them", n)
		}
	})
}

func TestWorker_TwoWorkersDecideEachTaskOnce(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			a := dbtest.OpenURL(t, url, db.Options{DailyTaskCap: 1000})
			b := dbtest.OpenURL(t, url, db.Options{DailyTaskCap: 1000})
			acct, _ := a.FindOrCreateAccountByEmail(ctx, "a@example.com")
			var ids []string
			for range 500 {
				task, err := a.CreateTask(ctx, acct.ID, arbiter.TaskCreate{
					Prompt: "p", AllowedVerdicts: []string{"approve"}, ConfidenceThreshold: 0.5, TaskType: "decide", Touchpoint: "chat"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, task.ID)
			}
			var calls [2]atomic.Int64
			counting := func(i int) verifierFunc {
				return func(ctx context.Context, t *arbiter.Task) (arbiter.Verification, error) {
					calls[i].Add(1)
					return answer("approve", 0.9)(ctx, t)
				}
			}
			stopA := start(t, a, counting(0), func(c *worker.Config) { c.ID = "wrk_a" })
			stopB := start(t, b, counting(1), func(c *worker.Config) { c.ID = "wrk_b" })
			waitFor(t, a, acct.ID, ids[len(ids)-1], settled)
			for _, id := range ids {
				waitFor(t, a, acct.ID, id, settled)
			}
			stopA()
			stopB()
			for _, id := range ids {
				task, _ := a.FindTaskByID(ctx, acct.ID, id)
				if task.Status != arbiter.StatusCompleted || len(task.Attempts) != 1 {
					t.Fatalf("task %s: %s with %d attempts, want completed once", id, task.Status, len(task.Attempts))
				}
			}
			if total := calls[0].Load() + calls[1].Load(); total != 500 {
				t.Errorf("%d verifier calls for 500 tasks", total)
			}
			if calls[0].Load() == 0 || calls[1].Load() == 0 {
				t.Logf("one worker did all the work: %d / %d", calls[0].Load(), calls[1].Load())
			}
		})
	}
}

func TestWorker_ShutdownReleasesUnfinishedCalls(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		started := make(chan struct{}, 1)
		blocking := verifierFunc(func(ctx context.Context, _ *arbiter.Task) (arbiter.Verification, error) {
			started <- struct{}{}
			<-ctx.Done()
			return arbiter.Verification{}, ctx.Err()
		})
		stop := start(t, store, blocking, func(c *worker.Config) { c.Grace = 50 * time.Millisecond })
		acct, id := createTask(t, store, "a@example.com")
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the call never started")
		}
		stop()
		task, _ := store.FindTaskByID(ctx, acct, id)
		if task.Status != arbiter.StatusPending || len(task.Attempts) != 0 {
			t.Fatalf("after shutdown: %s with %d attempts, want pending with none", task.Status, len(task.Attempts))
		}
		// Another worker picks it up.
		start(t, store, answer("approve", 1), nil)
		if task := waitFor(t, store, acct, id, settled); task.Status != arbiter.StatusCompleted {
			t.Fatalf("after restart: %s", task.Status)
		}
	})
}

func TestWorker_ShutdownLetsCallsFinish(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		started := make(chan struct{}, 1)
		slow := verifierFunc(func(ctx context.Context, t *arbiter.Task) (arbiter.Verification, error) {
			started <- struct{}{}
			time.Sleep(100 * time.Millisecond)
			return answer("approve", 1)(ctx, t)
		})
		stop := start(t, store, slow, func(c *worker.Config) { c.Grace = 5 * time.Second })
		acct, id := createTask(t, store, "a@example.com")
		<-started
		stop()
		if task, _ := store.FindTaskByID(ctx, acct, id); task.Status != arbiter.StatusCompleted {
			t.Fatalf("a call within the grace period was not recorded: %s", task.Status)
		}
	})
}

func TestWorker_Heartbeat(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		if err := store.Health(ctx); err == nil {
			t.Fatal("healthy before any worker ran")
		}
		stop := start(t, store, answer("approve", 1), nil)
		deadline := time.Now().Add(10 * time.Second)
		for store.Health(ctx) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("no heartbeat: %v", store.Health(ctx))
			}
			time.Sleep(10 * time.Millisecond)
		}
		stop()
		if err := store.Health(ctx); err == nil {
			t.Error("still healthy after the only worker stopped")
		}
	})
}

func TestWorker_LeaseOutlivesTheCall(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		started, release := make(chan struct{}, 1), make(chan struct{})
		held := verifierFunc(func(ctx context.Context, t *arbiter.Task) (arbiter.Verification, error) {
			started <- struct{}{}
			<-release
			return answer("approve", 1)(ctx, t)
		})
		// A lease shorter than a call is raised, so no other worker takes
		// the task while the call runs.
		stop := start(t, store, held, func(c *worker.Config) {
			c.Lease, c.AttemptTimeout = time.Millisecond, time.Second
		})
		var once sync.Once
		unblock := func() { once.Do(func() { close(release) }) }
		t.Cleanup(unblock) // before stop, which waits for the call
		acct, id := createTask(t, store, "a@example.com")
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the call never started")
		}
		time.Sleep(20 * time.Millisecond)
		if stolen, err := store.ClaimTasks(ctx, "wrk_other", 10, time.Minute); err != nil || len(stolen) != 0 {
			t.Fatalf("another worker claimed %d tasks (%v) while the call ran", len(stolen), err)
		}
		unblock()
		stop()
		if task, _ := store.FindTaskByID(ctx, acct, id); task.Status != arbiter.StatusCompleted || len(task.Attempts) != 1 {
			t.Fatalf("task = %s with %d attempts, want completed once", task.Status, len(task.Attempts))
		}
	})
}

func TestWorker_PrunesExpiredIdempotencyKeys(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.UnixMilli(1763805600000)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	dbtest.Each(t, db.Options{Now: clock, IdempotencyTTL: time.Hour}, func(t *testing.T, store *db.DB) {
		acct, err := store.FindOrCreateAccountByEmail(ctx, "a@example.com")
		if err != nil {
			t.Fatal(err)
		}
		create := func(prompt string) arbiter.TaskCreated {
			t.Helper()
			in := arbiter.TaskCreate{Prompt: prompt, AllowedVerdicts: []string{"yes", "no"}, IdempotencyKey: "k1",
				TaskType: "decide", Touchpoint: "chat", ConfidenceThreshold: 0.8}
			created, err := store.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{in})
			if err != nil {
				t.Fatal(err)
			}
			return created[0]
		}
		first := create("First?")
		w := worker.New(worker.Config{Queue: store, Verifier: answer("yes", 1), Health: store, Keys: store,
			Logger: slog.New(slog.DiscardHandler)})

		if err := w.PruneIdempotencyKeys(ctx); err != nil {
			t.Fatal(err)
		}
		if c := create("Second?"); arbiter.ErrorCode(c.Err) != arbiter.EMISMATCH {
			t.Fatalf("within the retention, another request with the key = %+v, want EMISMATCH", c)
		}

		mu.Lock()
		now = now.Add(time.Hour)
		mu.Unlock()
		if err := w.PruneIdempotencyKeys(ctx); err != nil {
			t.Fatal(err)
		}
		if c := create("Second?"); c.Err != nil || c.Replayed || c.Task.ID == first.Task.ID {
			t.Fatalf("after the retention, the key = %+v, want a new task", c)
		}
	})
}

func TestWorker_RunPrunesIdempotencyKeys(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.UnixMilli(1763805600000)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	store := dbtest.Open(t, db.SQLite, db.Options{Now: clock, IdempotencyTTL: time.Minute})
	acct, err := store.FindOrCreateAccountByEmail(ctx, "a@example.com")
	if err != nil {
		t.Fatal(err)
	}
	in := arbiter.TaskCreate{Prompt: "p", AllowedVerdicts: []string{"yes"}, IdempotencyKey: "k1"}
	if _, err := store.CreateTask(ctx, acct.ID, in); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	start(t, store, answer("yes", 1), func(c *worker.Config) {
		c.Keys, c.PruneKeysEvery = store, 10*time.Millisecond
	})
	// Run prunes on its own: the key is soon free for another request.
	in.Prompt = "another"
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		created, err := store.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{in})
		if err != nil {
			t.Fatal(err)
		}
		if created[0].Err == nil {
			break
		} else if arbiter.ErrorCode(created[0].Err) != arbiter.EMISMATCH {
			t.Fatal(created[0].Err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the running worker never pruned the expired key")
		}
	}
}

// slowBeats is a Heartbeater whose heartbeats take until released, and
// that remembers whether one was written.
type slowBeats struct {
	*db.DB
	release chan struct{}
	beaten  atomic.Bool
}

func (s *slowBeats) Heartbeat(ctx context.Context, id string) error {
	<-s.release
	err := s.DB.Heartbeat(ctx, id)
	s.beaten.Store(err == nil)
	return err
}

// TestWorker_BeatsBeforeItClaims checks that a worker's first heartbeat is
// written before its first claim, so /healthz never sees a task decided by a
// worker it does not know is there.
func TestWorker_BeatsBeforeItClaims(t *testing.T) {
	t.Parallel()
	store := dbtest.Open(t, db.SQLite, db.Options{})
	accountID, taskID := createTask(t, store, "a@example.com")
	health := &slowBeats{DB: store, release: make(chan struct{})}
	called := make(chan bool, 1)
	v := func(ctx context.Context, task *arbiter.Task) (arbiter.Verification, error) {
		select {
		case called <- health.beaten.Load():
		default:
		}
		return answer("approve", 0.9)(ctx, task)
	}
	start(t, store, verifierFunc(v), func(c *worker.Config) { c.Health = health })
	select {
	case <-called:
		t.Fatal("the verifier was called before the first heartbeat was written")
	case health.release <- struct{}{}:
	}
	close(health.release)
	if beaten := <-called; !beaten {
		t.Error("the first call came before the first heartbeat")
	}
	waitFor(t, store, accountID, taskID, func(task *arbiter.Task) bool { return task.Status == arbiter.StatusCompleted })
}

// claimCounter is an Observer that counts claim statements.
type claimCounter struct {
	claims chan struct{}
}

func (c *claimCounter) Claimed(int) {
	select {
	case c.claims <- struct{}{}:
	default:
	}
}

func (c *claimCounter) Verified(time.Duration, error) {}

// TestWorker_CreateInAnotherProcessWakesIt: a worker whose store is not
// the one that creates (as `arbiter worker` beside `arbiter serve`) and
// whose poll is an hour claims a new task at once, woken by the create's
// notification on Postgres.
func TestWorker_CreateInAnotherProcessWakesIt(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	here := dbtest.OpenURL(t, url, db.Options{})
	there := dbtest.OpenURL(t, url, db.Options{})
	acct, err := there.FindOrCreateAccountByEmail(ctx, "a@example.com")
	if err != nil {
		t.Fatal(err)
	}
	counter := &claimCounter{claims: make(chan struct{}, 16)}
	start(t, here, answer("approve", 0.9), func(c *worker.Config) {
		c.Poll, c.Created, c.Observer = time.Hour, here.TasksCreated(), counter
	})
	// The claim at start, and the one when the listener is in force: from
	// then on, only a notification can wake the worker before an hour.
	for range 2 {
		select {
		case <-counter.claims:
		case <-time.After(20 * time.Second):
			t.Fatal("the worker did not claim at start and when its listener started")
		}
	}
	for _, batch := range []int{1, 3} {
		in := make([]arbiter.TaskCreate, batch)
		for i := range in {
			in[i] = arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8}
		}
		created, err := there.CreateTasks(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		for _, c := range created {
			waitFor(t, there, acct.ID, c.Task.ID, func(task *arbiter.Task) bool { return task.Status == arbiter.StatusCompleted })
		}
		t.Logf("%d task(s) created in another store completed after %s", batch, time.Since(began))
	}
}

// TestWorker_RecordsTheVersionLabel: a worker with a version label
// (ARBITER_AGENT_VERSION) records it on each agent attempt, failed ones
// included; one without records none.
func TestWorker_RecordsTheVersionLabel(t *testing.T) {
	t.Parallel()
	calls := atomic.Int64{}
	flaky := verifierFunc(func(context.Context, *arbiter.Task) (arbiter.Verification, error) {
		if calls.Add(1) == 1 {
			return arbiter.Verification{}, errors.New("HTTP 500 from the model server")
		}
		return arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 0.9, Model: "fake"}, nil
	})
	for _, dialect := range dbtest.Dialects {
		for _, version := range []string{"prompt-7", ""} {
			t.Run(dialect+"/"+version, func(t *testing.T) {
				calls.Store(0)
				store := dbtest.Open(t, dialect, db.Options{})
				start(t, store, flaky, func(c *worker.Config) { c.Version = version; c.Concurrency = 1 })
				acct, id := createTask(t, store, "a@example.com")
				task := waitFor(t, store, acct, id, settled)
				if task.Status != arbiter.StatusCompleted || len(task.Attempts) != 2 {
					t.Fatalf("task = %s with %d attempts, want completed after a failed call", task.Status, len(task.Attempts))
				}
				for _, a := range task.Attempts {
					if got := a.Version; (version == "") != (got == nil) || (got != nil && *got != version) {
						t.Errorf("attempt %+v has version %v, want %q", a, got, version)
					}
				}
			})
		}
	}
}

// heldFinishes is a store whose agent records wait until release is closed.
type heldFinishes struct {
	*db.DB
	release chan struct{}
	waiting atomic.Int32
}

func (q *heldFinishes) FinishAgentAttempt(ctx context.Context, owner, taskID string, step arbiter.AgentStep) error {
	q.waiting.Add(1)
	<-q.release
	return q.DB.FinishAgentAttempt(ctx, owner, taskID, step)
}

// TestWorker_ARecordHoldsNoVerifierSlot: with one slot, a task's call is
// made while the task before it waits for its record; the slot bounded
// the records too, so a slow store held the calls to one a record's
// latency (at 1,000 tasks/s end to end the bench's 32 slots all waited in
// the finish). The records in flight are bounded on their own: four a
// slot, so the fifth record keeps the slot and the sixth call waits.
func TestWorker_ARecordHoldsNoVerifierSlot(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		const tasks = 6
		acct, first := createTask(t, store, "slots@example.com")
		ids := []string{first}
		for range tasks - 1 {
			task, err := store.CreateTask(ctx, acct, arbiter.TaskCreate{
				Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8,
				TaskType: "decide", Touchpoint: "chat", Context: []byte(`{"amount":12}`),
			})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
		var calls atomic.Int32
		q := &heldFinishes{DB: store, release: make(chan struct{})}
		start(t, store, verifierFunc(func(ctx context.Context, task *arbiter.Task) (arbiter.Verification, error) {
			calls.Add(1)
			return answer("approve", 0.95)(ctx, task)
		}), func(c *worker.Config) {
			c.Queue = q
			c.Concurrency = 1
		})
		// One slot and four places for records: five calls, four of them
		// waiting for their records in those places and the fifth in the
		// slot, where the sixth waits.
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(q.release) }) })
		waitUntil(t, "five calls waiting for their records", func() bool { return calls.Load() == 5 && q.waiting.Load() == 5 })
		once.Do(func() { close(q.release) })
		for _, id := range ids {
			if got := waitFor(t, store, acct, id, settled); got.Status != arbiter.StatusCompleted || len(got.Attempts) != 1 {
				t.Errorf("task %s = %s with %d attempts, want completed by one call", id, got.Status, len(got.Attempts))
			}
		}
		if calls.Load() != tasks {
			t.Errorf("%d calls for %d tasks", calls.Load(), tasks)
		}
	})
}

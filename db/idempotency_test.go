package db_test

import (
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// keyed returns taskCreate(prompt) carrying an idempotency key.
func keyed(prompt, key string) arbiter.TaskCreate {
	in := taskCreate(prompt)
	in.IdempotencyKey = key
	return in
}

// createOne runs CreateTasks with one create and returns its answer.
func createOne(t *testing.T, d *db.DB, accountID string, in arbiter.TaskCreate) arbiter.TaskCreated {
	t.Helper()
	created, err := d.CreateTasks(ctx, accountID, []arbiter.TaskCreate{in})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if len(created) != 1 {
		t.Fatalf("%d answers to one create", len(created))
	}
	return created[0]
}

func TestTaskService_CreateTasks_IdempotencyKey(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		first := createOne(t, d, acct.ID, keyed("Refund?", "order-1"))
		if first.Err != nil || first.Replayed || first.Task.Status != arbiter.StatusPending {
			t.Fatalf("first create = %+v", first)
		}

		t.Run("SameRequestReplaysTheTaskAsItIsNow", func(t *testing.T) {
			if _, err := d.ClaimTasks(ctx, "w1", 10, time.Minute); err != nil {
				t.Fatal(err)
			}
			again := createOne(t, d, acct.ID, keyed("Refund?", "order-1"))
			if again.Err != nil || !again.Replayed || again.Task.ID != first.Task.ID {
				t.Fatalf("replay = %+v, want task %s replayed", again, first.Task.ID)
			}
			if again.Task.Status != arbiter.StatusAgentRunning || again.Task.Prompt != "Refund?" ||
				string(again.Task.Context) != `{"amount":12}` {
				t.Fatalf("replayed task = %+v, want the stored task as it is now", again.Task)
			}
			// CreateTask answers the same task.
			task, err := d.CreateTask(ctx, acct.ID, keyed("Refund?", "order-1"))
			if err != nil || task.ID != first.Task.ID {
				t.Fatalf("CreateTask replay = %+v, %v", task, err)
			}
		})
		t.Run("ErrMismatchForAnotherRequest", func(t *testing.T) {
			other := keyed("Refund?", "order-1")
			other.ConfidenceThreshold = 0.5
			wantCode(t, createOne(t, d, acct.ID, other).Err, arbiter.EMISMATCH)
		})
		t.Run("KeysBelongToOneAccount", func(t *testing.T) {
			b := newAccount(t, d, "b@example.com")
			theirs := createOne(t, d, b.ID, keyed("Refund?", "order-1"))
			if theirs.Err != nil || theirs.Replayed || theirs.Task.ID == first.Task.ID {
				t.Fatalf("another account's create with the key = %+v, want a new task", theirs)
			}
		})
		t.Run("KeysAreExact", func(t *testing.T) {
			for _, key := range []string{"ORDER-1", "order-1 ", " order-1"} {
				if c := createOne(t, d, acct.ID, keyed("Refund?", key)); c.Err != nil || c.Replayed {
					t.Fatalf("key %q = %+v, want a new task", key, c)
				}
			}
		})
		// Replays and mismatches stored nothing.
		wantUsage(t, d, acct.ID, 4)
	})
}

func TestTaskService_CreateTasks_ReplaysDoNotSpendTheCap(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{DailyTaskCap: 2}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		first := createOne(t, d, acct.ID, keyed("Refund?", "k1"))
		for range 5 {
			if c := createOne(t, d, acct.ID, keyed("Refund?", "k1")); c.Err != nil || !c.Replayed || c.Task.ID != first.Task.ID {
				t.Fatalf("replay = %+v", c)
			}
		}
		wantUsage(t, d, acct.ID, 1)
		if c := createOne(t, d, acct.ID, keyed("Second", "k2")); c.Err != nil {
			t.Fatalf("the cap's second task: %v", c.Err)
		}
		// The cap is used up: a replay is still answered, a new key is not.
		if c := createOne(t, d, acct.ID, keyed("Refund?", "k1")); c.Err != nil || !c.Replayed {
			t.Fatalf("replay at the cap = %+v", c)
		}
		wantCode(t, createOne(t, d, acct.ID, keyed("Third", "k3")).Err, arbiter.ERATELIMIT)

		// The refused create stored no key: once the cap is raised, k3
		// makes a new task, even for another request.
		three := 3
		if err := d.SetDailyCap(ctx, acct.ID, &three); err != nil {
			t.Fatal(err)
		}
		if c := createOne(t, d, acct.ID, keyed("Third, fixed", "k3")); c.Err != nil || c.Replayed {
			t.Fatalf("k3 after the cap was raised = %+v, want a new task", c)
		}
		wantUsage(t, d, acct.ID, 3)
	})
}

// eachKeyedStore runs fn on SQLite, on Postgres with grouped creates and on
// Postgres with every create its own statement, where concurrent creates
// with one key race on the key's primary key.
func eachKeyedStore(t *testing.T, opts db.Options, fn func(t *testing.T, d *db.DB)) {
	dbtest.Each(t, opts, fn)
	t.Run("postgres-ungrouped", func(t *testing.T) {
		ungrouped := opts
		ungrouped.Ungrouped = true
		fn(t, dbtest.Open(t, db.Postgres, ungrouped))
	})
}

func TestTaskService_CreateTasks_ConcurrentCreatesWithOneKeyMakeOneTask(t *testing.T) {
	t.Parallel()
	eachKeyedStore(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		var mu sync.Mutex
		ids := map[string]int{}
		var created, conflicts int
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				c, err := d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{keyed("Refund?", "retry-me")})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("create: %v", err)
				case c[0].Err != nil:
					if arbiter.ErrorCode(c[0].Err) != arbiter.ECONFLICT {
						t.Errorf("create: %v, want a task or ECONFLICT", c[0].Err)
					}
					conflicts++
				default:
					ids[c[0].Task.ID]++
					if !c[0].Replayed {
						created++
					}
				}
			})
		}
		wg.Wait()
		if len(ids) != 1 || created != 1 {
			t.Fatalf("tasks %v (%d new, %d conflicts), want one task, created once", ids, created, conflicts)
		}
		wantUsage(t, d, acct.ID, 1)
	})
}

func TestTaskService_PruneIdempotencyKeys(t *testing.T) {
	t.Parallel()
	clk := newClock()
	dbtest.Each(t, db.Options{Now: clk.Now, IdempotencyTTL: time.Hour}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		first := createOne(t, d, acct.ID, keyed("Refund?", "k1"))

		clk.Add(59 * time.Minute)
		if n, err := d.PruneIdempotencyKeys(ctx); err != nil || n != 0 {
			t.Fatalf("pruned %d (%v) within the retention, want 0", n, err)
		}
		wantCode(t, createOne(t, d, acct.ID, keyed("Another", "k1")).Err, arbiter.EMISMATCH)

		clk.Add(time.Minute)
		if n, err := d.PruneIdempotencyKeys(ctx); err != nil || n != 1 {
			t.Fatalf("pruned %d (%v) after the retention, want 1", n, err)
		}
		again := createOne(t, d, acct.ID, keyed("Another", "k1"))
		if again.Err != nil || again.Replayed || again.Task.ID == first.Task.ID {
			t.Fatalf("create with a pruned key = %+v, want a new task", again)
		}
	})
}

func TestTaskService_CreateTasks_Batch(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		earlier := createOne(t, d, acct.ID, keyed("Earlier", "e1"))
		otherAnswer := keyed("Within", "w1")
		otherAnswer.Source = "elsewhere"

		created, err := d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{
			taskCreate("Plain"),    // 0: new
			keyed("Within", "w1"),  // 1: new, keyed
			keyed("Earlier", "e1"), // 2: replays a task made before
			keyed("Changed", "e1"), // 3: mismatch with the one made before
			keyed("Within", "w1"),  // 4: replays item 1
			otherAnswer,            // 5: mismatch with item 1
			taskCreate("Plain"),    // 6: new (no key: a second task)
			keyed("Earlier", "e1"), // 7: replays the earlier task again
			keyed("Another", "w2"), // 8: new, keyed
			keyed("Another", "w2"), // 9: replays item 8
		})
		if err != nil {
			t.Fatal(err)
		}
		type want struct {
			code     string
			replayed bool
			sameAs   string // the id the answer must carry, when known
		}
		wants := []want{
			{}, {}, {"", true, earlier.Task.ID}, {arbiter.EMISMATCH, false, ""},
			{"", true, created[1].Task.ID}, {arbiter.EMISMATCH, false, ""}, {}, {"", true, earlier.Task.ID},
			{}, {"", true, created[8].Task.ID},
		}
		ids := map[string]bool{}
		for i, w := range wants {
			c := created[i]
			if arbiter.ErrorCode(c.Err) != w.code || c.Replayed != w.replayed || (w.code == "") != (c.Task != nil) {
				t.Fatalf("item %d = %+v (%v), want %+v", i, c, c.Err, w)
			}
			if w.sameAs != "" && c.Task.ID != w.sameAs {
				t.Fatalf("item %d replays %s, want %s", i, c.Task.ID, w.sameAs)
			}
			if c.Task != nil && !c.Replayed {
				ids[c.Task.ID] = true
				if got, err := d.FindTaskByID(ctx, acct.ID, c.Task.ID); err != nil || got.Prompt != c.Task.Prompt {
					t.Fatalf("item %d not stored: %+v, %v", i, got, err)
				}
			}
		}
		if len(ids) != 4 {
			t.Fatalf("%d new tasks, want 4", len(ids))
		}
		wantUsage(t, d, acct.ID, 5)
		// The keys stored in the batch replay later.
		if c := createOne(t, d, acct.ID, keyed("Another", "w2")); !c.Replayed || c.Task.ID != created[8].Task.ID {
			t.Fatalf("replay of a batch's key = %+v", c)
		}
	})
}

func TestTaskService_CreateTasks_BatchCapAdmitsExactlyWhatFits(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{DailyTaskCap: 5}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		before := createOne(t, d, acct.ID, keyed("Before", "b1"))
		createOne(t, d, acct.ID, taskCreate("Before, no key"))

		batch := []arbiter.TaskCreate{
			keyed("One", "k1"), keyed("Before", "b1"), taskCreate("Two"), keyed("One", "k1"),
			keyed("Three", "k3"), keyed("Four", "k4"), taskCreate("Five"), keyed("Four", "k4"),
		}
		created, err := d.CreateTasks(ctx, acct.ID, batch)
		if err != nil {
			t.Fatal(err)
		}
		// Room for three: k1, Two, k3. Replays (items 1 and 3) cost
		// nothing; k4 does not fit, and neither does its repeat.
		wantCodes := []string{"", "", "", "", "", arbiter.ERATELIMIT, arbiter.ERATELIMIT, arbiter.ERATELIMIT}
		for i, code := range wantCodes {
			if got := arbiter.ErrorCode(created[i].Err); got != code {
				t.Fatalf("item %d: %q (%v), want %q", i, got, created[i].Err, code)
			}
		}
		if !created[1].Replayed || created[1].Task.ID != before.Task.ID || !created[3].Replayed ||
			created[3].Task.ID != created[0].Task.ID {
			t.Fatalf("replays = %+v, %+v", created[1], created[3])
		}
		if e := created[5].Err.(*arbiter.Error); e.RetryAfter <= 0 {
			t.Fatalf("a refused item's RetryAfter = %v", e.RetryAfter)
		}
		wantUsage(t, d, acct.ID, 5)
		// k4 stored no key.
		six := 6
		if err := d.SetDailyCap(ctx, acct.ID, &six); err != nil {
			t.Fatal(err)
		}
		if c := createOne(t, d, acct.ID, keyed("Four, changed", "k4")); c.Err != nil || c.Replayed {
			t.Fatalf("k4 after a raise = %+v, want a new task", c)
		}
	})
}

func TestCreateGroup_IdempotencyKeys(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{})
	a := newAccount(t, d, "a@example.com")
	b := newAccount(t, d, "b@example.com")
	earlier := createOne(t, d, a.ID, keyed("Earlier", "e1"))
	changed := keyed("Changed", "g1")

	accounts := []string{a.ID, b.ID, a.ID, a.ID, b.ID, a.ID, a.ID}
	tasks, errs := d.StoreGroupOf(ctx, accounts, []arbiter.TaskCreate{
		keyed("Grouped", "g1"), // 0: a new
		keyed("Grouped", "g1"), // 1: b new: keys are per account
		keyed("Grouped", "g1"), // 2: replays 0
		keyed("Earlier", "e1"), // 3: replays the earlier task
		taskCreate("Plain"),    // 4: b new
		changed,                // 5: mismatch with 0
		taskCreate("Plain"),    // 6: a new
	})
	for i, err := range errs {
		if (i == 5) != (err != nil) {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	wantCode(t, errs[5], arbiter.EMISMATCH)
	if tasks[2].ID != tasks[0].ID || tasks[3].ID != earlier.Task.ID || tasks[1].ID == tasks[0].ID {
		t.Fatalf("ids = %s %s %s %s, want 2 = 0 and 3 = the earlier task", tasks[0].ID, tasks[1].ID, tasks[2].ID, tasks[3].ID)
	}
	if got := d.Grouped(); got != 4 {
		t.Fatalf("the group statement stored %d creates, want the 4 new ones", got)
	}
	wantUsage(t, d, a.ID, 3)
	wantUsage(t, d, b.ID, 2)
}

// TestCreateTasks_KeyStoredMeanwhileIsReplayed holds a transaction that
// stores a task with an idempotency key, uncommitted, on a second
// connection, and starts a create with that key: its statement does not see
// the key, and waits on it. Once the transaction commits, the create must
// answer the task that transaction stored, and store nothing.
func TestCreateTasks_KeyStoredMeanwhileIsReplayed(t *testing.T) {
	// Not parallel: it waits for a lock wait in pg_stat_activity, which sees
	// the sessions of every test in the database.
	for _, tc := range []struct {
		name  string
		opts  db.Options
		tasks int // the account's tasks in the end
		store func(d *db.DB, accountID string, in arbiter.TaskCreate) (*arbiter.Task, error)
	}{
		{"Group", db.Options{}, 2, func(d *db.DB, accountID string, in arbiter.TaskCreate) (*arbiter.Task, error) {
			tasks, errs := d.StoreGroupOf(ctx, []string{accountID, accountID}, []arbiter.TaskCreate{in, taskCreate("Beside")})
			if errs[1] != nil {
				return nil, errs[1]
			}
			return tasks[0], errs[0]
		}},
		{"One", db.Options{Ungrouped: true}, 1, func(d *db.DB, accountID string, in arbiter.TaskCreate) (*arbiter.Task, error) {
			return d.CreateTask(ctx, accountID, in)
		}},
		{"Batch", db.Options{}, 2, func(d *db.DB, accountID string, in arbiter.TaskCreate) (*arbiter.Task, error) {
			created, err := d.CreateTasks(ctx, accountID, []arbiter.TaskCreate{in, taskCreate("Beside")})
			if err != nil {
				return nil, err
			}
			if created[1].Err != nil {
				return nil, created[1].Err
			}
			return created[0].Task, created[0].Err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := dbtest.URL(t, db.Postgres)
			d := dbtest.OpenURL(t, url, tc.opts)
			acct := newAccount(t, d, "a@example.com")
			in := keyed("Raced", "raced")

			other, err := sql.Open("postgres", url)
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			tx, err := other.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			const id = "tsk_00000000000000aa"
			now := time.Now().UnixMilli()
			if _, err := tx.Exec(`INSERT INTO task_states (id, account_id, status, task_type, source, touchpoint,
				confidence_threshold, created_at) VALUES ($1, $2, 'pending', 'decide', '', 'chat', 0.9, $3)`,
				id, acct.ID, now); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(`INSERT INTO task_bodies (id, prompt, allowed_verdicts) VALUES ($1, 'Raced', '["approve","reject"]')`, id); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(`INSERT INTO idempotency_keys (account_id, idempotency_key, fingerprint, task_id, created_at, expires_at)
				VALUES ($1, 'raced', $2, $3, $4, $5)`, acct.ID, in.Fingerprint(), id, now, now+3600000); err != nil {
				t.Fatal(err)
			}

			type answer struct {
				task *arbiter.Task
				err  error
			}
			done := make(chan answer, 1)
			go func() {
				task, err := tc.store(d, acct.ID, in)
				done <- answer{task, err}
			}()
			waitForLockWait(t, other)
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			got := <-done
			if got.err != nil || got.task.ID != id {
				t.Fatalf("create = %+v, %v; want the task %s the other transaction stored", got.task, got.err, id)
			}
			var tasks int
			if err := other.QueryRow(`SELECT count(*) FROM tasks WHERE account_id = $1`, acct.ID).Scan(&tasks); err != nil || tasks != tc.tasks {
				t.Fatalf("%d tasks (%v), want %d: the other transaction's and any created beside it", tasks, err, tc.tasks)
			}
		})
	}
}

// waitForLockWait waits until a statement of the database waits on a lock.
func waitForLockWait(t *testing.T, conn *sql.DB) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(`SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no statement waits on the held key")
		}
	}
}

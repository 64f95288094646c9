package db_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// openRaw opens a second, plain connection pool on the store at url, as
// another process would.
func openRaw(t *testing.T, dialect, url string) *sql.DB {
	t.Helper()
	driver, dsn := "postgres", url
	if dialect == db.SQLite {
		driver, dsn = "sqlite", "file:"+strings.TrimPrefix(url, "sqlite:")+"?_pragma=busy_timeout(10000)"
	}
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	return raw
}

// within runs call and fails the test when it has not returned after a
// minute, rather than hanging it: the store's timeout is far shorter.
func within(t *testing.T, call func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("the call to the store did not return")
		return nil
	}
}

// TestStore_LockWaitRunsOut holds the lock a create needs in another
// process's transaction: the create waits no longer than the store's
// timeout and fails as unavailable, with a Retry-After; once the lock is
// gone, creates work again.
func TestStore_LockWaitRunsOut(t *testing.T) {
	// Not parallel: its stores time out after a second, and a machine busy
	// with other tests would time out the steps meant to pass.
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			d := dbtest.OpenURL(t, url, db.Options{Timeout: time.Second})
			acct := newAccount(t, d, "a@example.com")
			if _, err := d.CreateTask(ctx, acct.ID, taskCreate("before")); err != nil {
				t.Fatal(err)
			}

			raw := openRaw(t, dialect, url)
			holder, err := raw.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Rollback()
			lock := `UPDATE daily_usage SET count = count WHERE account_id = $1`
			if dialect == db.SQLite {
				// Any write takes SQLite's one write lock, held to the end
				// of the transaction.
				lock = `UPDATE daily_usage SET count = count WHERE account_id = ?`
			}
			if _, err := holder.ExecContext(ctx, lock, acct.ID); err != nil {
				t.Fatal(err)
			}

			err = within(t, func() error { _, err := d.CreateTask(ctx, acct.ID, taskCreate("blocked")); return err })
			wantCode(t, err, arbiter.EUNAVAILABLE)
			var e *arbiter.Error
			if !errors.As(err, &e) || e.RetryAfter <= 0 {
				t.Errorf("error = %#v, want a Retry-After", e)
			}
			if err := holder.Rollback(); err != nil {
				t.Fatal(err)
			}
			if _, err := d.CreateTask(ctx, acct.ID, taskCreate("after")); err != nil {
				t.Fatalf("create after the lock went: %v", err)
			}
		})
	}
}

// TestStore_FrozenPostgres freezes the connection to Postgres: reads,
// creates and claims fail as unavailable within about the store's timeout
// instead of waiting for the database to come back, and work again once it
// has.
func TestStore_FrozenPostgres(t *testing.T) {
	// Not parallel: its store times out after a second, and a machine busy
	// with other tests would time out the steps meant to pass.
	proxy, url := dbtest.ThroughProxy(t, dbtest.URL(t, db.Postgres))
	d := dbtest.OpenURL(t, url, db.Options{Timeout: time.Second})
	acct := newAccount(t, d, "a@example.com")
	task, err := d.CreateTask(ctx, acct.ID, taskCreate("before"))
	if err != nil {
		t.Fatal(err)
	}

	proxy.Freeze()
	for name, call := range map[string]func() error{
		"FindTaskByID": func() error { _, err := d.FindTaskByID(ctx, acct.ID, task.ID); return err },
		"CreateTask":   func() error { _, err := d.CreateTask(ctx, acct.ID, taskCreate("frozen")); return err },
		"ClaimTasks":   func() error { _, err := d.ClaimTasks(ctx, "w", 1, time.Minute); return err },
		"Health":       func() error { return d.Health(ctx) },
	} {
		t.Run(name, func(t *testing.T) {
			wantCode(t, within(t, call), arbiter.EUNAVAILABLE)
		})
	}
	proxy.Thaw()

	recovered := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if _, err := d.FindTaskByID(context.Background(), acct.ID, task.ID); err == nil {
			recovered = true
			break
		}
	}
	if !recovered {
		t.Fatal("the store did not recover once Postgres answered again")
	}
}

// TestHealthService_RefusedWrites makes every create fail, as a full disk
// does, while reads still work: after three failed writes in a row the
// store reports itself unhealthy, with the last failure; a write that
// works, or thirty seconds without writes, makes it healthy again.
func TestHealthService_RefusedWrites(t *testing.T) {
	t.Parallel()
	c := newClock()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			d := dbtest.OpenURL(t, url, db.Options{Now: c.Now})
			acct := newAccount(t, d, "a@example.com")
			if err := d.Heartbeat(ctx, "w1"); err != nil {
				t.Fatal(err)
			}
			if err := d.Health(ctx); err != nil {
				t.Fatalf("healthy store: %v", err)
			}

			raw := openRaw(t, dialect, url)
			refuse, allow := []string{
				`CREATE FUNCTION refuse_tasks() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$ LANGUAGE plpgsql`,
				`CREATE TRIGGER refuse_tasks BEFORE INSERT ON task_states FOR EACH ROW EXECUTE FUNCTION refuse_tasks()`,
			}, `DROP TRIGGER refuse_tasks ON task_states`
			if dialect == db.SQLite {
				refuse = []string{`CREATE TRIGGER refuse_tasks BEFORE INSERT ON task_states BEGIN SELECT RAISE(ABORT, 'disk full'); END`}
				allow = `DROP TRIGGER refuse_tasks`
			}
			for _, s := range refuse {
				if _, err := raw.ExecContext(ctx, s); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 3 {
				if _, err := d.CreateTask(ctx, acct.ID, taskCreate("refused")); err == nil {
					t.Fatal("a create passed the trigger")
				}
				if err := d.Health(ctx); (err == nil) != (i < 2) {
					t.Fatalf("after %d failed writes: Health = %v", i+1, err)
				}
			}
			err := d.Health(ctx)
			wantCode(t, err, arbiter.EUNAVAILABLE)
			if msg := arbiter.ErrorMessage(err); msg != "The database refuses writes: the last 3 failed." || !strings.Contains(err.Error(), "disk full") {
				t.Errorf("Health = %q (%v)", msg, err)
			}

			c.Add(30 * time.Second)
			if err := d.Heartbeat(ctx, "w1"); err != nil {
				t.Fatal(err)
			}
			if err := d.Health(ctx); err != nil {
				t.Errorf("thirty seconds without a failed write: %v", err)
			}
			if _, err := d.CreateTask(ctx, acct.ID, taskCreate("refused")); err == nil {
				t.Fatal("a create passed the trigger")
			}
			if _, err := raw.ExecContext(ctx, allow); err != nil {
				t.Fatal(err)
			}
			if _, err := d.CreateTask(ctx, acct.ID, taskCreate("stored")); err != nil {
				t.Fatal(err)
			}
			if err := d.Health(ctx); err != nil {
				t.Errorf("after a write that worked: %v", err)
			}
		})
	}
}

// TestCreateTask_FrozenStoreAnswersWithinTheTimeout freezes the store
// (Postgres stops answering; on SQLite another process holds the write
// lock) while creates keep coming, so that on Postgres some queue behind
// groups that are waiting, are taken into a group late and fall back one
// by one: every create is answered within the store's timeout and a
// margin for the machine, never after a timeout of its own group on top
// of the time it waited (issue 26: 6 and 11 s with a 5 s timeout).
func TestCreateTask_FrozenStoreAnswersWithinTheTimeout(t *testing.T) {
	// Not parallel: its stores time out in a second or less, and a machine
	// busy with other tests would time out the steps meant to pass.
	const timeout = 500 * time.Millisecond
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			var freeze, thaw func()
			if dialect == db.Postgres {
				var proxy *dbtest.Proxy
				proxy, url = dbtest.ThroughProxy(t, url)
				freeze, thaw = proxy.Freeze, proxy.Thaw
			}
			d := dbtest.OpenURL(t, url, db.Options{Timeout: timeout})
			acct := newAccount(t, d, "a@example.com")
			if _, err := d.CreateTask(ctx, acct.ID, taskCreate("before")); err != nil {
				t.Fatal(err)
			}
			if dialect == db.SQLite {
				holder, err := openRaw(t, dialect, url).BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				freeze = func() {
					if _, err := holder.ExecContext(ctx, `UPDATE daily_usage SET count = count`); err != nil {
						t.Fatal(err)
					}
				}
				thaw = func() { holder.Rollback() }
			}

			freeze()
			const creates = 24
			var (
				wg      sync.WaitGroup
				mu      sync.Mutex
				slowest time.Duration
				codes   = map[string]int{}
			)
			for i := range creates {
				wg.Add(1)
				go func() {
					defer wg.Done()
					start := time.Now()
					err := within(t, func() error { _, err := d.CreateTask(ctx, acct.ID, taskCreate("frozen")); return err })
					took := time.Since(start)
					mu.Lock()
					defer mu.Unlock()
					slowest = max(slowest, took)
					codes[arbiter.ErrorCode(err)]++
				}()
				// Arrivals spread over three timeouts: some queue while
				// groups wait on the frozen store.
				if i < creates-1 {
					time.Sleep(3 * timeout / creates)
				}
			}
			wg.Wait()
			thaw()
			t.Logf("slowest create: %s; outcomes %v", slowest, codes)
			if codes[arbiter.EUNAVAILABLE] != creates {
				t.Errorf("outcomes %v, want %d unavailable", codes, creates)
			}
			// On SQLite a write may wait the timeout for its turn and then,
			// for a lock another process holds, busy_timeout, which SQLite
			// does not cut short.
			bound := timeout + time.Second
			if dialect == db.SQLite {
				bound = 2*timeout + time.Second
			}
			if slowest >= bound {
				t.Errorf("slowest create answered after %s, want under %s (the store's timeout and a margin)", slowest, bound)
			}
		})
	}
}

package db_test

import (
	"database/sql"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// woken fails the test unless wake receives within a generous bound: one
// that only a lost wake-up misses.
func woken(t *testing.T, wake <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-wake:
	case <-time.After(20 * time.Second):
		t.Fatalf("no wake-up %s", what)
	}
}

// notWoken fails the test if wake holds a wake-up already.
func notWoken(t *testing.T, wake <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-wake:
		t.Fatalf("a wake-up %s", what)
	default:
	}
}

// toHuman claims the pending tasks of d and sends them to a person.
func toHuman(t *testing.T, d *db.DB) {
	t.Helper()
	claimed, err := d.ClaimTasks(ctx, "w", 1000, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range claimed {
		if err := d.FinishAgentAttempt(ctx, "w", task.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: 1}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// listening waits for the wake-up every watcher gets once the store's
// listener is in force (Postgres), so later wake-ups come from what it
// hears.
func listening(t *testing.T, d *db.DB, wake <-chan struct{}) {
	t.Helper()
	if d.Dialect() == db.Postgres {
		woken(t, wake, "when the listener started")
	}
}

func TestWatchTask_FinalTransitionsInThisProcessWake(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		byAgent, _ := d.CreateTask(ctx, acct.ID, taskCreate("agent"))
		byHuman, _ := d.CreateTask(ctx, acct.ID, taskCreate("human"))
		agentWake, stopAgent := d.WatchTask(byAgent.ID)
		defer stopAgent()
		humanWake, stopHuman := d.WatchTask(byHuman.ID)
		listening(t, d, agentWake)
		listening(t, d, humanWake)
		if n := d.Waiting(); n != 2 {
			t.Errorf("Waiting = %d, want 2", n)
		}

		claimed, err := d.ClaimTasks(ctx, "w", 2, time.Minute)
		if err != nil || len(claimed) != 2 {
			t.Fatalf("claimed %d: %v", len(claimed), err)
		}
		if err := d.FinishAgentAttempt(ctx, "w", byHuman.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: 1}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
		if err := d.FinishAgentAttempt(ctx, "w", byAgent.ID, decided("approve", 0.99)); err != nil {
			t.Fatal(err)
		}
		woken(t, agentWake, "when the agent completed the task")
		// Going to a person is not final: no wake-up for it, in this
		// process at least (Postgres notifications arrive asynchronously).
		if d.Dialect() == db.SQLite {
			notWoken(t, humanWake, "for a task sent to a person")
		}
		if _, err := d.DecideTask(ctx, acct.ID, byHuman.ID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
		woken(t, humanWake, "when a reviewer decided the task")

		stopHuman()
		stopHuman() // a second stop is harmless
		if n := d.Waiting(); n != 1 {
			t.Errorf("Waiting after a stop = %d, want 1", n)
		}
	})
}

// TestWatchTask_DecisionInAnotherProcessWakes makes decisions through a
// second store on the same Postgres database, as another server process
// would; only the first store's listener can carry them to its watchers.
func TestWatchTask_DecisionInAnotherProcessWakes(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	here := dbtest.OpenURL(t, url, db.Options{})
	there := dbtest.OpenURL(t, url, db.Options{})
	acct := newAccount(t, there, "a@example.com")
	const n = 20
	var ids []string
	for range n {
		task, err := there.CreateTask(ctx, acct.ID, taskCreate("p"))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	toHuman(t, there)

	first, stop := here.WatchTask(ids[0])
	listening(t, here, first)
	stop()
	var latencies []time.Duration
	for _, id := range ids {
		wake, stop := here.WatchTask(id)
		if _, err := there.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
		committed := time.Now()
		woken(t, wake, "from a decision in another process")
		latencies = append(latencies, time.Since(committed))
		stop()
	}
	slices.Sort(latencies)
	t.Logf("wake-up after another process's commit: median %s, max %s over %d decisions", latencies[n/2], latencies[n-1], n)
}

// TestWatchTask_ListenerReconnects kills the listener's connection: every
// watcher is woken to read its task again, since notifications sent while
// it was down are lost, and once it is back decisions wake watchers again.
func TestWatchTask_ListenerReconnects(t *testing.T) {
	t.Parallel()
	app := arbiter.NewID("arbiter_test_", 6)
	url := dbtest.URL(t, db.Postgres) + "&application_name=" + app
	here := dbtest.OpenURL(t, url, db.Options{})
	there := dbtest.OpenURL(t, url, db.Options{})
	acct := newAccount(t, there, "a@example.com")
	task, err := there.CreateTask(ctx, acct.ID, taskCreate("p"))
	if err != nil {
		t.Fatal(err)
	}
	toHuman(t, there)

	wake, stop := here.WatchTask(task.ID)
	defer stop()
	listening(t, here, wake)

	admin, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var killed int
	if err := admin.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%'`, app).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listener connections: %v", killed, err)
	}
	woken(t, wake, "when the listener reconnected")

	if _, err := there.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
		t.Fatal(err)
	}
	woken(t, wake, "from a decision after the reconnection")
}

// TestWatchTask_CostsMemoryOnly opens 10,000 watches, as 10,000 waiting
// requests do: they take no connection of the pool, and each costs a few
// hundred bytes of memory.
func TestWatchTask_CostsMemoryOnly(t *testing.T) {
	// Not parallel: it measures the whole process's allocations.
	dbtest.Each(t, db.Options{MaxOpenConns: 8}, func(t *testing.T, d *db.DB) {
		const n = 10000
		ids := make([]string, n)
		for i := range ids {
			ids[i] = arbiter.NewTaskID()
		}
		first, stop := d.WatchTask(ids[0])
		listening(t, d, first)
		stop()
		open := d.OpenConnections()

		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		stops := make([]func(), n)
		for i, id := range ids {
			_, stops[i] = d.WatchTask(id)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		// Allocated, not live: an upper bound that garbage from elsewhere
		// cannot lower.
		perWatch := (after.TotalAlloc - before.TotalAlloc) / n
		t.Logf("%s: %d bytes allocated per watch", d.Dialect(), perWatch)
		if perWatch > 1024 {
			t.Errorf("a watch costs %d bytes, want at most 1 KiB", perWatch)
		}
		if d.Waiting() != n || d.OpenConnections() != open {
			t.Errorf("%d watches hold %d connections more", d.Waiting(), d.OpenConnections()-open)
		}
		for _, stop := range stops {
			stop()
		}
		if d.Waiting() != 0 {
			t.Errorf("%d watches left after every stop", d.Waiting())
		}
	})
}

// TestTasksCreated_CreatesInAnotherProcessWake: a single create, a grouped
// one and a batch through a second store each reach the first store's
// TasksCreated, on the task channel; SQLite has none.
func TestTasksCreated_CreatesInAnotherProcessWake(t *testing.T) {
	t.Parallel()
	if dbtest.Open(t, db.SQLite, db.Options{}).TasksCreated() != nil {
		t.Error("SQLite has a created channel")
	}
	url := dbtest.URL(t, db.Postgres)
	here := dbtest.OpenURL(t, url, db.Options{})
	there := dbtest.OpenURL(t, url, db.Options{})
	ungrouped := dbtest.OpenURL(t, url, db.Options{Ungrouped: true})
	acct := newAccount(t, there, "a@example.com")
	created := here.TasksCreated()
	woken(t, created, "when the listener started")
	for _, tc := range []struct {
		name  string
		store *db.DB
		n     int
	}{{"grouped", there, 1}, {"ungrouped", ungrouped, 1}, {"batch", there, 3}} {
		in := make([]arbiter.TaskCreate, tc.n)
		for i := range in {
			in[i] = taskCreate("p")
		}
		if _, err := tc.store.CreateTasks(ctx, acct.ID, in); err != nil {
			t.Fatal(err)
		}
		woken(t, created, "from a "+tc.name+" create in another process")
	}
}

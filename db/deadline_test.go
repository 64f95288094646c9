package db_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// withDeadline is taskCreate with a deadline.
func withDeadline(prompt string, seconds int) arbiter.TaskCreate {
	in := taskCreate(prompt)
	in.DeadlineSeconds = seconds
	return in
}

// past is a time long gone by any database's clock.
const past = arbiter.Timestamp(1000)

func TestTaskService_CreateTask_Deadline(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		one, err := d.CreateTask(ctx, acct.ID, withDeadline("one", 3600))
		if err != nil {
			t.Fatal(err)
		}
		none, err := d.CreateTask(ctx, acct.ID, taskCreate("none"))
		if err != nil {
			t.Fatal(err)
		}
		batch, err := d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{withDeadline("b1", 60), taskCreate("b2"), withDeadline("b3", 2592000)})
		if err != nil {
			t.Fatal(err)
		}
		created := []*arbiter.Task{one, none, batch[0].Task, batch[1].Task, batch[2].Task}
		wants := []int{3600, 0, 60, 0, 2592000}
		if d.Dialect() == db.Postgres {
			// Concurrent creates share one statement.
			grouped, errs := d.StoreGroup(ctx, []string{acct.ID, acct.ID}, withDeadline("g", 120))
			if errs[0] != nil || errs[1] != nil {
				t.Fatal(errs)
			}
			created, wants = append(created, grouped...), append(wants, 120, 120)
		}
		for i, task := range created {
			for _, got := range []*arbiter.Task{task, mustFind(t, d, acct.ID, task.ID)} {
				switch {
				case wants[i] == 0 && got.DeadlineAt != nil:
					t.Errorf("%s has a deadline without asking for one", got.Prompt)
				case wants[i] != 0 && (got.DeadlineAt == nil || *got.DeadlineAt != got.CreatedAt+arbiter.Timestamp(wants[i]*1000)):
					t.Errorf("%s: deadline %v, want created_at + %d s", got.Prompt, got.DeadlineAt, wants[i])
				case got.ExpiredAt != nil:
					t.Errorf("%s: a new task has expired_at", got.Prompt)
				}
			}
		}
	})
}

func mustFind(t *testing.T, d *db.DB, accountID, id string) *arbiter.Task {
	t.Helper()
	task, err := d.FindTaskByID(ctx, accountID, id)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func TestQueueService_ExpireTasks(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		mk := func(prompt string, seconds int) *arbiter.Task {
			t.Helper()
			task, err := d.CreateTask(ctx, acct.ID, withDeadline(prompt, seconds))
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		pending, running, human, done := mk("pending", 60), mk("running", 60), mk("human", 60), mk("done", 60)
		later, never := mk("later", 3600), mk("never", 0)
		claimed, err := d.ClaimTasks(ctx, "w", 10, time.Minute)
		if err != nil || len(claimed) != 6 {
			t.Fatalf("claimed %d: %v", len(claimed), err)
		}
		if err := d.FinishAgentAttempt(ctx, "w", human.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: 1}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
		if err := d.FinishAgentAttempt(ctx, "w", done.ID, decided("approve", 0.99)); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{pending.ID, later.ID, never.ID} {
			if err := d.FinishAgentAttempt(ctx, "w", id, arbiter.AgentStep{
				Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: 1}, Next: arbiter.StatusPending, RunAfter: 1,
			}); err != nil {
				t.Fatal(err)
			}
		}
		// running stays claimed. The short deadlines pass.
		for _, task := range []*arbiter.Task{pending, running, human, done} {
			if err := d.MoveDeadline(ctx, task.ID, past); err != nil {
				t.Fatal(err)
			}
		}

		expired, err := d.ExpireTasks(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(expired)
		want := []string{pending.ID, running.ID, human.ID}
		slices.Sort(want)
		if !slices.Equal(expired, want) {
			t.Fatalf("expired %v, want %v (pending, running and human, not the completed one or those before their deadline)", expired, want)
		}
		for _, id := range want {
			task := mustFind(t, d, acct.ID, id)
			if task.Status != arbiter.StatusExpired || task.ExpiredAt == nil || task.FinalVerdict != nil || task.FinalTier != nil ||
				task.FinalConfidence != nil || task.CompletedAt != nil || !task.Final() {
				t.Errorf("expired task = %+v", task)
			}
			if d := time.Since(task.ExpiredAt.Time()); d < -time.Minute || d > time.Minute {
				t.Errorf("expired_at %s is not the database's now", task.ExpiredAt.Time())
			}
		}
		for _, task := range []*arbiter.Task{done, later, never} {
			if got := mustFind(t, d, acct.ID, task.ID); got.Status == arbiter.StatusExpired || got.ExpiredAt != nil {
				t.Errorf("%s expired", got.Prompt)
			}
		}
		if again, err := d.ExpireTasks(ctx, 100); err != nil || len(again) != 0 {
			t.Errorf("a second sweep expired %v (%v)", again, err)
		}

		// An expired task leaves the reviewer's queue, and the list finds it.
		if queue, total, err := d.ListHumanQueue(ctx, acct.ID, arbiter.QueueView{}, 10); err != nil || total != 0 || len(queue) != 0 {
			t.Errorf("the human queue holds %d (%d) after the expiry: %v", len(queue), total, err)
		}
		page, err := d.ListTasks(ctx, acct.ID, arbiter.TaskFilter{Status: arbiter.StatusExpired})
		if err != nil || len(page.Tasks) != 3 {
			t.Errorf("status=expired lists %d tasks: %v", len(page.Tasks), err)
		}

		// The worker that held running can no longer record on it.
		err = d.FinishAgentAttempt(ctx, "w", running.ID, decided("approve", 0.99))
		if wantCode(t, err, arbiter.ECONFLICT); !strings.Contains(arbiter.ErrorMessage(err), "expired") {
			t.Errorf("a late agent answer: %v", err)
		}
		if got := mustFind(t, d, acct.ID, running.ID); got.Status != arbiter.StatusExpired || len(got.Attempts) != 0 {
			t.Errorf("the late answer changed the task: %+v", got)
		}
	})
}

// TestQueueService_ExpireTasks_OncePerTaskWithManyWorkers has eight
// workers, each with its own store as separate processes would, sweep 200
// overdue tasks at once: every task expires exactly once.
func TestQueueService_ExpireTasks_OncePerTaskWithManyWorkers(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			first := dbtest.OpenURL(t, url, db.Options{})
			acct := newAccount(t, first, "a@example.com")
			const n = 200
			want := map[string]bool{}
			for i := range n {
				task, err := first.CreateTask(ctx, acct.ID, withDeadline(fmt.Sprint("task ", i), 60))
				if err != nil {
					t.Fatal(err)
				}
				if err := first.MoveDeadline(ctx, task.ID, past+arbiter.Timestamp(i)); err != nil {
					t.Fatal(err)
				}
				want[task.ID] = true
			}
			stores := []*db.DB{first}
			for range 7 {
				stores = append(stores, dbtest.OpenURL(t, url, db.Options{}))
			}
			var mu sync.Mutex
			seen := map[string]int{}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, s := range stores {
				wg.Go(func() {
					<-start
					for {
						ids, err := s.ExpireTasks(ctx, 10)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						for _, id := range ids {
							seen[id]++
						}
						mu.Unlock()
						if len(ids) == 0 {
							return
						}
					}
				})
			}
			close(start)
			wg.Wait()
			if len(seen) != n {
				t.Fatalf("%d of %d tasks expired", len(seen), n)
			}
			for id, times := range seen {
				if !want[id] || times != 1 {
					t.Fatalf("task %s expired %d times", id, times)
				}
			}
		})
	}
}

func TestQueueService_DeadlinePassedBeforeTheSweep(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		human, _ := d.CreateTask(ctx, acct.ID, withDeadline("human", 60))
		running, _ := d.CreateTask(ctx, acct.ID, withDeadline("running", 60))
		waiting, _ := d.CreateTask(ctx, acct.ID, withDeadline("waiting", 60))
		claimed, err := d.ClaimTasks(ctx, "w", 2, time.Minute)
		if err != nil || len(claimed) != 2 {
			t.Fatalf("claimed %d: %v", len(claimed), err)
		}
		if err := d.FinishAgentAttempt(ctx, "w", human.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: 1}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
		for _, task := range []*arbiter.Task{human, running, waiting} {
			if err := d.MoveDeadline(ctx, task.ID, past); err != nil {
				t.Fatal(err)
			}
		}
		// No sweep has run: the deadline alone refuses a reviewer's late
		// verdict and the agent's late answer, and a task past it is not
		// claimed.
		_, err = d.DecideTask(ctx, acct.ID, human.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"})
		if wantCode(t, err, arbiter.ECONFLICT); !strings.Contains(arbiter.ErrorMessage(err), "expired") {
			t.Errorf("a late verdict: %v", err)
		}
		err = d.FinishAgentAttempt(ctx, "w", running.ID, decided("approve", 0.99))
		if wantCode(t, err, arbiter.ECONFLICT); !strings.Contains(arbiter.ErrorMessage(err), "expired") {
			t.Errorf("a late agent answer: %v", err)
		}
		if more, err := d.ClaimTasks(ctx, "w2", 10, time.Minute); err != nil || len(more) != 0 {
			t.Errorf("claimed %d tasks past their deadline (%v)", len(more), err)
		}
		if got := mustFind(t, d, acct.ID, human.ID); got.Status != arbiter.StatusHumanNeeded || len(got.Attempts) != 1 {
			t.Errorf("the refused verdict changed the task: %+v", got)
		}
		if got := mustFind(t, d, acct.ID, running.ID); got.Status != arbiter.StatusAgentRunning || len(got.Attempts) != 0 {
			t.Errorf("the refused answer changed the task: %+v", got)
		}

		// The sweep expires them; the reviewer is then told when.
		if expired, err := d.ExpireTasks(ctx, 10); err != nil || len(expired) != 3 {
			t.Fatalf("expired %v (%v), want the three", expired, err)
		}
		_, err = d.DecideTask(ctx, acct.ID, human.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"})
		if wantCode(t, err, arbiter.ECONFLICT); !strings.Contains(arbiter.ErrorMessage(err), "expired at") {
			t.Errorf("a verdict on an expired task: %v", err)
		}
	})
}

func TestWatchTask_ExpiryWakes(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			here := dbtest.OpenURL(t, url, db.Options{})
			// On Postgres another process sweeps; SQLite serves one process.
			sweeper := here
			if dialect == db.Postgres {
				sweeper = dbtest.OpenURL(t, url, db.Options{})
			}
			acct := newAccount(t, here, "a@example.com")
			task, err := here.CreateTask(ctx, acct.ID, withDeadline("p", 60))
			if err != nil {
				t.Fatal(err)
			}
			wake, stop := here.WatchTask(task.ID)
			defer stop()
			listening(t, here, wake)
			if err := here.MoveDeadline(ctx, task.ID, past); err != nil {
				t.Fatal(err)
			}
			if expired, err := sweeper.ExpireTasks(ctx, 10); err != nil || len(expired) != 1 {
				t.Fatalf("expired %v (%v)", expired, err)
			}
			woken(t, wake, "when the task expired")
		})
	}
}

// TestQueueService_ExpireTasksUsesTheIndex proves that a sweep, which every
// worker runs each second, finds the due tasks by the partial index
// tasks_deadline instead of reading the tasks table: on 20,000 tasks its
// plan neither scans nor sorts them.
func TestQueueService_ExpireTasksUsesTheIndex(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		if err := d.InsertTasks(ctx, acct.ID, 20000, 1763805600000); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, err := d.CreateTask(ctx, acct.ID, withDeadline(fmt.Sprint(i), 3600)); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Analyze(ctx); err != nil {
			t.Fatal(err)
		}
		plan, err := d.ExplainExpireTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, "tasks_deadline") || strings.Contains(plan, "Seq Scan on tasks") ||
			strings.Contains(plan, "SCAN tasks\n") || strings.Contains(plan, "Sort Key") {
			t.Errorf("the sweep does not find due tasks by tasks_deadline:\n%s", plan)
		}
	})
}

package db_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestMigrate_TaskBodiesKeepEveryTasksAnswer: migration 00029 splits tasks
// into task_states and task_bodies under a view. A store holding tasks in
// every state the service makes (pending, leased, failed and due again,
// completed by the agent, waiting for a person, decided, audited, expired,
// with and without context, display, deadline, callback, own audit rate,
// on-expiry outcome and consensus, created alone and in a batch) answers
// every task, and every page of its list, the same before the migration
// is undone, once undone (the one table again), and once applied again.
func TestMigrate_TaskBodiesKeepEveryTasksAnswer(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		if err := d.SetAuditRate(ctx, acct.ID, 1); err != nil {
			t.Fatal(err)
		}
		var ids []string
		create := func(in arbiter.TaskCreate) string {
			t.Helper()
			task, err := d.CreateTask(ctx, acct.ID, in)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
			c.Add(time.Second)
			return task.ID
		}
		// finish claims the oldest due task and records step on it.
		finish := func(step arbiter.AgentStep) string {
			t.Helper()
			claimed, err := d.ClaimTasks(ctx, "w", 1, time.Minute)
			if err != nil || len(claimed) != 1 {
				t.Fatalf("claim = %v, %v", claimed, err)
			}
			if err := d.StartAgentCalls(ctx, "w", []string{claimed[0].ID}); err != nil {
				t.Fatal(err)
			}
			if err := d.FinishAgentAttempt(ctx, "w", claimed[0].ID, step); err != nil {
				t.Fatal(err)
			}
			c.Add(time.Second)
			return claimed[0].ID
		}
		unsure := decided("approve", 0.2)
		unsure.Next = arbiter.StatusHumanNeeded
		failed := arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Error: ptr("timeout")},
			Next: arbiter.StatusPending, RunAfter: arbiter.TimestampOf(c.Now().Add(time.Hour))}

		// The agent completes one (chosen for audit at the account's rate
		// of 1), sends one to a person who decides it, one to a person
		// who has not yet, and fails one, which waits for its retry.
		create(taskCreate("completed by the agent"))
		finish(decided("approve", 0.99))
		create(taskCreate("decided by a person"))
		decidedByPerson := finish(unsure)
		if _, err := d.DecideTask(ctx, acct.ID, decidedByPerson, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
		create(taskCreate("waiting for a person"))
		finish(unsure)
		create(taskCreate("failed once"))
		finish(failed)
		// One leased and not finished.
		create(taskCreate("leased"))
		if claimed, err := d.ClaimTasks(ctx, "w", 1, time.Minute); err != nil || len(claimed) != 1 {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		// Every optional field of a create, and no context.
		rich := taskCreate("every field")
		rich.Context = json.RawMessage(`{"amount":12,"note":"two\nlines","items":[1,2,3]}`)
		rich.Display = &arbiter.Display{Fields: []arbiter.DisplayField{{Field: "note", View: "markdown"}, {Field: "items"}}}
		rich.DeadlineSeconds = 3600
		rich.CallbackURL = "https://workflow.example.com/resume"
		rich.AuditRate = ptr(0.25)
		rich.Notify = []string{"slack:#refunds"}
		create(rich)
		bare := taskCreate("no context")
		bare.Context = nil
		create(bare)
		create(withOutcome("falls back at its deadline", arbiter.OnExpiry{Outcome: "verdict:reject"}))
		create(votingTask(arbiter.ReviewRequirement{ReviewsRequired: 3, Consensus: arbiter.ConsensusAny}))
		// One expired by the sweep.
		expiring := create(withDeadline("expires", 60))
		if err := d.MoveDeadline(ctx, expiring, arbiter.TimestampOf(c.Now().Add(-time.Minute))); err != nil {
			t.Fatal(err)
		}
		if _, err := d.ExpireTasks(ctx, 100); err != nil {
			t.Fatal(err)
		}
		// A batch.
		batch, err := d.CreateTasks(ctx, acct.ID, []arbiter.TaskCreate{taskCreate("batch 1"), rich, bare})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batch {
			if b.Err != nil {
				t.Fatal(b.Err)
			}
			ids = append(ids, b.Task.ID)
		}

		before := answers(t, d, acct.ID, ids)
		// The migrations after 00029 that re-create the view go first.
		if err := d.UndoMigrationsDownToForTest(ctx, 29); err != nil {
			t.Fatalf("undo 00029 and the later ones: %v", err)
		}
		if n, err := d.Count(ctx, `SELECT count(*) FROM tasks WHERE prompt <> '' AND account_id = ?`, acct.ID); err != nil || n != len(ids) {
			t.Fatalf("the one table after undoing 00029 holds %d of the account's %d tasks (%v)", n, len(ids), err)
		}
		if err := d.Migrate(ctx); err != nil {
			t.Fatalf("apply 00029: %v", err)
		}
		after := answers(t, d, acct.ID, ids)
		if len(after) != len(before) {
			t.Fatalf("%d answers after the migration, %d before", len(after), len(before))
		}
		for key, want := range before {
			if got := after[key]; got != want {
				t.Errorf("%s after the migration:\n%s\nbefore:\n%s", key, got, want)
			}
		}
	})
}

// answers returns the JSON of each task as the API answers it, and of
// every page of the account's task list, two tasks a page, by key. The
// receipts are left out: undoing 00042 with the migrations after 00029
// drops them, by design.
func answers(t *testing.T, d *db.DB, accountID string, ids []string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(ids))
	for _, id := range ids {
		task, err := d.FindTaskByID(ctx, accountID, id)
		if err != nil {
			t.Fatalf("find %s: %v", id, err)
		}
		task.Receipt = ""
		body, err := json.Marshal(task)
		if err != nil {
			t.Fatal(err)
		}
		out["task "+id] = string(body)
	}
	f := arbiter.TaskFilter{Limit: 2}
	for page := 0; ; page++ {
		p, err := d.ListTasks(ctx, accountID, f)
		if err != nil {
			t.Fatalf("list page %d: %v", page, err)
		}
		for _, task := range p.Tasks {
			task.Receipt = ""
		}
		body, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		out["page "+string(rune('a'+page))] = string(body)
		if !p.HasMore {
			break
		}
		f.StartingAfter = p.Tasks[len(p.Tasks)-1].ID
	}
	return out
}

// TestQueueService_TheWorkersStepsRewriteOnlyTheNarrowState: on Postgres a
// claim, a call start and a finish update the task's state row alone, never
// its body (~1 KB of prompt and context that the split keeps out of every
// new row version), and the call start, which changes no indexed column,
// is a HOT update, with no new index entries (fillfactor 70 leaves it room
// on the page).
func TestQueueService_TheWorkersStepsRewriteOnlyTheNarrowState(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{})
	acct := newAccount(t, d, "owner@example.com")
	for range 3 {
		if _, err := d.CreateTask(ctx, acct.ID, taskCreate("Refund?")); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := d.ClaimTasks(ctx, "w", 3, time.Minute)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	var ids []string
	for _, c := range claimed {
		ids = append(ids, c.ID)
	}
	if err := d.StartAgentCalls(ctx, "w", ids); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := d.FinishAgentAttempt(ctx, "w", id, decided("approve", 0.99)); err != nil {
			t.Fatal(err)
		}
	}
	// Each backend reports its counts a moment after its transactions.
	var updates, hot, bodyUpdates int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		rows, err := d.Rows(ctx, `SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
			WHERE schemaname = current_schema() AND relname IN ('task_states', 'task_bodies')`)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			switch fmt.Sprintf("%s", r[0]) {
			case "task_states":
				updates, hot = int(r[1].(int64)), int(r[2].(int64))
			case "task_bodies":
				bodyUpdates = int(r[1].(int64))
			}
		}
		if updates >= 9 || time.Now().After(deadline) {
			break
		}
	}
	if updates != 9 {
		t.Fatalf("task_states took %d row updates, want 9 (3 tasks claimed, started, finished)", updates)
	}
	if bodyUpdates != 0 {
		t.Errorf("task_bodies took %d row updates, want none", bodyUpdates)
	}
	if hot < 3 {
		t.Errorf("%d of task_states' updates were HOT, want at least the 3 call starts", hot)
	}
}

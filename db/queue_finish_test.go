package db_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// Grouped finishes are Postgres-only; SQLite records each on its own.

// TestFinishGroup_AnswersEachFinishAsASingleFinishWould records, in one
// group, a decision, a failed call to retry, a step to a human, a finish by
// a worker that lost its lease, one past the task's deadline, a second
// finish of a task already in the group and a throttled call: each is told
// what a finish alone would tell it, and only the first three and the last
// change anything.
func TestFinishGroup_AnswersEachFinishAsASingleFinishWould(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{})
	acct := newAccount(t, d, "a@example.com")
	// The lost task's lease ran out and w2 holds it now.
	lostTask, err := d.CreateTask(ctx, acct.ID, taskCreate("lost"))
	if err != nil {
		t.Fatal(err)
	}
	if claimed, err := d.ClaimTasks(ctx, "w", 1, -time.Minute); err != nil || len(claimed) != 1 {
		t.Fatalf("claimed %d (%v)", len(claimed), err)
	}
	if again, err := d.ClaimTasks(ctx, "w2", 1, time.Minute); err != nil || len(again) != 1 || again[0].ID != lostTask.ID {
		t.Fatalf("w2 claimed %v (%v), want the lost task", taskIDs(again), err)
	}
	var tasks []*arbiter.Task
	for _, p := range []string{"decided", "failed", "human", "late", "throttled"} {
		task, err := d.CreateTask(ctx, acct.ID, withDeadline(p, 60))
		if err != nil {
			t.Fatal(err)
		}
		tasks = append(tasks, task)
	}
	decidedTask, failedTask, humanTask, lateTask, throttledTask := tasks[0], tasks[1], tasks[2], tasks[3], tasks[4]
	if claimed, err := d.ClaimTasks(ctx, "w", 5, time.Minute); err != nil || len(claimed) != 5 {
		t.Fatalf("claimed %d (%v)", len(claimed), err)
	}
	if err := d.MoveDeadline(ctx, lateTask.ID, past); err != nil {
		t.Fatal(err)
	}

	reason := arbiter.VerifierTimedOut
	failed := arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Error: &reason, StartedAt: 1},
		Next: arbiter.StatusPending, RunAfter: 1763805600000}
	human := arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Rationale: "unsure", StartedAt: 1},
		Next: arbiter.StatusHumanNeeded}
	before := d.GroupedFinishes()
	errs := d.FinishGroup(ctx, []db.Finish{
		{"w", decidedTask.ID, decided("approve", 0.95)},
		{"w", failedTask.ID, failed},
		{"w", humanTask.ID, human},
		{"w", lostTask.ID, decided("reject", 0.99)},
		{"w", lateTask.ID, decided("reject", 0.99)},
		{"w", decidedTask.ID, decided("reject", 0.99)},
		{"w", throttledTask.ID, arbiter.AgentStep{Next: arbiter.StatusPending, RunAfter: arbiter.TimestampOf(time.Now().Add(time.Hour)), Throttled: true}},
	})
	for i, err := range errs[:3] {
		if err != nil {
			t.Errorf("finish %d: %v", i, err)
		}
	}
	wantCode(t, errs[3], arbiter.ECONFLICT)
	if !strings.Contains(arbiter.ErrorMessage(errs[3]), "lease") {
		t.Errorf("the lost lease: %v", errs[3])
	}
	wantCode(t, errs[4], arbiter.ECONFLICT)
	if !strings.Contains(arbiter.ErrorMessage(errs[4]), "expired") {
		t.Errorf("the late answer: %v", errs[4])
	}
	wantCode(t, errs[5], arbiter.ECONFLICT)
	if errs[6] != nil {
		t.Errorf("the throttled call: %v", errs[6])
	}
	if got := d.GroupedFinishes() - before; got != 4 {
		t.Errorf("the group statement recorded %d finishes, want 4", got)
	}
	// A throttled call moves its task back to pending, recording no
	// attempt and counting no failure.
	if got := mustFind(t, d, acct.ID, throttledTask.ID); got.Status != arbiter.StatusPending || len(got.Attempts) != 0 || got.Failures != 0 {
		t.Errorf("throttled task = %+v", got)
	}

	if got := mustFind(t, d, acct.ID, decidedTask.ID); got.Status != arbiter.StatusCompleted || *got.FinalVerdict != "approve" ||
		*got.FinalTier != arbiter.TierAgent || *got.FinalConfidence != 0.95 || got.CompletedAt == nil || len(got.Attempts) != 1 ||
		*got.Attempts[0].Verdict != "approve" || *got.Attempts[0].Model != "test-model" {
		t.Errorf("decided task = %+v", got)
	}
	if got := mustFind(t, d, acct.ID, failedTask.ID); got.Status != arbiter.StatusPending || got.FinalVerdict != nil ||
		len(got.Attempts) != 1 || got.Attempts[0].Error == nil || *got.Attempts[0].Error != reason || got.Attempts[0].Verdict != nil {
		t.Errorf("failed task = %+v", got)
	}
	if got := mustFind(t, d, acct.ID, humanTask.ID); got.Status != arbiter.StatusHumanNeeded || got.CompletedAt != nil ||
		len(got.Attempts) != 1 || got.Attempts[0].Rationale != "unsure" {
		t.Errorf("human task = %+v", got)
	}
	if got := mustFind(t, d, acct.ID, lostTask.ID); got.Status != arbiter.StatusAgentRunning || len(got.Attempts) != 0 {
		t.Errorf("the lost lease changed the task: %+v", got)
	}
	if got := mustFind(t, d, acct.ID, lateTask.ID); got.Status != arbiter.StatusAgentRunning || len(got.Attempts) != 0 {
		t.Errorf("the late answer changed the task: %+v", got)
	}
	// The failed call is retried once its time comes, with its count.
	if retried, err := d.ClaimTasks(ctx, "w", 10, time.Minute); err != nil || len(retried) != 1 ||
		retried[0].ID != failedTask.ID || retried[0].Failures != 1 {
		t.Errorf("retried %v (%v), want the failed task with one failure", taskIDs(retried), err)
	}
}

// TestFinishAgentAttempt_ConcurrentFinishesAreGrouped finishes many claimed
// tasks at once, as a worker with many calls in flight does, while group
// slots are held: they share statements, each task is decided once, and
// waiters of each are woken.
func TestFinishAgentAttempt_ConcurrentFinishesAreGrouped(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.Postgres, db.Options{MaxOpenConns: 4})
	acct := newAccount(t, d, "a@example.com")
	const n = 50
	for i := range n {
		if _, err := d.CreateTask(ctx, acct.ID, taskCreate("p"+string(rune('a'+i%26)))); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := d.ClaimTasks(ctx, "w", n, time.Minute)
	if err != nil || len(claimed) != n {
		t.Fatalf("claimed %d (%v)", len(claimed), err)
	}
	var wakes []<-chan struct{}
	for _, task := range claimed {
		wake, stop := d.WatchTask(task.ID)
		defer stop()
		wakes = append(wakes, wake)
	}
	before := d.GroupedFinishes()
	release := d.HoldFinishes()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, task := range claimed {
		wg.Go(func() { errs[i] = d.FinishAgentAttempt(ctx, "w", task.ID, decided("approve", 0.9)) })
	}
	for d.QueuedFinishes() < n {
		time.Sleep(time.Millisecond) // wait for the state: every finish queued
	}
	release()
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := d.GroupedFinishes() - before; got != n {
		t.Errorf("group statements recorded %d of %d finishes", got, n)
	}
	for i, task := range claimed {
		if got := mustFind(t, d, acct.ID, task.ID); got.Status != arbiter.StatusCompleted || len(got.Attempts) != 1 {
			t.Errorf("task %s = %+v", task.ID, got)
		}
		select {
		case <-wakes[i]:
		default:
			t.Errorf("the waiter of %s was not woken", task.ID)
		}
	}
}

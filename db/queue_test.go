package db_test

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// clock is a settable store clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.UnixMilli(1763805600000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// decided is a confident agent step on a claimed task.
func decided(verdict string, confidence float64) arbiter.AgentStep {
	model := "test-model"
	return arbiter.AgentStep{
		Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence,
			Model: &model, StartedAt: 1763805600000},
		Next: arbiter.StatusCompleted,
	}
}

func TestQueueService_Claim(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		var ids []string
		for i := range 3 {
			task, err := d.CreateTask(ctx, acct.ID, taskCreate("task "+string(rune('A'+i))))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
			c.Add(time.Millisecond)
		}

		claimed, err := d.ClaimTasks(ctx, "w1", 2, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) != 2 || claimed[0].ID != ids[0] || claimed[1].ID != ids[1] {
			t.Fatalf("claimed %v, want the two oldest", taskIDs(claimed))
		}
		if c := claimed[0]; c.Status != arbiter.StatusAgentRunning || string(c.Context) != `{"amount":12}` ||
			c.AccountID != acct.ID || len(c.AllowedVerdicts) != 2 || c.AllowedVerdicts[1] != "reject" ||
			c.ConfidenceThreshold != 0.9 || c.Prompt != "task A" || c.Failures != 0 {
			t.Errorf("claimed task = %+v, want agent_running with its question and context", c)
		}
		got, _ := d.FindTaskByID(ctx, acct.ID, ids[0])
		if got.Status != arbiter.StatusAgentRunning {
			t.Errorf("stored status = %s", got.Status)
		}

		// Leased tasks are not handed out again while the lease holds.
		again, _ := d.ClaimTasks(ctx, "w2", 10, time.Minute)
		if len(again) != 1 || again[0].ID != ids[2] {
			t.Fatalf("second claim = %v, want only %s", taskIDs(again), ids[2])
		}
		if none, _ := d.ClaimTasks(ctx, "w2", 10, time.Minute); len(none) != 0 {
			t.Fatalf("third claim = %v, want nothing", taskIDs(none))
		}
	})
}

func TestQueueService_LeaseExpiry(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		task, _ := d.CreateTask(ctx, acct.ID, taskCreate("p"))
		// Leases run by the database's clock, which the test cannot move: a
		// negative lease is one that ran out a minute ago.
		if claimed, _ := d.ClaimTasks(ctx, "vanished", 1, -time.Minute); len(claimed) != 1 {
			t.Fatal("not claimed")
		}
		if err := d.StartAgentCalls(ctx, "vanished", []string{task.ID}); err != nil {
			t.Fatal(err)
		}

		claimed, err := d.ClaimTasks(ctx, "w2", 1, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].ID != task.ID {
			t.Fatalf("expired lease not claimed again: %v %v", taskIDs(claimed), err)
		}
		if claimed[0].Failures != 1 {
			t.Errorf("the call lost with its worker counts %d failures, want 1", claimed[0].Failures)
		}
		if err := d.FinishAgentAttempt(ctx, "w2", task.ID, decided("approve", 0.95)); err != nil {
			t.Fatal(err)
		}
		// The vanished worker comes back and reports: refused, nothing changes.
		err = d.FinishAgentAttempt(ctx, "vanished", task.ID, decided("reject", 0.99))
		wantCode(t, err, arbiter.ECONFLICT)

		got, _ := d.FindTaskByID(ctx, acct.ID, task.ID)
		if got.Status != arbiter.StatusCompleted || *got.FinalVerdict != "approve" || *got.FinalTier != "agent" ||
			*got.FinalConfidence != 0.95 || got.CompletedAt == nil || len(got.Attempts) != 1 {
			t.Fatalf("task = %+v, want decided once by w2", got)
		}
		if a := got.Attempts[0]; a.Tier != "agent" || *a.Model != "test-model" || a.Reviewer != nil || a.Error != nil {
			t.Errorf("attempt = %+v", a)
		}
	})
}

// TestQueueService_ALostLeaseCountsOnlyAStartedCall: a lease that runs out
// counts a lost call only when its worker had marked the call started. A
// claim whose worker never learned of it (it timed out on the worker's
// side, and committed) costs the task nothing, however often it happens;
// a mark by a worker that no longer holds the lease marks nothing; and a
// started call lost with its worker counts one failure.
func TestQueueService_ALostLeaseCountsOnlyAStartedCall(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		task, _ := d.CreateTask(ctx, acct.ID, taskCreate("p"))
		for i := range arbiter.MaxAgentFailures + 1 {
			claimed, err := d.ClaimTasks(ctx, fmt.Sprint("never-called-", i), 1, -time.Minute)
			if err != nil || len(claimed) != 1 || claimed[0].Failures != 0 {
				t.Fatalf("claim %d = %+v (%v), want the task with no failure", i+1, claimed, err)
			}
		}
		// A worker whose lease another took marks nothing.
		if err := d.StartAgentCalls(ctx, "never-called-0", []string{task.ID}); err != nil {
			t.Fatal(err)
		}
		claimed, err := d.ClaimTasks(ctx, "called", 1, -time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].Failures != 0 {
			t.Fatalf("claim after a foreign mark = %+v (%v), want the task with no failure", claimed, err)
		}
		if err := d.StartAgentCalls(ctx, "called", []string{task.ID, "tsk_unknown"}); err != nil {
			t.Fatal(err)
		}
		claimed, err = d.ClaimTasks(ctx, "next", 1, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].Failures != 1 {
			t.Fatalf("claim after a started call was lost = %+v (%v), want the task with one failure", claimed, err)
		}
		// Its own mark is the next lease's: released, the task is taken
		// again with its one failure, no more.
		if err := d.StartAgentCalls(ctx, "next", []string{task.ID}); err != nil {
			t.Fatal(err)
		}
		if err := d.ReleaseTasks(ctx, "next"); err != nil {
			t.Fatal(err)
		}
		if again, err := d.ClaimTasks(ctx, "last", 1, time.Minute); err != nil || len(again) != 1 || again[0].Failures != 1 {
			t.Fatalf("claim after a release = %+v (%v), want the task with its one failure", again, err)
		}
		if got := mustFind(t, d, acct.ID, task.ID); got.Status != arbiter.StatusAgentRunning || len(got.Attempts) != 0 {
			t.Errorf("task = %+v", got)
		}
	})
}

// TestQueueService_AClaimThatStartsTheCallsCountsItsLostLease: a claim
// that marks its calls started (ClaimTasksStarted) needs no
// StartAgentCalls for its lost lease to count a failure, once a claim;
// a plain claim's lost lease, after it, counts nothing more.
func TestQueueService_AClaimThatStartsTheCallsCountsItsLostLease(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		task, _ := d.CreateTask(ctx, acct.ID, taskCreate("p"))
		for i := range 2 {
			claimed, err := d.ClaimTasksStarted(ctx, fmt.Sprint("vanished-", i), 1, -time.Minute)
			if err != nil || len(claimed) != 1 || claimed[0].Failures != i {
				t.Fatalf("claim %d = %+v (%v), want the task with %d failures", i+1, claimed, err, i)
			}
		}
		claimed, err := d.ClaimTasks(ctx, "never-called", 1, -time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].Failures != 2 {
			t.Fatalf("plain claim = %+v (%v), want the task with the two lost calls", claimed, err)
		}
		claimed, err = d.ClaimTasksStarted(ctx, "last", 1, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].Failures != 2 {
			t.Fatalf("claim after a plain claim's lost lease = %+v (%v), want the task with its two failures", claimed, err)
		}
		if err := d.FinishAgentAttempt(ctx, "last", task.ID, decided("approve", 0.95)); err != nil {
			t.Fatal(err)
		}
		if got := mustFind(t, d, acct.ID, task.ID); got.Status != arbiter.StatusCompleted || got.Failures != 2 || len(got.Attempts) != 1 {
			t.Errorf("task = %s with %d failures and %d attempts, want completed by its one attempt", got.Status, got.Failures, len(got.Attempts))
		}
	})
}

// TestQueueService_ATaskLostTooOftenGoesToAHuman: a task whose workers all
// vanish mid-call is taken again with one more failure each time; once
// they reach MaxAgentFailures, arbiter.LostAgentStep's step sends it to a
// human with the lost call's attempt, and its count no longer grows.
func TestQueueService_ATaskLostTooOftenGoesToAHuman(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		task, _ := d.CreateTask(ctx, acct.ID, taskCreate("p"))
		var claimed []*arbiter.Task
		for lost := range arbiter.MaxAgentFailures + 1 {
			// Each vanished worker's lease ran out a minute ago; "w", the
			// last to claim, holds its own.
			owner, lease := fmt.Sprint("vanished-", lost), -time.Minute
			if lost == arbiter.MaxAgentFailures {
				owner, lease = "w", time.Minute
			}
			var err error
			claimed, err = d.ClaimTasks(ctx, owner, 1, lease)
			if err != nil || len(claimed) != 1 || claimed[0].ID != task.ID {
				t.Fatalf("claim %d: %v (%v)", lost+1, taskIDs(claimed), err)
			}
			if claimed[0].Failures != lost {
				t.Fatalf("claim %d counts %d failures, want %d lost calls", lost+1, claimed[0].Failures, lost)
			}
			if err := d.StartAgentCalls(ctx, owner, []string{task.ID}); err != nil {
				t.Fatal(err)
			}
			if _, gone := arbiter.LostAgentStep(claimed[0], c.Now()); gone != (lost == arbiter.MaxAgentFailures) {
				t.Fatalf("claim %d: lost = %v", lost+1, gone)
			}
		}
		step, _ := arbiter.LostAgentStep(claimed[0], c.Now())
		if err := d.FinishAgentAttempt(ctx, "w", task.ID, step); err != nil {
			t.Fatal(err)
		}
		got, _ := d.FindTaskByID(ctx, acct.ID, task.ID)
		if got.Status != arbiter.StatusHumanNeeded || len(got.Attempts) != 1 || got.Attempts[0].Error == nil ||
			*got.Attempts[0].Error != arbiter.VerifierLost || got.FinalVerdict != nil {
			t.Fatalf("task = %+v, want it waiting for a human with the lost call's attempt", got)
		}
		if more, _ := d.ClaimTasks(ctx, "w", 1, time.Minute); len(more) != 0 {
			t.Fatalf("a task waiting for a human was claimed: %v", taskIDs(more))
		}
	})
}

// TestQueueService_LeaseByTheDatabaseClock claims from two processes whose
// clocks disagree: the first runs two minutes behind, as a claim held up by
// a stall would have computed its lease. The lease still runs a minute from
// the claim by the database's clock, so the second process finds nothing to
// claim and the verifier is not called twice.
func TestQueueService_LeaseByTheDatabaseClock(t *testing.T) {
	t.Parallel()
	behind := func() time.Time { return time.Now().Add(-2 * time.Minute) }
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			slow := dbtest.OpenURL(t, url, db.Options{Now: behind})
			other := dbtest.OpenURL(t, url, db.Options{})
			acct := newAccount(t, other, "a@example.com")
			task, err := slow.CreateTask(ctx, acct.ID, taskCreate("p"))
			if err != nil {
				t.Fatal(err)
			}
			if claimed, err := slow.ClaimTasks(ctx, "slow", 1, time.Minute); err != nil || len(claimed) != 1 {
				t.Fatalf("first claim = %v (%v), want the task", taskIDs(claimed), err)
			}
			if stolen, err := other.ClaimTasks(ctx, "other", 1, time.Minute); err != nil || len(stolen) != 0 {
				t.Fatalf("second claim = %v (%v), want nothing while the lease holds", taskIDs(stolen), err)
			}
			if err := slow.FinishAgentAttempt(ctx, "slow", task.ID, decided("approve", 0.95)); err != nil {
				t.Fatalf("the lease holder could not record its call: %v", err)
			}
		})
	}
}

// TestQueueService_RetriesFirst fails a call while newer tasks wait: once
// its backoff runs out, the retry is claimed before them, as docs/agent-tier.md
// promises a retry after 1 s, then 2 s, whatever the backlog.
func TestQueueService_RetriesFirst(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		failing, _ := d.CreateTask(ctx, acct.ID, taskCreate("fails once"))
		c.Add(time.Millisecond)
		var backlog []string
		for range 3 {
			task, err := d.CreateTask(ctx, acct.ID, taskCreate("backlog"))
			if err != nil {
				t.Fatal(err)
			}
			backlog = append(backlog, task.ID)
			c.Add(time.Millisecond)
		}
		claimed, err := d.ClaimTasks(ctx, "w1", 1, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].ID != failing.ID {
			t.Fatalf("first claim = %v (%v), want the oldest task", taskIDs(claimed), err)
		}
		step := arbiter.NextAgentStep(claimed[0], arbiter.Verification{}, errors.New("HTTP 503"), c.Now(), c.Now(),
			arbiter.AgentRetry{Backoff: func(int) time.Duration { return time.Second }})
		if err := d.FinishAgentAttempt(ctx, "w1", failing.ID, step); err != nil {
			t.Fatal(err)
		}
		c.Add(time.Second)

		claimed, err = d.ClaimTasks(ctx, "w1", 1, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].ID != failing.ID || claimed[0].Failures != 1 {
			t.Fatalf("claim after the backoff = %v (%v), want the retry of %s before the backlog %v",
				taskIDs(claimed), err, failing.ID, backlog)
		}
		rest, err := d.ClaimTasks(ctx, "w1", 10, time.Minute)
		if err != nil || len(rest) != 3 || rest[0].ID != backlog[0] || rest[2].ID != backlog[2] {
			t.Fatalf("then = %v (%v), want the backlog oldest first", taskIDs(rest), err)
		}
	})
}

func TestQueueService_FailuresAndRelease(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		task, _ := d.CreateTask(ctx, acct.ID, taskCreate("p"))
		claimed, _ := d.ClaimTasks(ctx, "w1", 1, time.Minute)

		msg := "HTTP 500"
		finished := arbiter.TimestampOf(c.Now())
		step := arbiter.AgentStep{
			Attempt:  arbiter.Attempt{Tier: arbiter.TierAgent, Error: &msg, StartedAt: finished, FinishedAt: &finished},
			Next:     arbiter.StatusPending,
			RunAfter: arbiter.TimestampOf(c.Now().Add(time.Second)),
		}
		if err := d.FinishAgentAttempt(ctx, "w1", claimed[0].ID, step); err != nil {
			t.Fatal(err)
		}
		if early, _ := d.ClaimTasks(ctx, "w1", 1, time.Minute); len(early) != 0 {
			t.Fatal("a task was claimed again before its backoff ran out")
		}
		c.Add(time.Second)
		again, _ := d.ClaimTasks(ctx, "w1", 1, time.Minute)
		if len(again) != 1 || again[0].Failures != 1 {
			t.Fatalf("after backoff: %v, want the task with 1 failure", again)
		}

		// A stopping worker releases what it could not finish.
		if err := d.ReleaseTasks(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		got, _ := d.FindTaskByID(ctx, acct.ID, task.ID)
		if got.Status != arbiter.StatusPending || len(got.Attempts) != 1 || *got.Attempts[0].Error != "HTTP 500" {
			t.Fatalf("after release: %+v", got)
		}
		wantCode(t, d.FinishAgentAttempt(ctx, "w1", task.ID, decided("approve", 1)), arbiter.ECONFLICT)
		// A released task is not a lost one: taking it again counts nothing.
		if again, _ := d.ClaimTasks(ctx, "w2", 1, time.Minute); len(again) != 1 || again[0].Failures != 1 {
			t.Fatalf("after release: %v, want the task with its 1 failure", again)
		}
	})
}

// TestQueueService_ThrottledCallsCountNoFailure: a throttled call (the
// provider's 429) puts the task back to pending until its RunAfter with no
// attempt and no failure, however often it comes, and the task's next
// answer decides it.
func TestQueueService_ThrottledCallsCountNoFailure(t *testing.T) {
	t.Parallel()
	c := newClock()
	retry := arbiter.AgentRetry{Backoff: func(int) time.Duration { return time.Second }, CallTimeout: time.Minute}
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		task, _ := d.CreateTask(ctx, acct.ID, taskCreate("p"))
		for round := range arbiter.MaxAgentFailures + 2 {
			claimed, err := d.ClaimTasks(ctx, "w1", 1, time.Minute)
			if err != nil || len(claimed) != 1 || claimed[0].Failures != 0 {
				t.Fatalf("claim %d = %+v (%v), want the task with no failure", round+1, claimed, err)
			}
			throttled := &arbiter.ThrottledError{RetryAfter: 5 * time.Second, Err: errors.New("429 Too Many Requests")}
			step := arbiter.NextAgentStep(claimed[0], arbiter.Verification{Model: "m"}, throttled, c.Now(), c.Now(), retry)
			if err := d.FinishAgentAttempt(ctx, "w1", task.ID, step); err != nil {
				t.Fatal(err)
			}
			if got := mustFind(t, d, acct.ID, task.ID); got.Status != arbiter.StatusPending || len(got.Attempts) != 0 {
				t.Fatalf("after a throttled call: %s with %d attempts, want pending with none", got.Status, len(got.Attempts))
			}
			c.Add(5*time.Second - time.Millisecond)
			if early, _ := d.ClaimTasks(ctx, "w1", 1, time.Minute); len(early) != 0 {
				t.Fatal("claimed again before the Retry-After ran out")
			}
			c.Add(time.Millisecond)
		}
		claimed, err := d.ClaimTasks(ctx, "w1", 1, time.Minute)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("last claim = %v (%v)", taskIDs(claimed), err)
		}
		if err := d.FinishAgentAttempt(ctx, "w1", task.ID, decided("approve", 0.95)); err != nil {
			t.Fatal(err)
		}
		if got := mustFind(t, d, acct.ID, task.ID); got.Status != arbiter.StatusCompleted || len(got.Attempts) != 1 || got.Failures != 0 {
			t.Errorf("task = %+v, want completed by its one answered call", got)
		}
	})
}

func TestQueueService_RetriesThenHuman(t *testing.T) {
	t.Parallel()
	c := newClock()
	backoff := func(failures int) time.Duration { return time.Second << failures }
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		task, _ := d.CreateTask(ctx, acct.ID, taskCreate("p"))
		// Each failed call waits out its backoff (none before the first
		// call, then 1s and 2s); the third failure goes to a human.
		for failures, wait := range []time.Duration{0, time.Second, 2 * time.Second} {
			if wait > 0 {
				c.Add(wait - time.Millisecond)
				if early, _ := d.ClaimTasks(ctx, "w1", 1, time.Minute); len(early) != 0 {
					t.Fatalf("claimed again %v before a backoff of %v ran out", wait-time.Millisecond, wait)
				}
				c.Add(time.Millisecond)
			}
			claimed, err := d.ClaimTasks(ctx, "w1", 1, time.Minute)
			if err != nil || len(claimed) != 1 || claimed[0].Failures != failures {
				t.Fatalf("claim %d = %+v (%v), want the task with %d failures", failures+1, claimed, err, failures)
			}
			failure := &arbiter.VerifierError{Reason: arbiter.VerifierHTTPStatus(503), Err: errors.New("503 Service Unavailable")}
			step := arbiter.NextAgentStep(claimed[0], arbiter.Verification{}, failure, c.Now(), c.Now(), arbiter.AgentRetry{Backoff: backoff})
			if err := d.FinishAgentAttempt(ctx, "w1", task.ID, step); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := d.FindTaskByID(ctx, acct.ID, task.ID)
		if got.Status != arbiter.StatusHumanNeeded || got.Failures != 3 || len(got.Attempts) != 3 ||
			got.FinalVerdict != nil || got.CompletedAt != nil {
			t.Fatalf("after three failures: %+v, want human_needed with 3 failed attempts", got)
		}
		for _, a := range got.Attempts {
			if a.Tier != arbiter.TierAgent || a.Error == nil || *a.Error != "the verifier answered HTTP 503" || a.Verdict != nil {
				t.Errorf("attempt = %+v, want a failed agent attempt", a)
			}
		}
		c.Add(time.Hour)
		if again, _ := d.ClaimTasks(ctx, "w1", 1, time.Minute); len(again) != 0 {
			t.Fatal("a task waiting for a human was claimed by a worker")
		}
	})
}

// humanNeeded creates a task and routes it to a human.
func humanNeeded(t *testing.T, d *db.DB, accountID string) *arbiter.Task {
	t.Helper()
	task, err := d.CreateTask(ctx, accountID, taskCreate("p"))
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := d.ClaimTasks(ctx, "w", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if err := d.FinishAgentAttempt(ctx, "w", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
	}
	return task
}

func TestQueueService_DecideTask(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		alice := newAccount(t, d, "alice@example.com")
		bob := newAccount(t, d, "bob@example.com")
		task := humanNeeded(t, d, alice.ID)

		_, err := d.DecideTask(ctx, bob.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "bob@example.com"})
		wantCode(t, err, arbiter.ENOTFOUND)
		_, err = d.DecideTask(ctx, alice.ID, "tsk_nope", arbiter.HumanDecision{Verdict: "approve", Reviewer: "a"})
		wantCode(t, err, arbiter.ENOTFOUND)
		_, err = d.DecideTask(ctx, alice.ID, task.ID, arbiter.HumanDecision{Verdict: "maybe", Reviewer: "alice@example.com"})
		wantCode(t, err, arbiter.EINVALID)

		got, err := d.DecideTask(ctx, alice.ID, task.ID, arbiter.HumanDecision{
			Verdict: "reject", Rationale: "Receipt missing.", Reviewer: "alice@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		stored, _ := d.FindTaskByID(ctx, alice.ID, task.ID)
		for _, tk := range []*arbiter.Task{got, stored} {
			if tk.Status != "completed" || *tk.FinalVerdict != "reject" || *tk.FinalTier != "human" ||
				*tk.FinalConfidence != 1.0 || tk.CompletedAt == nil || len(tk.Attempts) != 2 {
				t.Fatalf("decided task = %+v", tk)
			}
			a := tk.Attempts[1]
			if a.Tier != "human" || *a.Reviewer != "alice@example.com" || *a.Verdict != "reject" ||
				*a.Confidence != 1.0 || a.Rationale != "Receipt missing." || a.Model != nil {
				t.Errorf("human attempt = %+v", a)
			}
		}

		_, err = d.DecideTask(ctx, alice.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "carol@example.com"})
		wantCode(t, err, arbiter.ECONFLICT)
		if !strings.Contains(arbiter.ErrorMessage(err), "already decided by alice@example.com") {
			t.Errorf("double decision says %q", arbiter.ErrorMessage(err))
		}
		if again, _ := d.FindTaskByID(ctx, alice.ID, task.ID); *again.FinalVerdict != "reject" || len(again.Attempts) != 2 {
			t.Error("the second decision changed the task")
		}

		pending, _ := d.CreateTask(ctx, alice.ID, taskCreate("still pending"))
		_, err = d.DecideTask(ctx, alice.ID, pending.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "a"})
		wantCode(t, err, arbiter.ECONFLICT)
	})
}

func TestQueueService_DecideTask_Concurrent(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		task := humanNeeded(t, d, acct.ID)
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := range 10 {
			wg.Go(func() {
				_, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{
					Verdict: "approve", Reviewer: "r" + string(rune('0'+i))})
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else if arbiter.ErrorCode(err) != arbiter.ECONFLICT {
					t.Error(err)
				} else if msg := arbiter.ErrorMessage(err); !strings.HasPrefix(msg, "The task was already decided by r") {
					t.Errorf("a losing reviewer is told %q, want who decided", msg)
				}
			})
		}
		wg.Wait()
		got, _ := d.FindTaskByID(ctx, acct.ID, task.ID)
		if wins != 1 || len(got.Attempts) != 2 {
			t.Fatalf("%d decisions succeeded, %d attempts; want exactly one", wins, len(got.Attempts))
		}
	})
}

// TestQueueService_DecideTask_RacingDecision holds a rival decision open in
// another Postgres transaction while DecideTask reads the task (still
// human_needed) and blocks on the row; after the rival commits, the update's
// WHERE clause refuses, nothing changes, and the error names the rival.
// SQLite needs no such test: its write transactions run one at a time.
func TestQueueService_DecideTask_RacingDecision(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	d := dbtest.OpenURL(t, url, db.Options{})
	acct := newAccount(t, d, "a@example.com")
	task := humanNeeded(t, d, acct.ID)

	raw, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rival, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rival.Rollback()
	var rivalPID int
	if err := rival.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&rivalPID); err != nil {
		t.Fatal(err)
	}
	if _, err := rival.ExecContext(ctx, `UPDATE task_states SET status = 'completed', final_verdict = 'reject',
		final_tier = 'human', final_confidence = 1, completed_at = 1 WHERE id = $1`, task.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := rival.ExecContext(ctx, `INSERT INTO attempts (task_id, tier, verdict, confidence, reviewer, started_at, finished_at)
		VALUES ($1, 'human', 'reject', 1, 'rival@example.com', 1, 1)`, task.ID); err != nil {
		t.Fatal(err)
	}

	decided := make(chan error, 1)
	go func() {
		_, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "late@example.com"})
		decided <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var blocked int
		if err := raw.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE $1 = ANY(pg_blocking_pids(pid))`, rivalPID).Scan(&blocked); err != nil {
			t.Fatal(err)
		} else if blocked > 0 {
			break
		}
		select {
		case err := <-decided:
			t.Fatalf("DecideTask returned %v without waiting for the rival", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("DecideTask never waited on the rival's row lock")
		}
	}
	if err := rival.Commit(); err != nil {
		t.Fatal(err)
	}

	err = <-decided
	wantCode(t, err, arbiter.ECONFLICT)
	if msg := arbiter.ErrorMessage(err); msg != "The task was already decided by rival@example.com." {
		t.Errorf("the late reviewer is told %q", msg)
	}
	got, _ := d.FindTaskByID(ctx, acct.ID, task.ID)
	if *got.FinalVerdict != "reject" || len(got.Attempts) != 2 || *got.Attempts[1].Reviewer != "rival@example.com" {
		t.Fatalf("task = %+v, want the rival's decision alone", got)
	}
}

func TestQueueService_ListHumanQueue(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		alice := newAccount(t, d, "alice@example.com")
		bob := newAccount(t, d, "bob@example.com")
		first := humanNeeded(t, d, alice.ID)
		c.Add(time.Second)
		second := humanNeeded(t, d, alice.ID)
		humanNeeded(t, d, bob.ID)
		d.CreateTask(ctx, alice.ID, taskCreate("pending, not queued"))

		tasks, total, err := d.ListHumanQueue(ctx, alice.ID, arbiter.QueueView{}, 1)
		if err != nil || total != 2 || len(tasks) != 1 || tasks[0].ID != first.ID {
			t.Fatalf("queue = %v total %d (%v), want %s first of 2", taskIDs(tasks), total, err, first.ID)
		}
		tasks, _, _ = d.ListHumanQueue(ctx, alice.ID, arbiter.QueueView{}, 10)
		if len(tasks) != 2 || tasks[1].ID != second.ID {
			t.Fatalf("queue = %v, want oldest first", taskIDs(tasks))
		}
		// A list shows no contexts or attempts, so it reads none.
		if q := tasks[0]; q.Prompt != "p" || len(q.AllowedVerdicts) != 2 || q.Status != arbiter.StatusHumanNeeded ||
			q.CreatedAt != first.CreatedAt || q.Context != nil || len(q.Attempts) != 0 {
			t.Errorf("listed task = %+v, want its labels without context or attempts", q)
		}
	})
}

func TestQueueService_FindQueuePlace(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		alice := newAccount(t, d, "alice@example.com")
		bob := newAccount(t, d, "bob@example.com")
		empty := newAccount(t, d, "empty@example.com")
		decided := humanNeeded(t, d, alice.ID)
		if _, err := d.DecideTask(ctx, alice.ID, decided.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "a"}); err != nil {
			t.Fatal(err)
		}
		c.Add(time.Second)
		// Two tasks created in the same millisecond are ordered by id.
		a, b := humanNeeded(t, d, alice.ID), humanNeeded(t, d, alice.ID)
		if b.ID < a.ID {
			a, b = b, a
		}
		c.Add(time.Second)
		last := humanNeeded(t, d, alice.ID)
		bobs := humanNeeded(t, d, bob.ID)
		d.CreateTask(ctx, alice.ID, taskCreate("pending, not queued"))

		for _, tc := range []struct {
			name, account, task string
			want                arbiter.QueuePlace
		}{
			{"First", alice.ID, a.ID, arbiter.QueuePlace{Next: b.ID, Position: 1, Total: 3}},
			{"Middle", alice.ID, b.ID, arbiter.QueuePlace{Prev: a.ID, Next: last.ID, Position: 2, Total: 3}},
			{"Last", alice.ID, last.ID, arbiter.QueuePlace{Prev: b.ID, Position: 3, Total: 3}},
			{"Decided", alice.ID, decided.ID, arbiter.QueuePlace{Next: a.ID, Total: 3}},
			{"AnotherAccounts", alice.ID, bobs.ID, arbiter.QueuePlace{Next: a.ID, Total: 3}},
			{"Unknown", alice.ID, "tsk_0123456789abcdef", arbiter.QueuePlace{Next: a.ID, Total: 3}},
			{"Alone", bob.ID, bobs.ID, arbiter.QueuePlace{Position: 1, Total: 1}},
			{"EmptyQueue", empty.ID, a.ID, arbiter.QueuePlace{}},
		} {
			got, err := d.FindQueuePlace(ctx, tc.account, tc.task, "", arbiter.QueueView{})
			if err != nil || got != tc.want {
				t.Errorf("%s: place = %+v (%v), want %+v", tc.name, got, err, tc.want)
			}
		}
		for account, want := range map[string]int{alice.ID: 3, bob.ID: 1, empty.ID: 0} {
			if n, err := d.CountHumanQueue(ctx, account, ""); err != nil || n != want {
				t.Errorf("CountHumanQueue = %d (%v), want %d", n, err, want)
			}
		}

		demo, _ := d.ListDemoTasks(ctx)
		place, err := d.FindDemoPlace(ctx, demo[1].ID)
		if want := (arbiter.QueuePlace{Prev: demo[0].ID, Next: demo[2].ID, Position: 2, Total: len(demo)}); err != nil || place != want {
			t.Errorf("demo place = %+v (%v), want %+v", place, err, want)
		}
	})
}

func taskIDs(tasks []*arbiter.Task) []string {
	var ids []string
	for _, t := range tasks {
		ids = append(ids, t.ID)
	}
	return ids
}

// TestQueueService_DecideTask_Audited: a decision is in the account's audit
// log with who, what and from where; refused decisions, concurrent losers
// included, leave no line.
func TestQueueService_DecideTask_Audited(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		alice := newAccount(t, d, "alice@example.com")
		bob := newAccount(t, d, "bob@example.com")
		task := humanNeeded(t, d, alice.ID)
		client := arbiter.Client{IP: "198.51.100.7", UserAgent: "Mozilla/5.0 (X11; Linux x86_64) Chrome/156.0.1 Safari/537.36"}

		// Refused: unknown verdict, another account, not waiting.
		_, err := d.DecideTask(ctx, alice.ID, task.ID, arbiter.HumanDecision{Verdict: "maybe", Reviewer: "alice@example.com", Client: client})
		wantCode(t, err, arbiter.EINVALID)
		_, err = d.DecideTask(ctx, bob.ID, task.ID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "bob@example.com", Client: client})
		wantCode(t, err, arbiter.ENOTFOUND)

		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				_, _ = d.DecideTask(ctx, alice.ID, task.ID, arbiter.HumanDecision{
					Verdict: "reject", Reviewer: fmt.Sprintf("r%d@example.com", i), Client: client})
			})
		}
		wg.Wait()
		got, _ := d.FindTaskByID(ctx, alice.ID, task.ID)
		winner := got.DecidedBy()

		events, err := d.ListAuditEvents(ctx, alice.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 1 {
			t.Fatalf("audit log = %d events, want the one decision: %+v", len(events), events)
		}
		e := events[0]
		if e.Kind != arbiter.AuditReviewDecided || e.Actor != winner || e.Detail != "“reject” on "+task.ID ||
			e.ClientIP != client.IP || e.UserAgent != client.UserAgent || e.CreatedAt < got.CreatedAt {
			t.Errorf("audit event = %+v, want %s's decision", e, winner)
		}
		if events, _ := d.ListAuditEvents(ctx, bob.ID, 10); len(events) != 0 {
			t.Errorf("another account's log holds %+v", events)
		}
	})
}

// TestQueueService_CountsStopPastTheCap: counts of a human queue deeper
// than arbiter.QueueCountCap stop at one past it, so a request over a deep
// queue costs what it costs over one of QueueCountCap; the neighbours are
// still exact.
func TestQueueService_CountsStopPastTheCap(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "deep@example.com")
		const n = arbiter.QueueCountCap + 5
		if err := d.InsertTasks(ctx, acct.ID, n, 1763805600000); err != nil {
			t.Fatal(err)
		}
		if err := d.QueueAll(ctx, acct.ID); err != nil {
			t.Fatal(err)
		}
		if got, err := d.CountHumanQueue(ctx, acct.ID, ""); err != nil || got != arbiter.QueueCountCap+1 {
			t.Errorf("CountHumanQueue = %d (%v), want %d", got, err, arbiter.QueueCountCap+1)
		}
		tasks, total, err := d.ListHumanQueue(ctx, acct.ID, arbiter.QueueView{}, 3)
		if err != nil || len(tasks) != 3 || total != arbiter.QueueCountCap+1 {
			t.Fatalf("ListHumanQueue = %d tasks, total %d (%v)", len(tasks), total, err)
		}
		first, err := d.FindQueuePlace(ctx, acct.ID, tasks[0].ID, "", arbiter.QueueView{})
		if want := (arbiter.QueuePlace{Next: tasks[1].ID, Position: 1, Total: arbiter.QueueCountCap + 1}); err != nil || first != want {
			t.Errorf("first place = %+v (%v), want %+v", first, err, want)
		}
		second, err := d.FindQueuePlace(ctx, acct.ID, tasks[1].ID, "", arbiter.QueueView{})
		if want := (arbiter.QueuePlace{Prev: tasks[0].ID, Next: tasks[2].ID, Position: 2, Total: arbiter.QueueCountCap + 1}); err != nil || second != want {
			t.Errorf("second place = %+v (%v), want %+v", second, err, want)
		}
		all, _, err := d.ListHumanQueue(ctx, acct.ID, arbiter.QueueView{}, n)
		if err != nil || len(all) != n {
			t.Fatalf("ListHumanQueue = %d tasks (%v), want %d", len(all), err, n)
		}
		last, err := d.FindQueuePlace(ctx, acct.ID, all[n-1].ID, "", arbiter.QueueView{})
		if want := (arbiter.QueuePlace{Prev: all[n-2].ID, Position: arbiter.QueueCountCap + 1, Total: arbiter.QueueCountCap + 1}); err != nil || last != want {
			t.Errorf("last place = %+v (%v), want %+v", last, err, want)
		}
	})
}

package db_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// toPerson creates the task in and has the agent pass it to a person.
func toPerson(t *testing.T, d *db.DB, accountID string, in arbiter.TaskCreate) *arbiter.Task {
	t.Helper()
	task, err := d.CreateTask(ctx, accountID, in)
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

// decidedWithAction creates a task with the refund action and has a person
// decide it verdict, with editedArgs when not empty.
func decidedWithAction(t *testing.T, d *db.DB, accountID, verdict, editedArgs string) *arbiter.Task {
	t.Helper()
	created := toPerson(t, d, accountID, actionCreate(t, "Refund?", refund))
	decision := arbiter.HumanDecision{Verdict: verdict, Reviewer: "r@example.com", ActionDigest: created.Action.Digest}
	if editedArgs != "" {
		decision.EditedArgs = []byte(editedArgs)
	}
	if _, err := d.DecideTask(ctx, accountID, created.ID, decision); err != nil {
		t.Fatal(err)
	}
	task, err := d.FindTaskByID(ctx, accountID, created.ID)
	if err != nil || task.ApprovedAction == nil {
		t.Fatalf("the decided task %+v, %v, has no approved action", task, err)
	}
	return task
}

func TestExecutionService_ClaimExecution(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		other := newAccount(t, d, "other@example.com")
		task := decidedWithAction(t, d, acct.ID, "approve", `{"amount": 80, "currency": "EUR", "note": "late"}`)
		approved := task.ApprovedAction.Digest
		if approved == task.Action.Digest {
			t.Fatalf("the edit left the digest %s", approved)
		}
		by := arbiter.Actor{Email: "gateway"}

		// Refused, and nothing recorded: another digest (the proposal's),
		// verdicts that do not approve, another account's key.
		_, err := d.ClaimExecution(ctx, acct.ID, task.ID, arbiter.ExecutionClaim{Digest: task.Action.Digest, ClaimID: "c1"}, by)
		wantCode(t, err, arbiter.ECONFLICT)
		_, err = d.ClaimExecution(ctx, acct.ID, task.ID, arbiter.ExecutionClaim{Digest: approved, ClaimID: "c1", Verdicts: []string{"reject"}}, by)
		wantCode(t, err, arbiter.ECONFLICT)
		_, err = d.ClaimExecution(ctx, other.ID, task.ID, arbiter.ExecutionClaim{Digest: approved, ClaimID: "c1"}, by)
		wantCode(t, err, arbiter.ENOTFOUND)

		first, err := d.ClaimExecution(ctx, acct.ID, task.ID, arbiter.ExecutionClaim{Digest: approved, ClaimID: "c1", Executor: "gw-1", Verdicts: []string{"approve"}}, by)
		if err != nil || first.TaskID != task.ID || first.Digest != approved || first.ClaimID != "c1" || first.Executor != "gw-1" || first.ClaimedAt == 0 {
			t.Fatalf("first claim = %+v, %v", first, err)
		}
		// The same claim again (its answer lost) holds again, as it was.
		again, err := d.ClaimExecution(ctx, acct.ID, task.ID, arbiter.ExecutionClaim{Digest: approved, ClaimID: "c1", Executor: "gw-1"}, by)
		if err != nil || *again != *first {
			t.Fatalf("the same claim again = %+v, %v; want %+v", again, err, first)
		}
		// Any other claim is refused, saying so.
		_, err = d.ClaimExecution(ctx, acct.ID, task.ID, arbiter.ExecutionClaim{Digest: approved, ClaimID: "c2"}, by)
		wantCode(t, err, arbiter.ECONFLICT)
		if arbiter.APICode(err) != arbiter.ReasonAlreadyExecuted {
			t.Errorf("a second claim's code = %q, want %q", arbiter.APICode(err), arbiter.ReasonAlreadyExecuted)
		}
		// The audit log has the one claim.
		events, err := d.ListAuditEvents(ctx, acct.ID, 50)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range events {
			if e.Kind == arbiter.AuditActionExecuted {
				n++
				if e.Actor != "gateway" || e.Detail != "task "+task.ID+", action "+arbiter.ShortDigest(approved)+", by gw-1" {
					t.Errorf("audit event = %+v", e)
				}
			}
		}
		if n != 1 {
			t.Errorf("%d audit events of claims, want 1", n)
		}
	})
}

func TestExecutionService_UndecidedOrWithoutActionIsRefused(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		pending, err := d.CreateTask(ctx, acct.ID, actionCreate(t, "Refund?", refund))
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.ClaimExecution(ctx, acct.ID, pending.ID, arbiter.ExecutionClaim{Digest: pending.Action.Digest, ClaimID: "c"}, arbiter.Actor{})
		wantCode(t, err, arbiter.ECONFLICT)
		plain := toPerson(t, d, acct.ID, taskCreate("No action"))
		if _, err := d.DecideTask(ctx, acct.ID, plain.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
		_, err = d.ClaimExecution(ctx, acct.ID, plain.ID, arbiter.ExecutionClaim{Digest: pending.Action.Digest, ClaimID: "c"}, arbiter.Actor{})
		wantCode(t, err, arbiter.ECONFLICT)
		_, err = d.ClaimExecution(ctx, acct.ID, "tsk_0000000000000000", arbiter.ExecutionClaim{Digest: pending.Action.Digest, ClaimID: "c"}, arbiter.Actor{})
		wantCode(t, err, arbiter.ENOTFOUND)
	})
}

// Claims made at once, by different claimers (on Postgres through two
// stores, as two server processes), leave one that holds.
func TestExecutionService_ConcurrentClaimsOneHolds(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		task := decidedWithAction(t, d, acct.ID, "approve", "")
		stores := []*db.DB{d}
		if d.Dialect() == db.Postgres {
			stores = append(stores, dbtest.OpenURL(t, d.URLForTest(), db.Options{}))
		}
		const claims = 16
		var wg sync.WaitGroup
		var mu sync.Mutex
		var held []string
		for i := range claims {
			wg.Go(func() {
				id := fmt.Sprintf("claim-%d", i)
				e, err := stores[i%len(stores)].ClaimExecution(ctx, acct.ID, task.ID,
					arbiter.ExecutionClaim{Digest: task.ApprovedAction.Digest, ClaimID: id}, arbiter.Actor{})
				switch {
				case err == nil:
					mu.Lock()
					held = append(held, e.ClaimID)
					mu.Unlock()
				case arbiter.APICode(err) != arbiter.ReasonAlreadyExecuted:
					t.Errorf("%s: %v", id, err)
				}
			})
		}
		wg.Wait()
		if len(held) != 1 {
			t.Fatalf("claims that held: %v, want one", held)
		}
	})
}

package db_test

import (
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// routedPair stores a labelled pair for the account: a task the agent
// answered unsure and a person then decided.
func routedPair(t *testing.T, d *db.DB, accountID string) {
	t.Helper()
	task, err := d.CreateTask(ctx, accountID, taskCreate("unsure"))
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := d.ClaimTasks(ctx, "w", 1, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim: %v %v", claimed, err)
	}
	step := decided("approve", 0.57)
	step.Next = arbiter.StatusHumanNeeded
	if err := d.FinishAgentAttempt(ctx, "w", claimed[0].ID, step); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DecideTask(ctx, accountID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
		t.Fatal(err)
	}
}

// pairs returns the number of pairs in data.
func pairs(data arbiter.CalibrationData) int {
	n := 0
	for _, b := range data.Buckets {
		n += b.N
	}
	return n
}

// TestCalibrationService_SharesAndKeepsAReport answers many concurrent
// requests for one account and filter with one read of the store, keeps
// it for CalibrationFor (a new decision shows after that, and ComputedAt
// says how old the data is), and reads another filter or account on its
// own.
func TestCalibrationService_SharesAndKeepsAReport(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		other := newAccount(t, d, "b@example.com")
		routedPair(t, d, acct.ID)
		f := arbiter.CalibrationFilter{Model: "test-model", TargetErrorRate: 0.02}
		reads := d.CalibrationReads()
		read := func(accountID string, f arbiter.CalibrationFilter) arbiter.CalibrationData {
			t.Helper()
			data, err := d.CalibrationData(ctx, accountID, f)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}

		first := arbiter.TimestampOf(c.Now())
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				data, err := d.CalibrationData(ctx, acct.ID, f)
				if err != nil || pairs(data) != 1 || data.ComputedAt != first {
					t.Errorf("data = %+v, %v; want one pair computed at %d", data, err, first)
				}
			})
		}
		wg.Wait()
		if got := d.CalibrationReads() - reads; got != 1 {
			t.Errorf("16 concurrent requests read the store %d times, want once", got)
		}
		f.TargetErrorRate = 0.05 // the data does not depend on it
		read(acct.ID, f)
		if got := d.CalibrationReads() - reads; got != 1 {
			t.Errorf("another target error rate: %d reads, want the kept one", got)
		}
		if data := read(acct.ID, arbiter.CalibrationFilter{Model: "another"}); pairs(data) != 0 {
			t.Errorf("another filter: %d pairs", pairs(data))
		}
		if data := read(other.ID, f); pairs(data) != 0 {
			t.Errorf("another account: %d pairs", pairs(data))
		}
		if got := d.CalibrationReads() - reads; got != 3 {
			t.Errorf("another filter and another account: %d reads, want 3", got)
		}

		routedPair(t, d, acct.ID)
		c.Add(db.CalibrationFor - time.Millisecond)
		if data := read(acct.ID, f); pairs(data) != 1 || data.ComputedAt != first {
			t.Errorf("within CalibrationFor: %d pairs computed at %d, want the kept report", pairs(data), data.ComputedAt)
		}
		c.Add(time.Millisecond)
		if data := read(acct.ID, f); pairs(data) != 2 || data.ComputedAt != arbiter.TimestampOf(c.Now()) {
			t.Errorf("after CalibrationFor: %d pairs computed at %d, want the new decision, read now", pairs(data), data.ComputedAt)
		}
		if got := d.CalibrationReads() - reads; got != 4 {
			t.Errorf("%d reads, want 4", got)
		}
	})
}

// TestCalibrationService_AnAccountsReadsTakeTurns asks for many filters of
// one account at once, none kept: each is read, one at a time, so that one
// account cannot take many of the store's connections for its reports.
func TestCalibrationService_AnAccountsReadsTakeTurns(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		routedPair(t, d, acct.ID)
		reads := d.CalibrationReads()
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				after := arbiter.Timestamp(i)
				if _, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{CreatedAfter: &after}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if got := d.CalibrationReads() - reads; got != 8 {
			t.Errorf("8 filters: %d reads, want 8", got)
		}
		if got := d.BusiestCalibrationReads(); got != 1 {
			t.Errorf("%d reads of one account ran at once, want 1", got)
		}
	})
}

// TestCalibrationService_KeepsBoundedReports asks for more filters than the
// store keeps reports of: each is answered, and the reports kept stay
// within the bound.
func TestCalibrationService_KeepsBoundedReports(t *testing.T) {
	t.Parallel()
	d := dbtest.Open(t, db.SQLite, db.Options{})
	acct := newAccount(t, d, "a@example.com")
	for i := range 300 {
		after := arbiter.Timestamp(i)
		if _, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{CreatedAfter: &after}); err != nil {
			t.Fatal(err)
		}
		if n := d.CachedCalibrations(); n > 256 {
			t.Fatalf("%d reports kept after %d filters, want at most 256", n, i+1)
		}
	}
}

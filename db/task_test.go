package db_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

func TestTaskService_CreateTask(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		created, err := d.CreateTask(ctx, acct.ID, taskCreate("Refund?"))
		if err != nil {
			t.Fatal(err)
		}
		if !arbiter.ValidTaskID(created.ID) || created.Status != arbiter.StatusPending {
			t.Fatalf("created = %+v", created)
		}
		got, err := d.FindTaskByID(ctx, acct.ID, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Prompt != "Refund?" || got.ConfidenceThreshold != 0.9 || len(got.AllowedVerdicts) != 2 ||
			got.AllowedVerdicts[1] != "reject" || string(got.Context) != `{"amount":12}` ||
			got.CreatedAt != created.CreatedAt || got.FinalVerdict != nil || got.CompletedAt != nil {
			t.Fatalf("found = %+v", got)
		}
		if got.Attempts == nil || len(got.Attempts) != 0 {
			t.Fatalf("attempts = %#v, want empty non-nil", got.Attempts)
		}
	})
}

func TestTaskService_FindTaskByID(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		owner := newAccount(t, d, "owner@example.com")
		other := newAccount(t, d, "other@example.com")
		task, err := d.CreateTask(ctx, owner.ID, taskCreate("Mine"))
		if err != nil {
			t.Fatal(err)
		}
		t.Run("ErrNotFoundAcrossAccounts", func(t *testing.T) {
			_, err := d.FindTaskByID(ctx, other.ID, task.ID)
			wantCode(t, err, arbiter.ENOTFOUND)
		})
		for _, id := range []string{"tsk_0000000000000000", "tsk_xyz", "", "'; DROP TABLE tasks; --", "tsk_demo_refund_late_delivery"} {
			_, err := d.FindTaskByID(ctx, owner.ID, id)
			wantCode(t, err, arbiter.ENOTFOUND)
		}
	})
}

func TestTaskService_DailyCap(t *testing.T) {
	t.Parallel()
	t.Run("ConcurrentCreatesAdmitExactlyTheCap", func(t *testing.T) {
		dbtest.Each(t, db.Options{DailyTaskCap: 10}, func(t *testing.T, d *db.DB) {
			acct := newAccount(t, d, "busy@example.com")
			var ok, limited atomic.Int32
			var wg sync.WaitGroup
			for range 50 {
				wg.Go(func() {
					_, err := d.CreateTask(ctx, acct.ID, taskCreate("Concurrent"))
					switch arbiter.ErrorCode(err) {
					case "":
						ok.Add(1)
					case arbiter.ERATELIMIT:
						limited.Add(1)
					default:
						t.Errorf("unexpected error: %v", err)
					}
				})
			}
			wg.Wait()
			if ok.Load() != 10 || limited.Load() != 40 {
				t.Fatalf("admitted %d, limited %d; want 10 and 40", ok.Load(), limited.Load())
			}
			used, limit, err := d.UsageToday(ctx, acct.ID)
			if err != nil || used != 10 || limit != 10 {
				t.Fatalf("usage = %d/%d, %v", used, limit, err)
			}
		})
	})
	t.Run("OverrideAndRetryAfter", func(t *testing.T) {
		now := time.Date(2026, 11, 23, 23, 0, 0, 0, time.UTC)
		dbtest.Each(t, db.Options{DailyTaskCap: 1, Now: func() time.Time { return now }}, func(t *testing.T, d *db.DB) {
			acct := newAccount(t, d, "capped@example.com")
			if _, err := d.CreateTask(ctx, acct.ID, taskCreate("first")); err != nil {
				t.Fatal(err)
			}
			_, err := d.CreateTask(ctx, acct.ID, taskCreate("second"))
			wantCode(t, err, arbiter.ERATELIMIT)
			if e := err.(*arbiter.Error); e.RetryAfter != time.Hour {
				t.Fatalf("RetryAfter = %v, want 1h until midnight UTC", e.RetryAfter)
			}
			three := 3
			if err := d.SetDailyCap(ctx, acct.ID, &three); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := d.CreateTask(ctx, acct.ID, taskCreate("raised")); err != nil {
					t.Fatal(err)
				}
			}
			_, err = d.CreateTask(ctx, acct.ID, taskCreate("over"))
			wantCode(t, err, arbiter.ERATELIMIT)
			zero := 0
			_ = d.SetDailyCap(ctx, acct.ID, &zero)
			other := newAccount(t, d, "other@example.com")
			if _, err := d.CreateTask(ctx, other.ID, taskCreate("own cap")); err != nil {
				t.Fatalf("another account's cap is its own: %v", err)
			}
			neg := -1
			wantCode(t, d.SetDailyCap(ctx, acct.ID, &neg), arbiter.EINVALID)
			wantCode(t, d.SetDailyCap(ctx, "acct_missing", nil), arbiter.ENOTFOUND)
		})
	})
}

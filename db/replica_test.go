package db_test

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestReadReplica_HeavyReadsOnlyGoThere opens a Postgres store whose read
// URL reaches the same database through a proxy, then cuts the proxy: the
// heavy reads (task lists, the audit log, reviewer stats, agreement, the
// calibration report) fail as unavailable, so they read the replica's
// pool; the hot path (create, get, claim, finish, decide) works on, so it
// never does. Restored, the heavy reads answer again.
func TestReadReplica_HeavyReadsOnlyGoThere(t *testing.T) {
	url := dbtest.URL(t, db.Postgres)
	proxy, readURL := dbtest.ThroughProxy(t, url)
	d := dbtest.OpenURL(t, url, db.Options{ReadURL: readURL, Timeout: 5 * time.Second})
	acct := newAccount(t, d, "replica@example.com")

	// The calibration report is kept a while per filter
	// (calibration_cache.go): each round asks a filter of its own.
	round := "before"
	heavy := map[string]func() error{
		"ListTasks": func() error {
			_, err := d.ListTasks(ctx, acct.ID, arbiter.TaskFilter{Limit: 10})
			return err
		},
		"ListAuditEvents": func() error {
			_, err := d.ListAuditEvents(ctx, acct.ID, 10)
			return err
		},
		"ListDecisions": func() error {
			_, err := d.ListDecisions(ctx, acct.ID, 0)
			return err
		},
		"ListWaiting": func() error {
			_, _, err := d.ListWaiting(ctx, acct.ID)
			return err
		},
		"ListAgreementTasks": func() error {
			_, err := d.ListAgreementTasks(ctx, acct.ID, 0)
			return err
		},
		"CalibrationData": func() error {
			_, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{TaskType: round})
			return err
		},
	}
	for name, read := range heavy {
		if err := read(); err != nil {
			t.Fatalf("%s through the replica's pool: %v", name, err)
		}
	}

	proxy.Cut()
	round = "cut"
	task := humanNeeded(t, d, acct.ID) // create, claim, finish
	if got, err := d.FindTaskByID(ctx, acct.ID, task.ID); err != nil || got.Status != arbiter.StatusHumanNeeded {
		t.Fatalf("get with the replica cut = %v, %v", got, err)
	}
	decided, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "replica@example.com"})
	if err != nil || decided.Status != arbiter.StatusCompleted {
		t.Fatalf("decide with the replica cut = %v, %v", decided, err)
	}
	for name, read := range heavy {
		if err := read(); arbiter.ErrorCode(err) != arbiter.EUNAVAILABLE {
			t.Errorf("%s with the replica cut = %v, want unavailable: it did not read the replica's pool", name, err)
		}
	}

	proxy.Restore()
	page, err := d.ListTasks(ctx, acct.ID, arbiter.TaskFilter{Limit: 10})
	if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != task.ID {
		t.Fatalf("list after the replica is back = %+v, %v", page, err)
	}
}

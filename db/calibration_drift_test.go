package db_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// driftSettings is a small window, so a test crosses it in a few audits:
// 4 errors in 20 cross 5% at 95% (3 do not).
var driftSettings = arbiter.DriftSettings{Audits: 20, Age: 24 * time.Hour, Target: 0.05, Confidence: 0.95}

// answerAudits creates n tasks with an audit rate of 1, has the agent
// complete them at 0.93, and has a person answer each audit: wrong(i)
// says whether the person disagrees with the i-th. The clock moves a
// second before each answer.
func answerAudits(t *testing.T, d *db.DB, c *clock, accountID string, n int, wrong func(i int) bool) []string {
	t.Helper()
	return answerAuditsOf(t, d, c, accountID, "", n, wrong)
}

// answerAuditsOf is answerAudits with tasks of taskType.
func answerAuditsOf(t *testing.T, d *db.DB, c *clock, accountID, taskType string, n int, wrong func(i int) bool) []string {
	t.Helper()
	ids := auditedTasksOf(t, d, accountID, taskType, n)
	for i, id := range ids {
		c.Add(time.Second)
		verdict := "approve"
		if wrong(i) {
			verdict = "reject"
		}
		if _, err := d.DecideTask(ctx, accountID, id, arbiter.HumanDecision{Verdict: verdict, Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// auditedTasks creates n tasks with an audit rate of 1 and has the agent
// complete them at 0.93: each waits for its blind audit.
func auditedTasks(t *testing.T, d *db.DB, accountID string, n int) []string {
	t.Helper()
	return auditedTasksOf(t, d, accountID, "", n)
}

// auditedTasksOf is auditedTasks with tasks of taskType.
func auditedTasksOf(t *testing.T, d *db.DB, accountID, taskType string, n int) []string {
	t.Helper()
	one := 1.0
	var ids []string
	for range n {
		in := taskCreate("audit me")
		in.AuditRate, in.TaskType = &one, taskType
		task, err := d.CreateTask(ctx, accountID, in)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	completeAll(t, d, "approve", 0.93)
	return ids
}

func driftMessages(t *testing.T, d *db.DB, accountID, endpointID string) []*arbiter.WebhookMessage {
	t.Helper()
	msgs, err := d.ListWebhookMessages(ctx, accountID, endpointID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []*arbiter.WebhookMessage
	for _, m := range msgs {
		if m.EventType == arbiter.EventCalibrationDrifted {
			out = append(out, m)
		}
	}
	return out
}

// TestCalibrationDrift_FiresOncePerCrossing answers audits one at a time
// with an injected clock: noise under the bound does not fire, the
// crossing fires once (one open drift, one webhook message, one mail per
// owner and admin, claimed once), a window back under the target clears
// it, and a second crossing fires again. Audits older than the window's
// age leave it.
func TestCalibrationDrift_FiresOncePerCrossing(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now, Drift: driftSettings}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		other := newAccount(t, d, "b@example.com")
		e, err := d.CreateWebhookEndpoint(ctx, acct.ID, arbiter.WebhookEndpointInput{URL: "https://example.com/hooks",
			EventTypes: []string{arbiter.EventCalibrationDrifted}}, false, owner)
		if err != nil {
			t.Fatal(err)
		}
		drift := func() *arbiter.Drift {
			t.Helper()
			drifts, err := d.CalibrationDrifts(ctx, acct.ID)
			if err != nil || len(drifts) > 1 {
				t.Fatalf("drifts %+v, %v", drifts, err)
			}
			if len(drifts) == 0 {
				return nil
			}
			return &drifts[0]
		}

		// 17 right and 3 wrong: 15%, but under the bound.
		answerAudits(t, d, c, acct.ID, 20, func(i int) bool { return i%7 == 3 })
		if dr := drift(); dr != nil {
			t.Fatalf("noise under the bound drifted: %+v", dr)
		}
		if msgs := driftMessages(t, d, acct.ID, e.ID); len(msgs) != 0 {
			t.Fatalf("noise under the bound sent %d messages", len(msgs))
		}
		// Three more wrong ones cross once, whatever follows.
		ids := answerAudits(t, d, c, acct.ID, 6, func(i int) bool { return i < 3 })
		dr := drift()
		if dr == nil || dr.Audits != 20 || dr.Errors < 4 || dr.ErrorLower <= 0.05 || dr.Target != 0.05 || dr.ClearedAt != nil ||
			dr.TaskType != arbiter.DefaultPolicyName {
			t.Fatalf("no crossing after the errors: %+v", dr)
		}
		if msgs := driftMessages(t, d, acct.ID, e.ID); len(msgs) != 1 || !containsID(ids, msgs[0].TaskID) {
			t.Fatalf("messages after the crossing: %+v, want one calibration.drifted about one of %v", msgs, ids)
		}
		if other, err := d.CalibrationDrifts(ctx, other.ID); err != nil || len(other) != 0 {
			t.Errorf("another account drifted: %+v, %v", other, err)
		}
		if n, err := d.CountDriftedAccounts(ctx); err != nil || n != 1 {
			t.Errorf("CountDriftedAccounts = %d, %v", n, err)
		}
		data, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{TargetErrorRate: 0.02})
		if err != nil || len(data.Drifts) != 1 || data.Drifts[0].DriftedAt != dr.DriftedAt {
			t.Errorf("the report's data does not carry the drift: %+v, %v", data.Drifts, err)
		}

		// The owner is mailed once, however often workers ask.
		if n, err := d.ClaimDriftMails(ctx, 10); err != nil || n != 1 {
			t.Fatalf("queued %d drift mails, %v; want one to the owner", n, err)
		}
		if mails := dbtest.TakeMail(t, d); len(mails) != 1 || mails[0].To != "a@example.com" || mails[0].AccountID != acct.ID ||
			mails[0].Kind != arbiter.MailDrift {
			t.Fatalf("drift mails %+v; want one to the owner", mails)
		}
		if again, err := d.ClaimDriftMails(ctx, 10); err != nil || again != 0 || len(dbtest.TakeMail(t, d)) != 0 {
			t.Errorf("claimed again: %d, %v", again, err)
		}

		// Twenty right answers bring the window back: cleared, nothing sent.
		answerAudits(t, d, c, acct.ID, 20, func(int) bool { return false })
		if dr := drift(); dr != nil {
			t.Fatalf("a clean window is still drifted: %+v", dr)
		}
		if msgs := driftMessages(t, d, acct.ID, e.ID); len(msgs) != 1 {
			t.Errorf("clearing sent a message: %d", len(msgs))
		}
		// A day later the window is empty: 19 wrong answers are too few to
		// tell; the twentieth crosses again.
		c.Add(25 * time.Hour)
		answerAudits(t, d, c, acct.ID, 19, func(int) bool { return true })
		if dr := drift(); dr != nil {
			t.Fatalf("19 audits crossed: %+v", dr)
		}
		answerAudits(t, d, c, acct.ID, 1, func(int) bool { return true })
		if dr2 := drift(); dr2 == nil || dr2.Audits != 20 || dr2.Errors != 20 || dr2.DriftedAt == dr.DriftedAt {
			t.Fatalf("the second crossing: %+v", dr2)
		}
		if msgs := driftMessages(t, d, acct.ID, e.ID); len(msgs) != 2 {
			t.Errorf("messages after the second crossing: %d, want 2", len(msgs))
		}
	})
}

// TestCalibrationDrift_ConcurrentAnswersCrossOnce answers the crossing
// audits from several goroutines at once: however the transactions
// interleave, the account crosses once and one message is queued.
func TestCalibrationDrift_ConcurrentAnswersCrossOnce(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now, Drift: driftSettings}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		e, err := d.CreateWebhookEndpoint(ctx, acct.ID, arbiter.WebhookEndpointInput{URL: "https://example.com/hooks"}, false, owner)
		if err != nil {
			t.Fatal(err)
		}
		ids := auditedTasks(t, d, acct.ID, 24)
		var wg sync.WaitGroup
		errs := make(chan error, len(ids))
		for _, id := range ids {
			wg.Go(func() {
				_, err := d.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"})
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n, err := d.CountDriftedAccounts(ctx); err != nil || n != 1 {
			t.Errorf("drifted accounts %d, %v", n, err)
		}
		if msgs := driftMessages(t, d, acct.ID, e.ID); len(msgs) != 1 {
			t.Errorf("%d calibration.drifted messages, want 1", len(msgs))
		}
	})
}

func containsID(ids []string, id string) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}

// TestCalibrationDrift_WatchesEachPolicysTarget answers the audits of two
// task types: refund, whose policy holds the agent to 15% at 90% (as
// applying a certificate at that target sets it), and moderation, under
// the default policy and the store's 5%. 4 wrong in 20 (20%) cross 5% but
// not 15%; 9 more in the next 20 cross 15%. Each policy crosses alone, with its own
// target. Before, one window per account fired at 2% whatever the
// operator certified.
func TestCalibrationDrift_WatchesEachPolicysTarget(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now, Drift: driftSettings}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		owner := personOf(t, d, "a@example.com")
		if _, err := d.PutPolicy(ctx, acct.ID, arbiter.Policy{TaskType: "refund",
			Target: &arbiter.ErrorTarget{ErrorRate: 0.15, Confidence: 0.9}}, actor(owner)); err != nil {
			t.Fatal(err)
		}
		drifts := func() map[string]arbiter.Drift {
			t.Helper()
			list, err := d.CalibrationDrifts(ctx, acct.ID)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]arbiter.Drift{}
			for _, dr := range list {
				out[dr.TaskType] = dr
			}
			return out
		}
		fourIn20 := func(i int) bool { return i%5 == 0 }
		answerAuditsOf(t, d, c, acct.ID, "refund", 20, fourIn20)
		answerAuditsOf(t, d, c, acct.ID, "moderation", 20, fourIn20)
		got := drifts()
		if _, ok := got["refund"]; ok || len(got) != 1 {
			t.Fatalf("drifts %+v: 20%% crossed refund's 15%% target, or not the default policy's 5%%", got)
		}
		if dr := got[arbiter.DefaultPolicyName]; dr.Target != 0.05 || dr.Audits != 20 || dr.Errors != 4 {
			t.Errorf("the default policy's crossing: %+v", dr)
		}
		data, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{TaskType: "refund", TargetErrorRate: 0.15, Confidence: 0.9})
		if err != nil || len(data.Drifts) != 0 {
			t.Errorf("refund's report carries another policy's drift: %+v, %v", data.Drifts, err)
		}

		answerAuditsOf(t, d, c, acct.ID, "refund", 20, func(i int) bool { return i%2 == 0 && i < 18 })
		got = drifts()
		dr, ok := got["refund"]
		if !ok || dr.Target != 0.15 || dr.Confidence != 0.9 || dr.ErrorLower <= 0.15 || len(got) != 2 {
			t.Fatalf("after 9 wrong in 20: %+v", got)
		}
		if !strings.Contains(dr.Summary(), "the policy of refund") || !strings.Contains(dr.Summary(), "15% target") {
			t.Errorf("summary %q", dr.Summary())
		}
		data, err = d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{TaskType: "refund", TargetErrorRate: 0.15, Confidence: 0.9})
		if err != nil || len(data.Drifts) != 1 || data.Drifts[0].TaskType != "refund" {
			t.Errorf("refund's report: %+v, %v", data.Drifts, err)
		}
		if n, err := d.CountDriftedAccounts(ctx); err != nil || n != 1 {
			t.Errorf("CountDriftedAccounts = %d, %v; want one account", n, err)
		}
	})
}

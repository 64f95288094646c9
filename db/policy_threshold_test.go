package db_test

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestPolicyService_ApplyPolicyThreshold sets a certified threshold on a
// policy that has other values, which it keeps, and on a task type without
// a policy, which gets one with the threshold alone; each is audited. A
// reviewer, a threshold outside 0 to 1 and another account's policy change
// nothing.
func TestPolicyService_ApplyPolicyThreshold(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		owner := personOf(t, d, "owner@example.com")
		token := invite(t, d, acct.ID, "rev@example.com", arbiter.RoleReviewer, owner)
		rev := personOf(t, d, "rev@example.com")
		if _, err := d.AcceptInvitation(ctx, token, rev.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}
		other := newAccount(t, d, "other@example.com")
		refund := arbiter.Policy{TaskType: "refund", ConfidenceThreshold: ptr(0.95), DeadlineSeconds: ptr(600), AuditRate: ptr(0.1),
			OnExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"}}
		if _, err := d.PutPolicy(ctx, acct.ID, refund, actor(owner)); err != nil {
			t.Fatal(err)
		}

		p, err := d.ApplyPolicyThreshold(ctx, acct.ID, "refund", 0.87, actor(owner))
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.FindPolicy(ctx, acct.ID, "refund")
		if err != nil || *got.ConfidenceThreshold != 0.87 || *p.ConfidenceThreshold != 0.87 || *got.DeadlineSeconds != 600 ||
			*got.AuditRate != 0.1 || got.OnExpiry.Outcome != "verdict:reject" {
			t.Errorf("after applying: %+v (%v), want 0.87 and the rest kept", got, err)
		}
		if _, err := d.ApplyPolicyThreshold(ctx, acct.ID, arbiter.DefaultPolicyName, 0.9, actor(owner)); err != nil {
			t.Fatal(err)
		}
		if got, err := d.FindPolicy(ctx, acct.ID, arbiter.DefaultPolicyName); err != nil || *got.ConfidenceThreshold != 0.9 ||
			got.DeadlineSeconds != nil || got.AuditRate != nil || !got.OnExpiry.IsExpire() {
			t.Errorf("a new default policy: %+v (%v), want the threshold alone", got, err)
		}

		_, err = d.ApplyPolicyThreshold(ctx, acct.ID, "refund", 0.5, actor(rev))
		wantCode(t, err, arbiter.ENOTFOUND)
		for _, bad := range []float64{-0.1, 1.5} {
			_, err = d.ApplyPolicyThreshold(ctx, acct.ID, "refund", bad, actor(owner))
			wantCode(t, err, arbiter.EINVALID)
		}
		_, err = d.ApplyPolicyThreshold(ctx, other.ID, "refund", 0.5, actor(owner))
		wantCode(t, err, arbiter.ENOTFOUND)
		if got, _ := d.FindPolicy(ctx, acct.ID, "refund"); *got.ConfidenceThreshold != 0.87 {
			t.Errorf("a refused apply changed the policy: %+v", got)
		}
		if _, err := d.FindPolicy(ctx, other.ID, "refund"); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("another account got a policy: %v", err)
		}

		events, err := d.ListAuditEvents(ctx, acct.ID, 2)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, e := range events {
			lines = append(lines, e.Kind+" "+e.Actor+" "+e.Detail)
		}
		want := []string{
			"policy_changed owner@example.com default (threshold 0.9, on expiry: expire): the certified threshold 0.90 applied from the calibration report",
			"policy_changed owner@example.com refund (threshold 0.87, deadline 600s, audit rate 0.1, on expiry: reject): the certified threshold 0.87 applied from the calibration report",
		}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
	})
}

package db_test

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestPolicyService_ApplyCertifiedThreshold applies the certificate of
// refund tasks whose every label is a blind audit at 0.93, with nobody's
// decision on a routed task yet (the evidence ends at 0.93): 0 and 0.5,
// below the evidence, are refused and change nothing, as is a threshold
// the report does not certify; the certified 0.93 is applied to a policy
// that has other values, which it keeps, with the report's target; a
// report of every type creates the default policy with the threshold and
// target alone. Each apply is audited. A reviewer, a report of one source
// and another account's policy change nothing. Before, the report
// certified 0.00 on such labels and the store applied any threshold.
func TestPolicyService_ApplyCertifiedThreshold(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
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
		// Thirty blind audits at 0.93, all right: enough for 10% at 95%.
		answerAuditsOf(t, d, c, acct.ID, "refund", 30, func(int) bool { return false })
		f := arbiter.CalibrationFilter{TaskType: "refund", TargetErrorRate: 0.1, Confidence: 0.95}
		data, err := d.CalibrationData(ctx, acct.ID, f)
		if err != nil {
			t.Fatal(err)
		}
		cert := arbiter.NewCalibrationReport(data, f.TargetErrorRate, f.Confidence).Certification
		if cert.Threshold == nil || *cert.Threshold != 0.93 || cert.Floor == nil || *cert.Floor != 0.93 {
			t.Fatalf("the report certifies %+v; want 0.93 where the evidence ends", cert)
		}

		for _, tc := range []struct {
			threshold float64
			message   string
		}{
			{0, "below where the evidence ends (0.93)"},
			{0.5, "below where the evidence ends (0.93)"},
			{0.94, "it is 0.93 now, not 0.94"},
		} {
			_, err := d.ApplyCertifiedThreshold(ctx, acct.ID, f, tc.threshold, actor(owner))
			if arbiter.ErrorCode(err) != arbiter.ECONFLICT || !strings.Contains(arbiter.ErrorMessage(err), tc.message) {
				t.Errorf("apply %v: %v, want ECONFLICT saying %q", tc.threshold, err, tc.message)
			}
		}
		if got, _ := d.FindPolicy(ctx, acct.ID, "refund"); *got.ConfidenceThreshold != 0.95 || got.Target != nil {
			t.Fatalf("a refused apply changed the policy: %+v", got)
		}
		if _, err := d.FindPolicy(ctx, acct.ID, arbiter.DefaultPolicyName); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Fatalf("a refused apply made a default policy: %v", err)
		}

		p, err := d.ApplyCertifiedThreshold(ctx, acct.ID, f, 0.93, actor(owner))
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.FindPolicy(ctx, acct.ID, "refund")
		if err != nil || *got.ConfidenceThreshold != 0.93 || *p.ConfidenceThreshold != 0.93 || *got.DeadlineSeconds != 600 ||
			*got.AuditRate != 0.1 || got.OnExpiry.Outcome != "verdict:reject" || *got.Target != (arbiter.ErrorTarget{ErrorRate: 0.1, Confidence: 0.95}) {
			t.Errorf("after applying: %+v (%v), want 0.93 with the target and the rest kept", got, err)
		}
		all := arbiter.CalibrationFilter{TargetErrorRate: 0.1, Confidence: 0.9}
		if _, err := d.ApplyCertifiedThreshold(ctx, acct.ID, all, 0.93, actor(owner)); err != nil {
			t.Fatal(err)
		}
		if got, err := d.FindPolicy(ctx, acct.ID, arbiter.DefaultPolicyName); err != nil || *got.ConfidenceThreshold != 0.93 ||
			got.DeadlineSeconds != nil || got.AuditRate != nil || !got.OnExpiry.IsExpire() || got.Target.Confidence != 0.9 {
			t.Errorf("a new default policy: %+v (%v), want the threshold and target alone", got, err)
		}

		_, err = d.ApplyCertifiedThreshold(ctx, acct.ID, f, 0.93, actor(rev))
		wantCode(t, err, arbiter.ENOTFOUND)
		_, err = d.ApplyCertifiedThreshold(ctx, acct.ID, arbiter.CalibrationFilter{TaskType: "refund", Source: "bot", TargetErrorRate: 0.1,
			Confidence: 0.95}, 0.93, actor(owner))
		wantCode(t, err, arbiter.EINVALID)
		_, err = d.ApplyCertifiedThreshold(ctx, other.ID, f, 0.93, actor(owner))
		wantCode(t, err, arbiter.ENOTFOUND)
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
			"policy_changed owner@example.com default (threshold 0.93, on expiry: expire, target 10% at 90%): the threshold 0.93 certified at 10% with 90% confidence, applied from the calibration report",
			"policy_changed owner@example.com refund (threshold 0.93, deadline 600s, audit rate 0.1, on expiry: reject, target 10% at 95%): the threshold 0.93 certified at 10% with 95% confidence, applied from the calibration report",
		}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
		}
	})
}

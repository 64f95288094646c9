package arbiter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

func TestNextDrift(t *testing.T) {
	s := arbiter.DriftSettings{Audits: 20, Target: 0.05, Confidence: 0.95}
	for _, tc := range []struct {
		name           string
		drifted        bool
		w              arbiter.DriftWindow
		after, crossed bool
	}{
		{"no audits", false, arbiter.DriftWindow{}, false, false},
		{"clean", false, arbiter.DriftWindow{Audits: 20}, false, false},
		// 3 of 20 is 15%, above 5%, but its lower bound (4.2%) is not:
		// noise under the bound does not fire.
		{"noise under the bound", false, arbiter.DriftWindow{Audits: 20, Errors: 3}, false, false},
		{"4 of 20 crosses", false, arbiter.DriftWindow{Audits: 20, Errors: 4}, true, true},
		{"still above: no second crossing", true, arbiter.DriftWindow{Audits: 20, Errors: 9}, true, false},
		{"between bound and target: stays drifted", true, arbiter.DriftWindow{Audits: 20, Errors: 2}, true, false},
		{"back at the target clears", true, arbiter.DriftWindow{Audits: 20, Errors: 1}, false, false},
		{"cleared and under: stays", false, arbiter.DriftWindow{Audits: 20, Errors: 1}, false, false},
		{"every audit wrong", false, arbiter.DriftWindow{Audits: 20, Errors: 20}, true, true},
		{"too few audits to tell", false, arbiter.DriftWindow{Audits: 19, Errors: 19}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after, crossed := arbiter.NextDrift(tc.drifted, tc.w, s)
			if after != tc.after || crossed != tc.crossed {
				t.Errorf("NextDrift(%v, %+v) = %v, %v; want %v, %v (lower bound %v)", tc.drifted, tc.w, after, crossed,
					tc.after, tc.crossed, tc.w.ErrorLower(0.95))
			}
		})
	}
}

// TestDriftWindow_LowerBoundMatchesTheReference checks the one-sided
// Clopper–Pearson lower bound against SciPy (certify_expected.json).
func TestDriftWindow_LowerBoundMatchesTheReference(t *testing.T) {
	ref := readCertifyReference(t)
	if len(ref.LowerOneSided) == 0 {
		t.Fatal("no lower bounds in the reference")
	}
	for _, c := range ref.LowerOneSided {
		w := arbiter.DriftWindow{Audits: c.N, Errors: c.K}
		if got := w.ErrorLower(c.Confidence); !near(got, c.Lower) {
			t.Errorf("ErrorLower(%d of %d at %v) = %v, SciPy %v", c.K, c.N, c.Confidence, got, c.Lower)
		}
	}
}

func TestDriftMail(t *testing.T) {
	d := arbiter.NewDrift("acc_1", "refund", "tsk_1", arbiter.DriftWindow{Audits: 200, Errors: 11}, arbiter.DefaultDriftSettings, 0)
	m := arbiter.DriftMail{Drift: d, AccountName: "acme@example.com", Email: "owner@example.com"}
	body := m.Body("https://app.example.com/calibration")
	for _, want := range []string{"11 of the latest 200 blind audits were wrong (5.5%", "under the policy of refund has drifted above its 2% target",
		"https://app.example.com/calibration", "once per crossing"} {
		if !strings.Contains(body, want) {
			t.Errorf("the mail lacks %q:\n%s", want, body)
		}
	}
	if !strings.Contains(m.Subject(), "acme@example.com") || d.ErrorLower <= 0.02 || d.ErrorLower >= d.ErrorRate {
		t.Errorf("subject %q, lower %v", m.Subject(), d.ErrorLower)
	}
}

// TestNextDrift_WatchesThePolicysTarget checks that drift is judged at the
// target the policy holds the agent to: 11 wrong in the latest 200 audits
// (5.5%) cross a 2% line but not the 15% one an operator certified at,
// and 40 (20%) cross 15%. Before, the line was 2% whatever was certified.
func TestNextDrift_WatchesThePolicysTarget(t *testing.T) {
	at15 := arbiter.DefaultDriftSettings.Targeting(&arbiter.ErrorTarget{ErrorRate: 0.15, Confidence: 0.9})
	if at15.Target != 0.15 || at15.Confidence != 0.9 || at15.Audits != arbiter.DefaultDriftAudits {
		t.Fatalf("settings %+v", at15)
	}
	if got := arbiter.DefaultDriftSettings.Targeting(nil); got != arbiter.DefaultDriftSettings {
		t.Errorf("no target changed the defaults: %+v", got)
	}
	for _, tc := range []struct {
		name    string
		errors  int
		s       arbiter.DriftSettings
		crossed bool
	}{
		{"5.5% crosses the default 2%", 11, arbiter.DefaultDriftSettings, true},
		{"5.5% is within a 15% target", 11, at15, false},
		{"20% crosses a 15% target at 90%", 40, at15, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, crossed := arbiter.NextDrift(false, arbiter.DriftWindow{Audits: 200, Errors: tc.errors}, tc.s); crossed != tc.crossed {
				t.Errorf("crossed %v, want %v", crossed, tc.crossed)
			}
		})
	}
}

func TestDrift_SummaryThenSaysWhen(t *testing.T) {
	at := arbiter.TimestampOf(time.Date(2026, 11, 26, 14, 32, 5, 0, time.UTC))
	d := arbiter.Drift{TaskType: "refund", Audits: 200, Errors: 9, ErrorRate: 0.045, ErrorLower: 0.023, Target: 0.02, Confidence: 0.95, DriftedAt: at}
	want := "On 2026-11-26 14:32 UTC the agent's audited error rate under the policy of refund drifted above its 2% target: 9 of the latest 200 blind audits were wrong then (4.5%; at least 2.3% with 95% confidence)."
	if got := d.SummaryThen(); got != want {
		t.Errorf("SummaryThen = %q\nwant %q", got, want)
	}
}

package arbiter_test

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// TestVerifierPairsOf labels each verifier of a cascade once, with its
// last answer: the person's decision on a task the cascade sent on labels
// every verifier that answered (weight 1), an audit of a task a verifier
// decided labels it and those before it (weight 1/rate); a verifier that
// only failed or declined, and an attempt before cascades (no verifier),
// make no pair.
func TestVerifierPairsOf(t *testing.T) {
	s := func(v string) *string { return &v }
	f := func(x float64) *float64 { return &x }
	ff := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	answer := func(verifier, verdict string, confidence float64, passedOn bool) arbiter.Attempt {
		return arbiter.Attempt{Tier: arbiter.TierAgent, Verifier: s(verifier), Verdict: s(verdict), Confidence: f(confidence),
			Model: s(verifier + "-model"), Version: s(verifier + "-v1"), PassedOn: passedOn}
	}
	rate := 0.2
	routed := []arbiter.Attempt{
		{Tier: arbiter.TierAgent, Verifier: s("rules"), Rationale: "No rule matched.", PassedOn: true},
		{Tier: arbiter.TierAgent, Verifier: s("small"), Error: s("the verifier failed")},
		answer("small", "approve", 0.7, true),
		answer("large", "reject", 0.6, false),
	}
	audited := []arbiter.Attempt{
		{Tier: arbiter.TierAgent, Verdict: s("approve"), Confidence: f(0.5)}, // before cascades
		answer("small", "reject", 0.8, true),
		answer("large", "approve", 0.95, false),
	}
	for _, tc := range []struct {
		name     string
		attempts []arbiter.Attempt
		person   arbiter.Attempt
		want     string // verifier:verdict:confidence:weight:correct, newest first
	}{
		{"a person decides what the cascade sent on", routed, arbiter.Attempt{Tier: arbiter.TierHuman, Verdict: s("reject")},
			"large:reject:0.6:1:true small:approve:0.7:1:false"},
		{"an audit labels the verifier that decided and those before", audited,
			arbiter.Attempt{Tier: arbiter.TierHuman, Verdict: s("reject"), Audit: true},
			"large:approve:0.95:5:false small:reject:0.8:5:true"},
		{"no verifier answered", routed[:2], arbiter.Attempt{Tier: arbiter.TierHuman, Verdict: s("reject")}, ""},
		{"the person gave no verdict", routed, arbiter.Attempt{Tier: arbiter.TierHuman}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &arbiter.Task{ID: "tsk_1", AccountID: "acct_1", TaskType: "refund", AuditRate: &rate, Attempts: tc.attempts}
			var got []string
			for _, p := range arbiter.VerifierPairsOf(task, tc.person) {
				if p.Model != p.Verifier+"-model" || p.Version != p.Verifier+"-v1" || p.TaskType != "refund" || p.TaskID != "tsk_1" {
					t.Errorf("pair %+v", p)
				}
				got = append(got, strings.Join([]string{p.Verifier, p.AgentVerdict, ff(p.Confidence), ff(p.Weight),
					map[bool]string{true: "true", false: "false"}[p.Correct()]}, ":"))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("pairs %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

// TestVerifierCertificates_MatchTheReference certifies each verifier of a
// cascade on the labels VerifierPairsOf makes from the tasks of
// testdata/calibration/set_cascade.csv (rules, small, large; decided,
// passed on to people, audited at 25%) and checks every certificate
// against certify_reference.py's, which applies the labelling rule and
// the fixed sequence apart, with SciPy.
func TestVerifierCertificates_MatchTheReference(t *testing.T) {
	ref := readCertifyReference(t)
	if len(ref.Cascade) != 3 {
		t.Fatalf("the reference certifies %d verifiers, want 3", len(ref.Cascade))
	}
	f, err := os.Open(filepath.Join("testdata", "calibration", "set_cascade.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[name] = i
	}
	labels := map[string][]arbiter.LabelledPair{}
	for _, row := range rows[1:] {
		rate, err := strconv.ParseFloat(row[col["audit_rate"]], 64)
		if err != nil {
			t.Fatal(err)
		}
		task := &arbiter.Task{ID: row[col["task"]], AuditRate: &rate}
		for _, v := range []string{"rules", "small", "large"} {
			name := v
			a := arbiter.Attempt{Tier: arbiter.TierAgent, Verifier: &name}
			if verdict := row[col[v+"_verdict"]]; verdict != "" {
				c, err := strconv.ParseFloat(row[col[v+"_confidence"]], 64)
				if err != nil {
					t.Fatal(err)
				}
				a.Verdict, a.Confidence = &verdict, &c
			}
			task.Attempts = append(task.Attempts, a)
			if row[col["decided_by"]] == v {
				break
			}
		}
		person := row[col["person"]]
		if person == "" {
			continue
		}
		for _, p := range arbiter.VerifierPairsOf(task, arbiter.Attempt{Tier: arbiter.TierHuman, Verdict: &person, Audit: row[col["audit"]] == "1"}) {
			labels[p.Verifier] = append(labels[p.Verifier], p)
		}
	}
	certified := 0
	for verifier, byKey := range ref.Cascade {
		evidence := arbiter.Evidence(labels[verifier])
		for key, w := range byKey {
			var alpha, confidence float64
			if _, err := fmtSscanf(key, &alpha, &confidence); err != nil {
				t.Fatalf("key %q", key)
			}
			got := arbiter.Certify(evidence, alpha, confidence)
			if !w.matches(got) {
				t.Errorf("%s at %s: got threshold %v n %d (%d audits, %d routed) errors %d upper %v; want %v %d (%d, %d) %d %v",
					verifier, key, deref(got.Threshold), got.N, got.Audits, got.Routed, got.Errors, deref(got.ErrorUpper),
					deref(w.Threshold), w.N, w.Audits, w.Routed, w.Errors, deref(w.ErrorUpper))
			}
			if got.Threshold != nil {
				certified++
			}
		}
	}
	if certified < 3 {
		t.Errorf("%d certificates: the reference checks too little", certified)
	}
}

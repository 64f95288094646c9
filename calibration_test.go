package arbiter_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestAuditDraw_IsTheDocumentedHash(t *testing.T) {
	// Computed with Python's hashlib, apart from the code under test:
	// (int.from_bytes(sha256(id).digest()[:8], "big") >> 11) / 2**53.
	for id, want := range map[string]float64{
		"tsk_0123456789abcdef":          0.8296849498074681,
		"tsk_demo_refund_late_delivery": 0.3983068287019754,
		"tsk_ffffffffffffffff":          0.6804759564244051,
	} {
		if got := arbiter.AuditDraw(id); got != want {
			t.Errorf("AuditDraw(%q) = %v, want %v", id, got, want)
		}
	}
}

func TestChosenForAudit_IsDeterministic(t *testing.T) {
	for range 1000 {
		id := arbiter.NewTaskID()
		first := arbiter.ChosenForAudit(id, 0.3)
		for range 3 {
			if arbiter.ChosenForAudit(id, 0.3) != first {
				t.Fatalf("%s is chosen one time and not the next", id)
			}
		}
		if arbiter.ChosenForAudit(id, 0) {
			t.Fatalf("%s is chosen at rate 0", id)
		}
		if !arbiter.ChosenForAudit(id, 1) {
			t.Fatalf("%s is not chosen at rate 1", id)
		}
		// A task chosen at a rate is chosen at every higher rate.
		if first && !arbiter.ChosenForAudit(id, 0.31) {
			t.Fatalf("%s is chosen at 0.3 but not at 0.31", id)
		}
	}
}

func TestChosenForAudit_ChoosesTheRateOf100000Ids(t *testing.T) {
	ids := make([]string, 100_000)
	for i := range ids {
		ids[i] = arbiter.NewTaskID()
	}
	for _, rate := range []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.9} {
		chosen := 0
		for _, id := range ids {
			if arbiter.ChosenForAudit(id, rate) {
				chosen++
			}
		}
		share := float64(chosen) / float64(len(ids))
		if math.Abs(share-rate) > 0.01 {
			t.Errorf("at rate %v, %v of 100,000 ids were chosen: more than 1%% off", rate, share)
		}
	}
	// Ids that are not random (a counter) are spread as well.
	chosen := 0
	for i := range 100_000 {
		if arbiter.ChosenForAudit(fmt.Sprintf("tsk_%016x", i), 0.05) {
			chosen++
		}
	}
	if share := float64(chosen) / 100_000; math.Abs(share-0.05) > 0.01 {
		t.Errorf("at rate 0.05, %v of 100,000 sequential ids were chosen", share)
	}
}

func TestParseAuditRate(t *testing.T) {
	for in, want := range map[string]float64{"0": 0, "0.05": 0.05, "5%": 0.05, " 1 ": 1, "100%": 1, "12.5 %": 0.125} {
		if got, err := arbiter.ParseAuditRate(in); err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("ParseAuditRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-0.1", "1.01", "101%", "NaN", "Inf", "0x1p-2"} {
		if _, err := arbiter.ParseAuditRate(in); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("ParseAuditRate(%q) = %v, want EINVALID", in, err)
		}
	}
}

func TestParseTaskCreate_AuditRate(t *testing.T) {
	in, err := arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a"],"audit_rate":0.25}`))
	if err != nil || in.AuditRate == nil || *in.AuditRate != 0.25 {
		t.Fatalf("got %v, %v", in.AuditRate, err)
	}
	in, err = arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a"]}`))
	if err != nil || in.AuditRate != nil {
		t.Fatalf("without audit_rate: got %v, %v", in.AuditRate, err)
	}
	for _, body := range []string{`1.5`, `-0.1`, `"0.1"`, `true`} {
		_, err := arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a"],"audit_rate":` + body + `}`))
		if arbiter.ErrorCode(err) != arbiter.EINVALID || arbiter.ErrorMessage(err) == "" {
			t.Errorf("audit_rate %s: got %v, want EINVALID", body, err)
		}
	}
}

func TestConfidenceBucketOf(t *testing.T) {
	for c, want := range map[float64]int{0: 0, 0.009: 0, 0.01: 1, 0.29: 29, 0.57: 57, 0.58: 58, 0.7999: 79, 0.8: 80, 0.999: 99, 1: 100, -0.5: 0, 1.5: 100} {
		if got := arbiter.ConfidenceBucketOf(c); got != want {
			t.Errorf("ConfidenceBucketOf(%v) = %d, want %d", c, got, want)
		}
	}
	// Every confidence written with two decimals falls in its own bucket.
	for k := 0; k <= 100; k++ {
		c, _ := strconv.ParseFloat(fmt.Sprintf("%d.%02d", k/100, k%100), 64)
		if got := arbiter.ConfidenceBucketOf(c); got != k {
			t.Errorf("ConfidenceBucketOf(%v) = %d, want %d", c, got, k)
		}
	}
}

func TestLabelledPairOf(t *testing.T) {
	v := func(s string) *string { return &s }
	f := func(x float64) *float64 { return &x }
	rate := 0.25
	task := &arbiter.Task{ID: "tsk_0123456789abcdef", AccountID: "acct_1", TaskType: "refund", Source: "bot", CreatedAt: 1000,
		AuditRate: &rate, Attempts: []arbiter.Attempt{
			{Tier: arbiter.TierAgent, Error: v("the verifier timed out")},
			{Tier: arbiter.TierAgent, Verdict: v("approve"), Confidence: f(0.91), Model: v("m1")},
		}}
	audit := arbiter.Attempt{Tier: arbiter.TierHuman, Verdict: v("reject"), Confidence: f(1), Audit: true, StartedAt: 5000}
	p, ok := arbiter.LabelledPairOf(task, audit)
	if !ok || p.Weight != 4 || p.Confidence != 0.91 || p.AgentVerdict != "approve" || p.HumanVerdict != "reject" ||
		p.Correct() || !p.Audit || p.Model != "m1" || p.LabelledAt != 5000 || p.CreatedAt != 1000 || p.Bucket() != 91 {
		t.Errorf("audit pair: %+v, %v", p, ok)
	}
	routed := arbiter.Attempt{Tier: arbiter.TierHuman, Verdict: v("approve"), Confidence: f(1)}
	if p, ok := arbiter.LabelledPairOf(task, routed); !ok || p.Weight != 1 || !p.Correct() || p.Audit {
		t.Errorf("routed pair: %+v, %v", p, ok)
	}
	declined := &arbiter.Task{Attempts: []arbiter.Attempt{{Tier: arbiter.TierAgent, Rationale: "not sure"}}}
	if _, ok := arbiter.LabelledPairOf(declined, routed); ok {
		t.Error("a task the agent declined makes a pair")
	}
}

// referencePairs reads a data set of testdata/calibration.
func referencePairs(t *testing.T, name string) []arbiter.LabelledPair {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "calibration", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var pairs []arbiter.LabelledPair
	for _, r := range rows[1:] {
		c, err1 := strconv.ParseFloat(r[0], 64)
		w, err2 := strconv.ParseFloat(r[4], 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: bad row %v", name, r)
		}
		pairs = append(pairs, arbiter.LabelledPair{Confidence: c, AgentVerdict: r[1], HumanVerdict: r[2], Audit: r[3] == "1", Weight: w})
	}
	return pairs
}

// referenceReport is a data set's expected numbers in expected.json.
type referenceReport struct {
	N     int      `json:"n"`
	ECE   *float64 `json:"ece"`
	MCE   *float64 `json:"mce"`
	Brier *float64 `json:"brier"`
	Bins  []struct {
		N              int      `json:"n"`
		Weight         float64  `json:"weight"`
		MeanConfidence *float64 `json:"mean_confidence"`
		Accuracy       *float64 `json:"accuracy"`
		WilsonLower    *float64 `json:"wilson_lower"`
		WilsonUpper    *float64 `json:"wilson_upper"`
	} `json:"bins"`
	RiskCoverage []struct {
		Threshold  float64  `json:"threshold"`
		N          int      `json:"n"`
		Coverage   *float64 `json:"coverage"`
		ErrorRate  *float64 `json:"error_rate"`
		ErrorUpper *float64 `json:"error_upper"`
	} `json:"risk_coverage"`
	Recommendations map[string]struct {
		Threshold        *float64 `json:"threshold"`
		AutomationRate   *float64 `json:"automation_rate"`
		MoreAuditsNeeded *int     `json:"more_audits_needed"`
		AtThreshold      *float64 `json:"at_threshold"`
	} `json:"recommendations"`
}

// TestCalibrate_MatchesTheReference checks the estimator against numbers
// computed apart from it: testdata/calibration/reference.py (see NOTE.md
// there) works pair by pair from the definitions, in Python.
func TestCalibrate_MatchesTheReference(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "calibration", "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var expected map[string]referenceReport
	if err := json.Unmarshal(raw, &expected); err != nil {
		t.Fatal(err)
	}
	if len(expected) < 5 {
		t.Fatalf("expected.json holds %d data sets", len(expected))
	}
	const tol = 1e-9
	near := func(t *testing.T, what string, got *float64, want *float64) {
		t.Helper()
		switch {
		case (got == nil) != (want == nil):
			t.Errorf("%s: got %v, want %v", what, deref(got), deref(want))
		case got != nil && math.Abs(*got-*want) > tol:
			t.Errorf("%s: got %.12f, want %.12f", what, *got, *want)
		}
	}
	for name, want := range expected {
		t.Run(name, func(t *testing.T) {
			buckets := arbiter.Bucketize(referencePairs(t, name))
			for target, rec := range want.Recommendations {
				tgt, _ := strconv.ParseFloat(target, 64)
				c := arbiter.Calibrate(buckets, nil, tgt, arbiter.DefaultCertificationConfidence)
				if c.N != want.N {
					t.Fatalf("n = %d, want %d", c.N, want.N)
				}
				near(t, "ECE", c.ECE, want.ECE)
				near(t, "MCE", c.MCE, want.MCE)
				near(t, "Brier", c.Brier, want.Brier)
				for i, b := range want.Bins {
					got := c.Bins[i]
					if got.N != b.N || math.Abs(got.Weight-b.Weight) > tol {
						t.Errorf("bin %d: n %d weight %v, want %d %v", i, got.N, got.Weight, b.N, b.Weight)
					}
					near(t, fmt.Sprintf("bin %d mean confidence", i), got.MeanConfidence, b.MeanConfidence)
					near(t, fmt.Sprintf("bin %d accuracy", i), got.Accuracy, b.Accuracy)
					near(t, fmt.Sprintf("bin %d Wilson lower", i), got.WilsonLower, b.WilsonLower)
					near(t, fmt.Sprintf("bin %d Wilson upper", i), got.WilsonUpper, b.WilsonUpper)
				}
				if len(c.RiskCoverage) != len(want.RiskCoverage) {
					t.Fatalf("%d risk–coverage points, want %d", len(c.RiskCoverage), len(want.RiskCoverage))
				}
				for k, p := range want.RiskCoverage {
					got := c.RiskCoverage[k]
					if got.Threshold != p.Threshold || got.N != p.N {
						t.Errorf("point %d: threshold %v n %d, want %v %d", k, got.Threshold, got.N, p.Threshold, p.N)
					}
					cov := &got.Coverage
					if p.Coverage == nil {
						cov = nil
					}
					near(t, fmt.Sprintf("point %d coverage", k), cov, p.Coverage)
					near(t, fmt.Sprintf("point %d error", k), got.ErrorRate, p.ErrorRate)
					near(t, fmt.Sprintf("point %d upper", k), got.ErrorUpper, p.ErrorUpper)
				}
				r := c.Recommendation
				near(t, "target "+target+": threshold", r.Threshold, rec.Threshold)
				near(t, "target "+target+": automation rate", r.AutomationRate, rec.AutomationRate)
				near(t, "target "+target+": at threshold", r.AtThreshold, rec.AtThreshold)
				if (r.MoreAuditsNeeded == nil) != (rec.MoreAuditsNeeded == nil) ||
					(r.MoreAuditsNeeded != nil && *r.MoreAuditsNeeded != *rec.MoreAuditsNeeded) {
					t.Errorf("target %s: more audits needed %v, want %v", target, derefInt(r.MoreAuditsNeeded), derefInt(rec.MoreAuditsNeeded))
				}
				if r.Message == "" {
					t.Errorf("target %s: no message", target)
				}
			}
		})
	}
}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

func derefInt(n *int) any {
	if n == nil {
		return nil
	}
	return *n
}

func TestCalibrate_Messages(t *testing.T) {
	empty := arbiter.Calibrate(nil, nil, 0.02, arbiter.DefaultCertificationConfidence)
	if empty.ECE != nil || empty.Recommendation.Threshold != nil || empty.Recommendation.MoreAuditsNeeded == nil {
		t.Fatalf("no pairs: %+v", empty.Recommendation)
	}
	if got := empty.Recommendation.Message; got == "" || !contains(got, "Not enough data yet") || !contains(got, "189") {
		t.Errorf("no pairs: message %q", got)
	}
	// Half the agent's answers wrong: more audits cannot help.
	pairs := []arbiter.LabelledPair{
		{Confidence: 0.9, AgentVerdict: "a", HumanVerdict: "a", Weight: 1},
		{Confidence: 0.9, AgentVerdict: "a", HumanVerdict: "b", Weight: 1},
	}
	r := arbiter.Calibrate(arbiter.Bucketize(pairs), arbiter.Evidence(pairs), 0.02, arbiter.DefaultCertificationConfidence).Recommendation
	if r.Threshold != nil || r.MoreAuditsNeeded != nil || !contains(r.Message, "more audits will not change that") {
		t.Errorf("a bad agent: %+v", r)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestParseCalibrationQuery(t *testing.T) {
	f, err := arbiter.ParseCalibrationQuery("task_type=refund&source=bot&model=m1&version=prompt-3&verifier=small&created_after=1700000000&created_before=1700000100.5&target_error_rate=5%25")
	if err != nil {
		t.Fatal(err)
	}
	if f.TaskType != "refund" || f.Source != "bot" || f.Model != "m1" || f.Version != "prompt-3" || f.Verifier != "small" || *f.CreatedAfter != 1700000000000 ||
		*f.CreatedBefore != 1700000100500 || math.Abs(f.TargetErrorRate-0.05) > 1e-12 {
		t.Errorf("got %+v", f)
	}
	back, err := arbiter.ParseCalibrationQuery(f.Query().Encode())
	if err != nil || back.TaskType != f.TaskType || back.Version != f.Version || back.Verifier != "small" || *back.CreatedBefore != *f.CreatedBefore || back.TargetErrorRate != f.TargetErrorRate {
		t.Errorf("Query does not read back: %+v, %v", back, err)
	}
	if f, err := arbiter.ParseCalibrationQuery("task_type=&source="); err != nil || f.TaskType != "" || f.TargetErrorRate != 0.02 {
		t.Errorf("an empty form: %+v, %v", f, err)
	}
	for _, q := range []string{"nope=1", "task_type=a&task_type=b", "target_error_rate=0", "target_error_rate=1",
		"target_error_rate=abc", "created_after=-1", "created_before=x", "%zz", "version=a&version=b",
		"version=" + strings.Repeat("v", arbiter.MaxLabelChars+1), "version=a%00b",
		"verifier=Small", "verifier=a%20b", "verifier=" + strings.Repeat("v", 41), "verifier=a&verifier=b"} {
		if _, err := arbiter.ParseCalibrationQuery(q); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("%q: got %v, want EINVALID", q, err)
		} else if strings.HasPrefix(q, "verifier=") && arbiter.ErrorField(err) != "verifier" {
			t.Errorf("%q: the error names %q, not verifier", q, arbiter.ErrorField(err))
		}
	}
}

func TestHumanDecision_AnswersAnAuditBlind(t *testing.T) {
	v, c := "approve", 0.95
	task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusCompleted, AuditState: arbiter.AuditStateWaiting,
		AllowedVerdicts: []string{"approve", "reject"}, FinalVerdict: &v, FinalConfidence: &c}
	a, err := arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}.Attempt(task, 10)
	if err != nil || !a.Audit || a.Tier != arbiter.TierHuman || *a.Verdict != "reject" {
		t.Fatalf("got %+v, %v", a, err)
	}
	task.AuditState = arbiter.AuditStateDone
	task.Attempts = append(task.Attempts, a)
	tier := arbiter.TierAgent
	task.FinalTier = &tier
	_, err = arbiter.HumanDecision{Verdict: "reject", Reviewer: "s@example.com"}.Attempt(task, 11)
	if arbiter.ErrorCode(err) != arbiter.ECONFLICT || !contains(arbiter.ErrorMessage(err), "r@example.com") {
		t.Errorf("a second answer: %v", err)
	}
	if got := task.DecidedBy(); got != "the agent" {
		t.Errorf("DecidedBy names %q, not the agent", got)
	}
}

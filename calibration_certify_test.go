package arbiter_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// certifyReference is testdata/calibration/certify_expected.json, written
// by certify_reference.py with SciPy.
type certifyReference struct {
	Sets map[string]struct {
		Certify map[string]struct {
			Threshold  *float64 `json:"threshold"`
			N          int      `json:"n"`
			Errors     int      `json:"errors"`
			ErrorUpper *float64 `json:"error_upper"`
			Floor      *float64 `json:"floor"`
			Coverage   *float64 `json:"coverage"`
		} `json:"certify"`
		BinsClopperPearson [][]float64 `json:"bins_clopper_pearson"`
		Agreement          struct {
			N     int      `json:"n"`
			Raw   *float64 `json:"raw"`
			Kappa *float64 `json:"kappa"`
			AC1   *float64 `json:"ac1"`
		} `json:"agreement"`
		Feasibility map[string]struct {
			AgentErrorRate *float64 `json:"agent_error_rate"`
			MinHumanShare  float64  `json:"min_human_share"`
		} `json:"feasibility"`
	} `json:"sets"`
	BinomialCDF []struct {
		K, N   int
		P, CDF float64
	} `json:"binomial_cdf"`
	ClopperPearson []struct {
		K, N, Confidence float64
		Lower, Upper     float64
		UpperOneSided    float64 `json:"upper_one_sided"`
	} `json:"clopper_pearson"`
	LowerOneSided []struct {
		K, N       int
		Confidence float64
		Lower      float64
	} `json:"lower_one_sided"`
	AuditsNeeded []struct {
		P, Alpha, Delta, Power float64
		N                      *int
	} `json:"audits_needed"`
}

func readCertifyReference(t *testing.T) certifyReference {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "calibration", "certify_expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref certifyReference
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Sets) == 0 || len(ref.BinomialCDF) == 0 || len(ref.ClopperPearson) == 0 || len(ref.AuditsNeeded) == 0 {
		t.Fatal("the reference is empty")
	}
	return ref
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }

func nearPtr(got, want *float64) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	return near(*got, *want)
}

// TestCertify_MatchesTheReference checks the exact binomial tools, the
// fixed sequence, the bins' Clopper–Pearson intervals, feasibility, the
// power calculation and the agreement figures against SciPy's numbers
// (testdata/calibration/certify_reference.py).
func TestCertify_MatchesTheReference(t *testing.T) {
	t.Parallel()
	ref := readCertifyReference(t)
	for _, c := range ref.BinomialCDF {
		if got := arbiter.BinomialCDF(c.K, c.N, c.P); !near(got, c.CDF) {
			t.Errorf("BinomialCDF(%d, %d, %v) = %v, SciPy %v", c.K, c.N, c.P, got, c.CDF)
		}
	}
	for _, c := range ref.ClopperPearson {
		lo, hi := arbiter.ClopperPearson(c.K, c.N, c.Confidence)
		up := arbiter.ClopperPearsonUpper(c.K, c.N, c.Confidence)
		if !near(lo, c.Lower) || !near(hi, c.Upper) || !near(up, c.UpperOneSided) {
			t.Errorf("Clopper–Pearson(%v of %v at %v) = [%v, %v], one-sided %v; SciPy [%v, %v], %v",
				c.K, c.N, c.Confidence, lo, hi, up, c.Lower, c.Upper, c.UpperOneSided)
		}
	}
	for _, c := range ref.AuditsNeeded {
		n, ok := arbiter.AuditsForCertificate(c.P, c.Alpha, c.Delta, c.Power)
		if ok != (c.N != nil) || (ok && n != *c.N) {
			t.Errorf("AuditsForCertificate(%v, %v, %v, %v) = %d, %v; reference %v", c.P, c.Alpha, c.Delta, c.Power, n, ok, derefInt(c.N))
		}
	}
	certified := 0
	for name, want := range ref.Sets {
		pairs := referencePairs(t, name)
		buckets := arbiter.Bucketize(pairs)
		for key, w := range want.Certify {
			var alpha, confidence float64
			if _, err := fmtSscanf(key, &alpha, &confidence); err != nil {
				t.Fatalf("%s: key %q", name, key)
			}
			got := arbiter.Certify(buckets, alpha, confidence)
			if !nearPtr(got.Threshold, w.Threshold) || got.N != w.N || got.Errors != w.Errors ||
				!nearPtr(got.ErrorUpper, w.ErrorUpper) || !nearPtr(got.Floor, w.Floor) || !nearPtr(got.Coverage, w.Coverage) {
				t.Errorf("%s at %s: got threshold %v n %d errors %d upper %v floor %v coverage %v; want %v %d %d %v %v %v", name, key,
					deref(got.Threshold), got.N, got.Errors, deref(got.ErrorUpper), deref(got.Floor), deref(got.Coverage),
					deref(w.Threshold), w.N, w.Errors, deref(w.ErrorUpper), deref(w.Floor), deref(w.Coverage))
			}
			if got.Threshold != nil {
				certified++
				if *got.ErrorUpper > alpha {
					t.Errorf("%s at %s: certified with an upper bound %v above α", name, key, *got.ErrorUpper)
				}
			}
		}
		c := arbiter.Calibrate(buckets, 0.02, 0.95)
		for i, bin := range c.Bins {
			w := want.BinsClopperPearson[i]
			if (w == nil) != (bin.ClopperPearsonLower == nil) ||
				(w != nil && (!near(*bin.ClopperPearsonLower, w[0]) || !near(*bin.ClopperPearsonUpper, w[1]))) {
				t.Errorf("%s bin %d: Clopper–Pearson [%v, %v], SciPy %v", name, i, deref(bin.ClopperPearsonLower), deref(bin.ClopperPearsonUpper), w)
			}
		}
		for key, w := range want.Feasibility {
			var alpha float64
			if _, err := fmtSscanf(key+"/0", &alpha, new(float64)); err != nil {
				t.Fatal(err)
			}
			f := arbiter.Calibrate(buckets, alpha, 0.95).Feasibility
			if !nearPtr(f.AgentErrorRate, w.AgentErrorRate) || !near(f.MinHumanShare, w.MinHumanShare) || f.Feasible != (w.MinHumanShare == 0) {
				t.Errorf("%s feasibility at %s: %+v, want %+v", name, key, f, w)
			}
		}
		var cells []arbiter.VerdictAgreement
		for _, p := range pairs {
			cells = append(cells, arbiter.VerdictAgreement{AgentVerdict: p.AgentVerdict, HumanVerdict: p.HumanVerdict, N: 1})
		}
		a := arbiter.Agreement(cells)
		if a.N != want.Agreement.N || !nearPtr(a.Raw, want.Agreement.Raw) || !nearPtr(a.Kappa, want.Agreement.Kappa) || !nearPtr(a.AC1, want.Agreement.AC1) {
			t.Errorf("%s agreement: n %d raw %v κ %v AC1 %v; want %+v", name, a.N, deref(a.Raw), deref(a.Kappa), deref(a.AC1), want.Agreement)
		}
	}
	if certified == 0 {
		t.Error("no data set certifies a threshold: the reference checks nothing of a certificate")
	}
}

// fmtSscanf reads "alpha/confidence".
func fmtSscanf(key string, alpha, confidence *float64) (int, error) {
	a, c, _ := strings.Cut(key, "/")
	var err error
	if *alpha, err = parseFloat(a); err != nil {
		return 0, err
	}
	if *confidence, err = parseFloat(c); err != nil {
		return 1, err
	}
	return 2, nil
}

func parseFloat(s string) (float64, error) {
	var f float64
	err := json.Unmarshal([]byte(s), &f)
	return f, err
}

func TestCertify_Cases(t *testing.T) {
	audits := func(bucket, n, wrong int) arbiter.ConfidenceBucket {
		return arbiter.ConfidenceBucket{Bucket: bucket, N: n, Audits: n, AuditsDisagree: wrong, W: float64(n) * 5, W2: float64(n) * 25,
			WCorrect: float64(n-wrong) * 5}
	}
	routed := func(bucket, n, wrong int) arbiter.ConfidenceBucket {
		return arbiter.ConfidenceBucket{Bucket: bucket, N: n, W: float64(n), W2: float64(n), WCorrect: float64(n - wrong)}
	}
	for _, tc := range []struct {
		name    string
		buckets []arbiter.ConfidenceBucket
		want    *float64
		floor   *float64
		message string
	}{
		{"no pairs", nil, nil, ptr(0.0), "no blind audits"},
		{"148 clean audits are one short of 2% at 95%", []arbiter.ConfidenceBucket{audits(99, 148, 0)}, nil, ptr(0.0), "fewer than 149"},
		{"149 clean audits certify", []arbiter.ConfidenceBucket{audits(99, 149, 0)}, ptr(0.0), ptr(0.0), "at most 2%"},
		{"routed pairs stop the sequence", []arbiter.ConfidenceBucket{audits(99, 149, 0), routed(80, 50, 10)}, ptr(0.81), ptr(0.81), "at most 2%"},
		{"one error among 149 does not", []arbiter.ConfidenceBucket{audits(99, 149, 1), routed(80, 50, 10)}, nil, ptr(0.81), "do not show"},
		{"errors lower down stop it there", []arbiter.ConfidenceBucket{audits(99, 400, 1), audits(90, 100, 20), routed(50, 5, 1)}, ptr(0.91), ptr(0.51), "at most 2%"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := arbiter.Certify(tc.buckets, 0.02, 0.95)
			if !nearPtr(c.Threshold, tc.want) || !nearPtr(c.Floor, tc.floor) || !strings.Contains(c.Message, tc.message) {
				t.Errorf("threshold %v floor %v message %q; want %v, %v, %q", deref(c.Threshold), deref(c.Floor), c.Message, deref(tc.want), deref(tc.floor), tc.message)
			}
			if c.Method == "" || c.TargetErrorRate != 0.02 || c.Confidence != 0.95 {
				t.Errorf("the certificate does not state its method, α and confidence: %+v", c)
			}
		})
	}
}

func ptr(f float64) *float64 { return &f }

func TestFeasibility(t *testing.T) {
	for _, tc := range []struct{ mu, alpha, want float64 }{
		{0.01, 0.02, 0}, {0.02, 0.02, 0}, {0.1, 0.02, 0.08 / 0.98}, {0.5, 0.1, 0.4 / 0.9}, {1, 0.02, 1},
	} {
		if got := arbiter.MinHumanShare(tc.mu, tc.alpha); !near(got, tc.want) {
			t.Errorf("MinHumanShare(%v, %v) = %v, want %v", tc.mu, tc.alpha, got, tc.want)
		}
	}
	if f := arbiter.CheckFeasibility(ptr(0.1), 0.02); f.Feasible || !strings.Contains(f.Message, "at least 8.2% of tasks must go to people") {
		t.Errorf("an agent above target: %+v", f)
	}
	if f := arbiter.CheckFeasibility(nil, 0.02); !f.Feasible || f.AgentErrorRate != nil {
		t.Errorf("no pairs: %+v", f)
	}
}

func TestAgreement_KappaCollapsesWhereAC1Holds(t *testing.T) {
	// 95 of 100 pairs approve/approve, 5 disagree one way: κ ≤ 0 by the
	// paradox, AC1 high.
	a := arbiter.Agreement([]arbiter.VerdictAgreement{
		{AgentVerdict: "approve", HumanVerdict: "approve", N: 95},
		{AgentVerdict: "approve", HumanVerdict: "reject", N: 5},
	})
	if a.N != 100 || !near(*a.Raw, 0.95) || *a.Kappa > 1e-12 || *a.AC1 < 0.9 {
		t.Errorf("got n %d raw %v κ %v AC1 %v", a.N, *a.Raw, *a.Kappa, *a.AC1)
	}
	one := arbiter.Agreement([]arbiter.VerdictAgreement{{AgentVerdict: "a", HumanVerdict: "a", N: 3}})
	if one.Kappa != nil || one.AC1 != nil || !near(*one.Raw, 1) {
		t.Errorf("one verdict only: %+v", one)
	}
}

// simulate draws audit samples from a known agent — confidence uniform on
// [0.5, 1), wrong with probability wrong(c), every answer audited at rate
// 0.1 — and counts, over the draws, how often the threshold each method
// picks lets an error rate above alpha through (errorAbove gives the true
// rate at or above a threshold), and how often the certificate is granted.
func simulate(seed uint64, draws, audits int, alpha, delta float64, wrong, errorAbove func(float64) float64) (newFails, oldFails, certified int) {
	rng := rand.New(rand.NewPCG(seed, 2026))
	for range draws {
		var by [101]arbiter.ConfidenceBucket
		for range audits {
			c := 0.5 + 0.5*rng.Float64()
			k := arbiter.ConfidenceBucketOf(c)
			b := &by[k]
			b.Bucket, b.N, b.Audits = k, b.N+1, b.Audits+1
			b.W, b.W2, b.WConfidence = b.W+10, b.W2+100, b.WConfidence+10*c
			if rng.Float64() < wrong(c) {
				b.AuditsDisagree++
			} else {
				b.WCorrect += 10
			}
		}
		c := arbiter.Calibrate(by[:], alpha, 1-delta)
		if th := c.Certification.Threshold; th != nil {
			certified++
			if errorAbove(*th) > alpha+1e-12 {
				newFails++
			}
		}
		if th := c.Recommendation.Threshold; th != nil && errorAbove(*th) > alpha+1e-12 {
			oldFails++
		}
	}
	return newFails, oldFails, certified
}

// TestCertify_HoldsItsGuarantee checks the certificate's promise on
// simulated agents: the certified threshold lets an error rate above α
// through in at most δ of the draws. Two agents: one that gets better with
// its confidence (wrong with probability 0.4·(1−c), so 0.2·(1−t) at or
// above t: exactly 2% at 0.90), where the certificate should usually be
// granted; and one wrong 2.3% of the time whatever it says, where no
// threshold meets 2% and the estimate — the lowest threshold whose Wilson
// bound looks under the target, among a hundred — is fooled by the luckiest
// one far more often than the fixed sequence.
func TestCertify_HoldsItsGuarantee(t *testing.T) {
	t.Parallel()
	const alpha, delta = 0.02, 0.05
	for _, tc := range []struct {
		name              string
		draws, audits     int
		wrong, errorAbove func(float64) float64
		wantPower         bool
	}{
		{"an agent that knows when it is right", 400, 20_000,
			func(c float64) float64 { return 0.4 * (1 - c) }, func(t float64) float64 { return 0.2 * (1 - t) }, true},
		{"an agent wrong 2.3% of the time", 2000, 5_000,
			func(float64) float64 { return 0.023 }, func(float64) float64 { return 0.023 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newFails, oldFails, certified := simulate(33, tc.draws, tc.audits, alpha, delta, tc.wrong, tc.errorAbove)
			t.Logf("%d draws of %d audits: the certificate (granted %d times) let more than %s through in %d (%.1f%%); the estimate in %d (%.1f%%)",
				tc.draws, tc.audits, certified, arbiter.FormatShare(alpha), newFails, 100*float64(newFails)/float64(tc.draws),
				oldFails, 100*float64(oldFails)/float64(tc.draws))
			if float64(newFails) > delta*float64(tc.draws) {
				t.Errorf("the certificate failed in %d of %d draws, more than δ = %v", newFails, tc.draws, delta)
			}
			if tc.wantPower && certified < tc.draws/2 {
				t.Errorf("the certificate was granted in only %d of %d draws: the test shows nothing of its power", certified, tc.draws)
			}
			if !tc.wantPower && oldFails <= newFails {
				t.Errorf("the estimate failed in %d draws, the certificate in %d: the simulation does not tell them apart", oldFails, newFails)
			}
		})
	}
}

func TestPlanAuditDays(t *testing.T) {
	at, need := 0.9, 300
	buckets := []arbiter.ConfidenceBucket{{Bucket: 95, N: 30, Audits: 30}, {Bucket: 85, N: 90, Audits: 90}}
	for _, tc := range []struct {
		name   string
		recent int
		want   *int
	}{
		{"no recent audits", 0, nil},
		// 120 audits in 30 days is 4 a day, a quarter of them at or above
		// 0.90: one a day, 300 days.
		{"a quarter of four a day", 120, intPtr(300)},
		{"rounds up", 7, intPtr(5143)}, // 300 / (7/30 · 1/4) = 5142.86
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := arbiter.Certification{AuditsNeeded: &need, AtThreshold: &at}
			c.PlanAuditDays(buckets, tc.recent)
			if (c.AuditDays == nil) != (tc.want == nil) || (tc.want != nil && *c.AuditDays != *tc.want) {
				t.Fatalf("AuditDays = %v, want %v", derefInt(c.AuditDays), derefInt(tc.want))
			}
			if tc.want != nil && !strings.Contains(c.Message, "days") {
				t.Errorf("the message does not say the days: %q", c.Message)
			}
		})
	}
	c := arbiter.Certification{}
	c.PlanAuditDays(buckets, 120)
	if c.AuditDays != nil {
		t.Error("days without audits needed")
	}
}

func intPtr(n int) *int { return &n }

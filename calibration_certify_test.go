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
		Certify            map[string]referenceCertificate `json:"certify"`
		BinsClopperPearson [][]float64                     `json:"bins_clopper_pearson"`
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
	// Cascade is each verifier's certificates over set_cascade.csv, by
	// "alpha/confidence".
	Cascade map[string]map[string]referenceCertificate `json:"cascade"`
}

// referenceCertificate is one certificate of the reference.
type referenceCertificate struct {
	Threshold  *float64 `json:"threshold"`
	N          int      `json:"n"`
	Errors     int      `json:"errors"`
	Audits     int      `json:"audits"`
	Routed     int      `json:"routed"`
	ErrorUpper *float64 `json:"error_upper"`
	Floor      *float64 `json:"floor"`
	Coverage   *float64 `json:"coverage"`
}

// matches reports whether got is the reference's certificate.
func (w referenceCertificate) matches(got arbiter.Certification) bool {
	return nearPtr(got.Threshold, w.Threshold) && got.N == w.N && got.Errors == w.Errors && got.Audits == w.Audits && got.Routed == w.Routed &&
		nearPtr(got.ErrorUpper, w.ErrorUpper) && nearPtr(got.Floor, w.Floor) && nearPtr(got.Coverage, w.Coverage)
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
// fixed sequence (over routed decisions and audits at several rates, on
// the thousandths), the bins' Clopper–Pearson intervals, feasibility, the
// power calculation and the agreement figures against SciPy's numbers
// (testdata/calibration/certify_reference.py, pair by pair).
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
	certified, mixed := 0, 0
	for name, want := range ref.Sets {
		pairs := referencePairs(t, name)
		buckets, evidence := arbiter.Bucketize(pairs), arbiter.Evidence(pairs)
		for key, w := range want.Certify {
			var alpha, confidence float64
			if _, err := fmtSscanf(key, &alpha, &confidence); err != nil {
				t.Fatalf("%s: key %q", name, key)
			}
			got := arbiter.Certify(evidence, alpha, confidence)
			if !w.matches(got) {
				t.Errorf("%s at %s: got threshold %v n %d (%d audits, %d routed) errors %d upper %v floor %v coverage %v; want %v %d (%d, %d) %d %v %v %v",
					name, key, deref(got.Threshold), got.N, got.Audits, got.Routed, got.Errors, deref(got.ErrorUpper), deref(got.Floor), deref(got.Coverage),
					deref(w.Threshold), w.N, w.Audits, w.Routed, w.Errors, deref(w.ErrorUpper), deref(w.Floor), deref(w.Coverage))
			}
			if got.Threshold != nil {
				certified++
				if got.Audits > 0 && got.Routed > 0 {
					mixed++
				}
				if *got.ErrorUpper > alpha {
					t.Errorf("%s at %s: certified with an upper bound %v above α", name, key, *got.ErrorUpper)
				}
				if *got.Threshold < *got.Floor {
					t.Errorf("%s at %s: certified %v, below where the evidence ends (%v)", name, key, *got.Threshold, *got.Floor)
				}
			}
		}
		c := arbiter.Calibrate(buckets, evidence, 0.02, 0.95)
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
			f := arbiter.Calibrate(buckets, evidence, alpha, 0.95).Feasibility
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
	if certified == 0 || mixed == 0 {
		t.Errorf("%d certificates, %d of them on routed decisions and audits together: the reference checks too little", certified, mixed)
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

// TestCertify_Cases walks the fixed sequence over evidence made by hand:
// it never certifies below the lowest labelled confidence (the empty
// buckets below 0.97 are not walked), people's decisions on routed tasks
// count beside audits (alone, routing everything first earns a
// certificate), strata sampled at different rates are bounded apart and
// weighted by the answers they stand for, and the sequence tests
// thousandths, at the confidences labelled. Before it, the walk certified
// 0.00 on audits at 0.97, ignored routed decisions, and stopped at 0.99.
func TestCertify_Cases(t *testing.T) {
	audits := func(c float64, n, wrong int, rate float64) arbiter.EvidenceCell {
		return arbiter.EvidenceCell{Bucket: arbiter.FineBucketOf(c), Weight: 1 / rate, Audit: true, N: n, Errors: wrong, Lowest: c}
	}
	routed := func(c float64, n, wrong int) arbiter.EvidenceCell {
		return arbiter.EvidenceCell{Bucket: arbiter.FineBucketOf(c), Weight: 1, N: n, Errors: wrong, Lowest: c}
	}
	for _, tc := range []struct {
		name         string
		cells        []arbiter.EvidenceCell
		alpha        float64
		want, floor  *float64
		audits, rout int
		message      string
	}{
		{"no labels", nil, 0.02, nil, nil, 0, 0, "nobody has labelled"},
		{"148 clean audits are one short of 2% at 95%", []arbiter.EvidenceCell{audits(0.99, 148, 0, 0.2)}, 0.02, nil, ptr(0.99), 0, 0, "too few labelled answers (148)"},
		{"149 clean audits certify their confidence", []arbiter.EvidenceCell{audits(0.99, 149, 0, 0.2)}, 0.02, ptr(0.99), ptr(0.99), 149, 0, "149 blind audits"},
		{"the empty buckets below the audits are not walked", []arbiter.EvidenceCell{audits(0.97, 160, 0, 0.1)}, 0.05, ptr(0.97), ptr(0.97), 160, 0, "At or above 0.97"},
		{"people's decisions on routed tasks certify below the audits", []arbiter.EvidenceCell{audits(0.95, 300, 0, 0.1), routed(0.85, 400, 0)},
			0.02, ptr(0.85), ptr(0.85), 300, 400, "400 people's decisions on routed tasks, 300 blind audits"},
		{"routing everything first earns a certificate", []arbiter.EvidenceCell{routed(0.9, 150, 0), routed(0.62, 100, 1)},
			0.02, ptr(0.62), ptr(0.62), 0, 250, "250 labelled answers"},
		{"errors among routed decisions stop the sequence there", []arbiter.EvidenceCell{audits(0.95, 300, 0, 0.1), routed(0.85, 400, 0), routed(0.7, 300, 90)},
			0.02, ptr(0.85), ptr(0.7), 300, 400, "At or above 0.85"},
		{"one error among 149 audits does not certify", []arbiter.EvidenceCell{audits(0.99, 149, 1, 0.2), routed(0.8, 50, 10)}, 0.02, nil, ptr(0.8), 0, 0, "do not show"},
		{"the fine grid certifies inside a hundredth", []arbiter.EvidenceCell{audits(0.998, 300, 0, 1), audits(0.991, 200, 40, 1)},
			0.05, ptr(0.998), ptr(0.991), 300, 0, "At or above 0.998"},
		{"a threshold is a confidence labelled", []arbiter.EvidenceCell{{Bucket: 973, Weight: 1, N: 300, Lowest: 0.9734}},
			0.02, ptr(0.9734), ptr(0.9734), 0, 300, "At or above 0.9734"},
		{"thresholds no labels could certify are passed over", []arbiter.EvidenceCell{audits(0.999, 3, 2, 0.5), audits(0.95, 400, 0, 0.5)},
			0.02, ptr(0.95), ptr(0.95), 403, 0, "2 wrong"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := arbiter.Certify(tc.cells, tc.alpha, 0.95)
			if !nearPtr(c.Threshold, tc.want) || !nearPtr(c.Floor, tc.floor) || !strings.Contains(c.Message, tc.message) {
				t.Errorf("threshold %v floor %v message %q; want %v, %v, %q", deref(c.Threshold), deref(c.Floor), c.Message, deref(tc.want), deref(tc.floor), tc.message)
			}
			if c.Audits != tc.audits || c.Routed != tc.rout || c.N != c.Audits+c.Routed {
				t.Errorf("%d audits and %d routed of %d, want %d and %d", c.Audits, c.Routed, c.N, tc.audits, tc.rout)
			}
			if c.Method == "" || c.TargetErrorRate != tc.alpha || c.Confidence != 0.95 {
				t.Errorf("the certificate does not state its method, α and confidence: %+v", c)
			}
			if c.Threshold != nil && (*c.ErrorUpper > tc.alpha || *c.Threshold < *c.Floor) {
				t.Errorf("certified %v with a bound of %v, floor %v", *c.Threshold, *c.ErrorUpper, *c.Floor)
			}
		})
	}
}

// TestCertify_WeighsStrataByTheAnswersTheyStandFor checks the bound on
// mixed evidence by hand: 400 routed decisions (weight 1) and 300 audits
// at 10% (weight 10, 3,000 answers) at or above 0.85: the audits stand for
// 3,000/3,400 of the answers and get 10/11 of δ.
func TestCertify_WeighsStrataByTheAnswersTheyStandFor(t *testing.T) {
	cells := []arbiter.EvidenceCell{
		{Bucket: 950, Weight: 10, Audit: true, N: 300, Errors: 1, Lowest: 0.95},
		{Bucket: 850, Weight: 1, N: 400, Errors: 2, Lowest: 0.85},
	}
	c := arbiter.Certify(cells, 0.05, 0.95)
	if c.Threshold == nil || *c.Threshold != 0.85 || len(c.Evidence) != 2 {
		t.Fatalf("certificate %+v", c)
	}
	audit, people := c.Evidence[1], c.Evidence[0]
	if people.SamplingRate != 1 || audit.SamplingRate != 0.1 || people.N != 400 || audit.N != 300 || people.Errors != 2 || audit.Errors != 1 {
		t.Fatalf("strata %+v", c.Evidence)
	}
	// 1 − δ·w/Σw: 1 − 0.05·10/11 and 1 − 0.05/11.
	if !near(audit.Confidence, 1-0.05*10/11) || !near(people.Confidence, 1-0.05/11) {
		t.Errorf("confidences %v and %v", audit.Confidence, people.Confidence)
	}
	if !near(audit.Share, 3000.0/3400) || !near(people.Share, 400.0/3400) {
		t.Errorf("shares %v and %v", audit.Share, people.Share)
	}
	// The Clopper–Pearson bounds from their definition: the p with
	// P(X ≤ k; n, p) = 1 − confidence.
	for _, s := range c.Evidence {
		if got := arbiter.BinomialCDF(s.Errors, s.N, s.ErrorUpper); math.Abs(got-(1-s.Confidence)) > 1e-9 {
			t.Errorf("stratum at %v: P(X ≤ %d; %d, %v) = %v, want %v", s.SamplingRate, s.Errors, s.N, s.ErrorUpper, got, 1-s.Confidence)
		}
	}
	if want := audit.Share*audit.ErrorUpper + people.Share*people.ErrorUpper; !near(*c.ErrorUpper, want) {
		t.Errorf("error upper %v, want Σ share·upper = %v", *c.ErrorUpper, want)
	}
}

func TestCheckCertifiedThreshold_RefusesBelowTheEvidence(t *testing.T) {
	c := arbiter.Certify([]arbiter.EvidenceCell{{Bucket: 970, Weight: 10, Audit: true, N: 160, Lowest: 0.97}}, 0.05, 0.95)
	if c.Threshold == nil || *c.Threshold != 0.97 {
		t.Fatalf("certificate %+v", c)
	}
	for _, tc := range []struct {
		threshold float64
		message   string
	}{
		{0, "below where the evidence ends (0.97)"},
		{0.6, "below where the evidence ends (0.97)"},
		{0.98, "it is 0.97 now, not 0.98"},
	} {
		err := arbiter.CheckCertifiedThreshold(c, tc.threshold)
		if arbiter.ErrorCode(err) != arbiter.ECONFLICT || !strings.Contains(arbiter.ErrorMessage(err), tc.message) {
			t.Errorf("apply %v: %v, want ECONFLICT saying %q", tc.threshold, err, tc.message)
		}
	}
	if err := arbiter.CheckCertifiedThreshold(c, 0.97); err != nil {
		t.Errorf("apply the certified 0.97: %v", err)
	}
	if err := arbiter.CheckCertifiedThreshold(arbiter.Certify(nil, 0.05, 0.95), 0.5); arbiter.ErrorCode(err) != arbiter.ECONFLICT {
		t.Errorf("apply with no labels: %v", err)
	}
	if !strings.Contains(c.EvidenceEnds(), "0.97") {
		t.Errorf("EvidenceEnds: %q", c.EvidenceEnds())
	}
}

func TestFormatThreshold(t *testing.T) {
	for in, want := range map[float64]string{0: "0.00", 0.9: "0.90", 0.97: "0.97", 0.973: "0.973", 0.9734: "0.9734", 0.99872341: "0.9987", 1: "1.00"} {
		if got := arbiter.FormatThreshold(in); got != want {
			t.Errorf("FormatThreshold(%v) = %q, want %q", in, got, want)
		}
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

// deployment is a simulated agent and how its answers were labelled:
// each answer's confidence is uniform on [0.5, 1) and wrong with
// probability wrong(c); below routeBelow it goes to a person, who labels
// it (weight 1); at or above, it is audited at auditRate (weight
// 1/auditRate). errorAbove gives the true error rate at or above a
// threshold.
type deployment struct {
	answers               int
	routeBelow, auditRate float64
	wrong, errorAbove     func(float64) float64
}

// draw returns one deployment's labels as buckets and evidence, summed as
// Bucketize and Evidence sum pairs.
func (d deployment) draw(rng *rand.Rand) ([]arbiter.ConfidenceBucket, []arbiter.EvidenceCell) {
	var buckets [101]arbiter.ConfidenceBucket
	var cells [1001][2]arbiter.EvidenceCell
	for range d.answers {
		c := 0.5 + 0.5*rng.Float64()
		wrong := rng.Float64() < d.wrong(c)
		audit, w := false, 1.0
		if c >= d.routeBelow {
			if rng.Float64() >= d.auditRate {
				continue // decided by the agent, not audited: nobody labels it
			}
			audit, w = true, 1/d.auditRate
		}
		k := arbiter.ConfidenceBucketOf(c)
		b := &buckets[k]
		b.Bucket, b.N, b.W, b.W2, b.WConfidence = k, b.N+1, b.W+w, b.W2+w*w, b.WConfidence+w*c
		cell := &cells[arbiter.FineBucketOf(c)][boolIndex(audit)]
		if cell.N == 0 || c < cell.Lowest {
			cell.Lowest = c
		}
		cell.Bucket, cell.Weight, cell.Audit, cell.N = arbiter.FineBucketOf(c), w, audit, cell.N+1
		if audit {
			b.Audits++
		}
		if wrong {
			cell.Errors++
			if audit {
				b.AuditsDisagree++
			}
			b.WSquaredError += w * c * c
		} else {
			b.WCorrect += w
			b.WSquaredError += w * (1 - c) * (1 - c)
		}
	}
	var evidence []arbiter.EvidenceCell
	for k := range cells {
		for _, cell := range cells[k] {
			if cell.N > 0 {
				evidence = append(evidence, cell)
			}
		}
	}
	return buckets[:], evidence
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// simulation is what simulate counts over the draws: how often each
// method's threshold let an error rate above α through, how often the
// certificate was granted, and how often it reached below routeBelow (on
// people's decisions).
type simulation struct {
	newFails, oldFails, certified, belowRouting int
}

// simulate draws deployments and counts, over the draws, how often the
// threshold each method picks lets an error rate above alpha through.
func simulate(seed uint64, draws int, d deployment, alpha, delta float64) simulation {
	rng := rand.New(rand.NewPCG(seed, 2026))
	var s simulation
	for range draws {
		buckets, evidence := d.draw(rng)
		c := arbiter.Calibrate(buckets, evidence, alpha, 1-delta)
		if th := c.Certification.Threshold; th != nil {
			s.certified++
			if *th < d.routeBelow {
				s.belowRouting++
			}
			if d.errorAbove(*th) > alpha+1e-12 {
				s.newFails++
			}
		}
		if th := c.Recommendation.Threshold; th != nil && d.errorAbove(*th) > alpha+1e-12 {
			s.oldFails++
		}
	}
	return s
}

// TestCertify_HoldsItsGuarantee checks the certificate's promise on
// simulated deployments: the certified threshold lets an error rate above
// α through in at most δ of the draws, whether the labels are blind audits
// alone, people's decisions on routed tasks alone, or both, sampled at
// their rates. Confidences are uniform on [0.5, 1).
//
//   - An agent that gets better with its confidence (wrong with probability
//     0.4·(1−c), so 0.2·(1−t) at or above t: 5% at 0.75), routed below 0.9
//     and audited above at 10%: the certificate should usually be granted,
//     and on people's decisions below 0.9.
//   - The same agent with every task routed to people first (a threshold
//     above every confidence): the decisions alone earn the certificate.
//   - An agent wrong 2.3% of the time whatever it says, against 2%: every
//     certificate fails, so it may be granted in at most δ of the draws;
//     audits alone (the estimate, among a hundred thresholds, is fooled
//     far more often) and routed below 0.9 with audits above.
//   - Errors where the audits are thin: wrong 2.3% above 0.9, audited at
//     5%, and 0.5% below, routed: the error rate at or above t is over 2%
//     above 0.88.
func TestCertify_HoldsItsGuarantee(t *testing.T) {
	t.Parallel()
	const delta = 0.05
	knows := func(c float64) float64 { return 0.4 * (1 - c) }
	knowsAbove := func(t float64) float64 { return 0.2 * (1 - max(t, 0.5)) }
	flat := func(float64) float64 { return 0.023 }
	thin := func(c float64) float64 {
		if c >= 0.9 {
			return 0.023
		}
		return 0.005
	}
	thinAbove := func(t float64) float64 {
		t = max(t, 0.5)
		if t >= 0.9 {
			return 0.023
		}
		return (0.023*0.1 + 0.005*(0.9-t)) / (1 - t)
	}
	for _, tc := range []struct {
		name               string
		draws              int
		d                  deployment
		alpha              float64
		wantPower, wantLow bool
		oldWorse           bool
	}{
		{"an agent that knows when it is right, routed below 0.9, audited above", 300,
			deployment{answers: 6000, routeBelow: 0.9, auditRate: 0.25, wrong: knows, errorAbove: knowsAbove}, 0.05, true, true, false},
		{"every task routed to people first", 300,
			deployment{answers: 1500, routeBelow: 2, wrong: knows, errorAbove: knowsAbove}, 0.05, true, true, false},
		{"an agent wrong 2.3% of the time, audited alone", 1000,
			deployment{answers: 5000, routeBelow: 0, auditRate: 1, wrong: flat, errorAbove: flat}, 0.02, false, false, true},
		{"an agent wrong 2.3% of the time, routed below 0.9, audited above", 1000,
			deployment{answers: 8000, routeBelow: 0.9, auditRate: 0.2, wrong: flat, errorAbove: flat}, 0.02, false, false, true},
		{"errors where the audits are thin", 1000,
			deployment{answers: 20000, routeBelow: 0.9, auditRate: 0.05, wrong: thin, errorAbove: thinAbove}, 0.02, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := simulate(33, tc.draws, tc.d, tc.alpha, delta)
			t.Logf("%d draws: the certificate (granted %d times, %d of them below 0.9) let more than %s through in %d (%.1f%%); the estimate in %d (%.1f%%)",
				tc.draws, s.certified, s.belowRouting, arbiter.FormatShare(tc.alpha), s.newFails, 100*float64(s.newFails)/float64(tc.draws),
				s.oldFails, 100*float64(s.oldFails)/float64(tc.draws))
			if float64(s.newFails) > delta*float64(tc.draws) {
				t.Errorf("the certificate failed in %d of %d draws, more than δ = %v", s.newFails, tc.draws, delta)
			}
			if tc.wantPower && s.certified < tc.draws/2 {
				t.Errorf("the certificate was granted in only %d of %d draws: the test shows nothing of its power", s.certified, tc.draws)
			}
			if tc.wantLow && s.belowRouting < tc.draws/2 {
				t.Errorf("the certificate reached below 0.9 in only %d of %d draws: people's decisions did not count", s.belowRouting, tc.draws)
			}
			if tc.oldWorse && s.oldFails <= s.newFails {
				t.Errorf("the estimate failed in %d draws, the certificate in %d: the simulation does not tell them apart", s.oldFails, s.newFails)
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

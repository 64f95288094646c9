package arbiter

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Certified thresholds.
//
// The estimate (Recommendation) looks at every threshold at once and keeps
// the lowest that looks good enough, so the confidence it states is higher
// than the method earns. The certificate is fixed-sequence testing in the
// Learn-then-Test framework (Angelopoulos, Bates, Candès, Jordan and Lei,
// arXiv 2110.01052), as Trust or Escalate (Jung, Brahman and Choi, arXiv
// 2407.18370) applies it to LLM judges: the thresholds are tested from high
// to low; at each, the null hypothesis "the agent's error rate at or above
// this threshold exceeds α" is tested with an exact binomial p-value on the
// blind audits at or above it; the sequence stops at the first threshold
// whose null it cannot reject, and the certified threshold is the last one
// rejected. With probability at least 1−δ, the agent's error rate at or
// above the certified threshold is at most α.
//
// Only audits enter the test: they are a uniform sample of the agent's
// confident answers, where the routed pairs below the threshold are every
// answer a person was asked about, and the weights that join the two in the
// estimate would break an exact bound. So the sequence also stops at the
// first confidence bucket that holds a routed pair: below it, the audits no
// longer sample the agent's answers uniformly.

// DefaultCertificationConfidence is the confidence 1−δ of a certificate
// when the reader chooses none: 95%.
const DefaultCertificationConfidence = 0.95

// CertificationPower is the power the audits-needed calculation plans for:
// the chance that the certificate is granted if the error rate seen holds.
const CertificationPower = 0.8

// CertificationMethod says in words how a threshold is certified; the
// report and the page repeat it.
const CertificationMethod = "Fixed-sequence testing (Learn then Test): thresholds are tested from 1.00 down with an exact binomial test on the blind audits at or above each; the certified threshold is the last one at which the error rate is shown to be at most the target, with the stated confidence."

// Certification is the certified threshold of a report: the lowest
// threshold the fixed sequence reached, with what it rests on. Threshold
// is nil when none is certified; Message says why and, where more audits
// would do, AuditsNeeded says about how many.
type Certification struct {
	TargetErrorRate float64  `json:"target_error_rate"` // α
	Confidence      float64  `json:"confidence"`        // 1−δ
	Method          string   `json:"method"`
	Threshold       *float64 `json:"threshold"`
	// Coverage is the estimated share of the agent's answers at or above
	// the threshold (from the weighted pairs, as the estimate's).
	Coverage *float64 `json:"coverage"`
	// N and Errors are the blind audits at or above the threshold and how
	// many of them a person disagreed with; ErrorUpper is their one-sided
	// Clopper–Pearson upper bound at the confidence, at most α.
	N          int      `json:"n"`
	Errors     int      `json:"errors"`
	ErrorUpper *float64 `json:"error_upper"`
	// Floor is the lowest threshold the audits sample uniformly: below
	// it, people were asked about the agent's answers (routed pairs).
	Floor *float64 `json:"floor"`
	// AuditsNeeded, with AtThreshold, is how many more blind audits at or
	// above that threshold would give the certificate there, with the
	// power CertificationPower, if the error rate seen holds (the
	// estimate's threshold; nil when there is none or it is certified).
	AuditsNeeded *int     `json:"audits_needed"`
	AtThreshold  *float64 `json:"at_threshold"`
	// AuditDays is about how many days of traffic would bring those
	// audits, at the pace of the last 30 days' audits at or above
	// AtThreshold (PlanAuditDays); nil when there were none.
	AuditDays *int   `json:"audit_days"`
	Message   string `json:"message"`
}

// Feasibility says whether a target error rate can be met at all. When the
// agent's error rate μ over all its answers is above α, at least
// (μ−α)/(1−α) of the tasks must go to people whatever the threshold: even
// if every answer people see is one of the agent's errors, the answers
// left to the agent must carry at most α of errors.
type Feasibility struct {
	AgentErrorRate *float64 `json:"agent_error_rate"` // μ, estimated from the weighted pairs
	Feasible       bool     `json:"feasible"`
	// MinHumanShare is (μ−α)/(1−α) when μ > α and 0 otherwise.
	MinHumanShare float64 `json:"min_human_share"`
	Message       string  `json:"message"`
}

// MinHumanShare returns the share of tasks that must go to people for the
// answers left to the agent to carry at most target of errors, when the
// agent is wrong on a share mu of all its answers: max(0, (μ−α)/(1−α)).
func MinHumanShare(mu, target float64) float64 {
	if mu <= target || target >= 1 {
		return 0
	}
	return (mu - target) / (1 - target)
}

// CheckFeasibility computes the Feasibility of a target from the agent's
// estimated error rate (nil without pairs).
func CheckFeasibility(mu *float64, target float64) Feasibility {
	f := Feasibility{AgentErrorRate: mu, Feasible: true}
	if mu == nil {
		f.Message = "Not known yet: there are no labelled pairs."
		return f
	}
	f.MinHumanShare = MinHumanShare(*mu, target)
	if f.MinHumanShare > 0 {
		f.Feasible = false
		f.Message = fmt.Sprintf("The agent is wrong on about %s of its answers, above the %s target: whatever the threshold, at least %s of tasks must go to people.",
			FormatShare(*mu), FormatShare(target), FormatShare(f.MinHumanShare))
		return f
	}
	f.Message = fmt.Sprintf("The agent is wrong on about %s of its answers, within the %s target: a threshold can meet it.", FormatShare(*mu), FormatShare(target))
	return f
}

// minRejectable returns the fewest audits with no error that could reject
// the null at level delta for target alpha: ⌈ln δ / ln(1−α)⌉. Thresholds
// with fewer audits at or above them cannot be certified by any labels.
func minRejectable(alpha, delta float64) int {
	return int(math.Ceil(math.Log(delta)/math.Log1p(-alpha) - 1e-9))
}

// Certify runs the fixed sequence over the confidence buckets (in any
// order; a bucket may appear more than once) for a target error rate
// alpha in (0, 1) and a confidence in (0, 1).
//
// The sequence starts at the highest threshold with at least
// ⌈ln δ / ln(1−α)⌉ audits at or above it — no threshold above can be
// rejected whatever the labels, and the start depends on the audits'
// confidences only, not on whether people agreed — and goes down one
// hundredth at a time.
func Certify(buckets []ConfidenceBucket, alpha, confidence float64) Certification {
	var byBucket [101]ConfidenceBucket
	var all ConfidenceBucket
	for _, b := range buckets {
		k := min(max(b.Bucket, 0), 100)
		byBucket[k].add(b)
		all.add(b)
	}
	return certify(byBucket, all, alpha, confidence)
}

func certify(byBucket [101]ConfidenceBucket, all ConfidenceBucket, alpha, confidence float64) Certification {
	c := Certification{TargetErrorRate: alpha, Confidence: confidence, Method: CertificationMethod}
	delta := 1 - confidence
	start := minRejectable(alpha, delta)
	// The floor: below the highest bucket that holds a routed pair, the
	// audits no longer sample the agent's answers uniformly.
	floor := 101
	for floor > 0 && byBucket[floor-1].N == byBucket[floor-1].Audits {
		floor--
	}
	var above ConfidenceBucket
	certifiedAt, stoppedAt := -1, -1
	for k := 100; k >= floor; k-- {
		above.add(byBucket[k])
		if above.Audits < start {
			continue
		}
		if BinomialCDF(above.AuditsDisagree, above.Audits, alpha) > delta {
			stoppedAt = k
			break
		}
		certifiedAt = k
		t, n, e := float64(k)/100, above.Audits, above.AuditsDisagree
		upper := ClopperPearsonUpper(float64(e), float64(n), confidence)
		c.Threshold, c.N, c.Errors, c.ErrorUpper = &t, n, e, &upper
		if all.W > 0 {
			coverage := above.W / all.W
			c.Coverage = &coverage
		}
	}
	if floor <= 100 {
		f := float64(floor) / 100
		c.Floor = &f
	}
	switch {
	case certifiedAt >= 0:
		c.Message = fmt.Sprintf("At or above %.2f the agent is wrong at most %s of the time, with %s confidence (%d blind audits, %d disagreements).",
			*c.Threshold, FormatShare(alpha), FormatShare(confidence), c.N, c.Errors)
	case all.Audits == 0:
		c.Message = fmt.Sprintf("Not yet: there are no blind audits. At least %d audits with no disagreement are needed before any threshold can be certified at %s; set an audit rate above 0 to collect them.",
			start, FormatShare(alpha))
	case stoppedAt >= 0:
		c.Message = fmt.Sprintf("Not yet: at %.2f the blind audits do not show an error rate under %s with %s confidence.",
			float64(stoppedAt)/100, FormatShare(alpha), FormatShare(confidence))
	default:
		c.Message = fmt.Sprintf("Not yet: fewer than %d blind audits sample the agent's answers uniformly; with no disagreement, that many are needed to certify %s.",
			start, FormatShare(alpha))
	}
	return c
}

// AuditsForCertificate returns how many blind audits at or above a
// threshold an exact one-sided test at level delta needs to show an error
// rate under alpha with power power, when the true error rate there is p:
// the normal approximation
//
//	n = ((z₁₋δ·√(α(1−α)) + z_power·√(p(1−p))) / (α − p))²
//
// rounded up, at least ⌈ln δ / ln(1−α)⌉. ok is false when p ≥ α: no number
// of audits would do.
func AuditsForCertificate(p, alpha, delta, power float64) (n int, ok bool) {
	if p >= alpha || alpha <= 0 || alpha >= 1 || delta <= 0 || delta >= 1 {
		return 0, false
	}
	p = max(p, 0)
	zd, zp := NormalQuantile(1-delta), NormalQuantile(power)
	root := (zd*math.Sqrt(alpha*(1-alpha)) + zp*math.Sqrt(p*(1-p))) / (alpha - p)
	return max(int(math.Ceil(root*root-1e-9)), minRejectable(alpha, delta)), true
}

// planAudits fills c's AuditsNeeded for the estimate's threshold at (in
// hundredths) where the weighted error rate seen is rate.
func (c *Certification) planAudits(byBucket [101]ConfidenceBucket, at int, rate float64) {
	if c.Threshold != nil && *c.Threshold <= float64(at)/100 {
		return
	}
	need, ok := AuditsForCertificate(rate, c.TargetErrorRate, 1-c.Confidence, CertificationPower)
	if !ok {
		return
	}
	have := 0
	for k := at; k <= 100; k++ {
		have += byBucket[k].Audits
	}
	more, t := max(need-have, 1), float64(at)/100
	c.AuditsNeeded, c.AtThreshold = &more, &t
	c.Message += fmt.Sprintf(" About %d more blind audits at or above %.2f would certify it there, if the error rate seen (%s) holds.", more, t, FormatShare(rate))
}

// AuditPaceDays is the window whose audits set the pace of AuditDays.
const AuditPaceDays = 30

// PlanAuditDays fills c's AuditDays from the blind audits answered in the
// last AuditPaceDays days (recent, with the report's filter) and the share
// of the report's audits at or above AtThreshold:
// ⌈AuditsNeeded / (recent / AuditPaceDays · share)⌉.
func (c *Certification) PlanAuditDays(buckets []ConfidenceBucket, recent int) {
	if c.AuditsNeeded == nil || c.AtThreshold == nil || recent <= 0 {
		return
	}
	at := int(math.Round(*c.AtThreshold * 100))
	all, above := 0, 0
	for _, b := range buckets {
		all += b.Audits
		if b.Bucket >= at {
			above += b.Audits
		}
	}
	if all == 0 || above == 0 {
		return
	}
	perDay := float64(recent) / AuditPaceDays * float64(above) / float64(all)
	days := int(math.Ceil(float64(*c.AuditsNeeded)/perDay - 1e-9))
	c.AuditDays = &days
	c.Message += fmt.Sprintf(" At the pace of the last %d days' audits, that is about %d %s.", AuditPaceDays, days, plural(days, "day", "days"))
}

// Exact binomial tools.

// BinomialCDF returns P(X ≤ k) for X ~ Binomial(n, p): 1 for k ≥ n, 0 for
// k < 0, and otherwise the regularized incomplete beta I₁₋ₚ(n−k, k+1).
func BinomialCDF(k, n int, p float64) float64 {
	switch {
	case k < 0:
		return 0
	case k >= n || p <= 0:
		return 1
	case p >= 1:
		return 0
	}
	return RegularizedBeta(1-p, float64(n-k), float64(k+1))
}

// ClopperPearsonUpper returns the one-sided Clopper–Pearson upper bound at
// a confidence of a share seen k times in n trials: the p with
// P(X ≤ k; n, p) = 1−confidence, the confidence quantile of
// Beta(k+1, n−k); 1 when k ≥ n. k and n may be fractional (an effective
// count).
func ClopperPearsonUpper(k, n, confidence float64) float64 {
	if n <= 0 || k >= n {
		return 1
	}
	return BetaQuantile(confidence, k+1, n-k)
}

// ClopperPearson returns the two-sided Clopper–Pearson interval at a
// confidence of a share seen k times in n trials (k and n may be
// fractional): the (1−confidence)/2 quantile of Beta(k, n−k+1) and the
// (1+confidence)/2 quantile of Beta(k+1, n−k). For n = 0 it is [0, 1].
func ClopperPearson(k, n, confidence float64) (lower, upper float64) {
	if n <= 0 {
		return 0, 1
	}
	k = min(max(k, 0), n)
	tail := (1 - confidence) / 2
	lower, upper = 0, 1
	if k > 0 {
		lower = BetaQuantile(tail, k, n-k+1)
	}
	if k < n {
		upper = BetaQuantile(1-tail, k+1, n-k)
	}
	return lower, upper
}

// NormalQuantile returns the standard normal quantile of p in (0, 1):
// √2·erf⁻¹(2p−1).
func NormalQuantile(p float64) float64 {
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

// BetaQuantile returns the x in [0, 1] with I_x(a, b) = q, by bisection on
// RegularizedBeta to within 1e-14.
func BetaQuantile(q, a, b float64) float64 {
	lo, hi := 0.0, 1.0
	for range 200 {
		mid := (lo + hi) / 2
		if RegularizedBeta(mid, a, b) < q {
			lo = mid
		} else {
			hi = mid
		}
		if hi-lo < 1e-14 {
			break
		}
	}
	return (lo + hi) / 2
}

// RegularizedBeta returns the regularized incomplete beta function
// I_x(a, b) for a, b > 0, by the continued fraction of Numerical Recipes
// (Lentz's method), using the symmetry I_x(a, b) = 1 − I₁₋ₓ(b, a) where
// the fraction converges slowly.
func RegularizedBeta(x, a, b float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaFraction(x, a, b) / a
	}
	return 1 - front*betaFraction(1-x, b, a)/b
}

// betaFraction evaluates the continued fraction of the incomplete beta.
func betaFraction(x, a, b float64) float64 {
	const eps = 1e-15
	qab, qap, qam := a+b, a+1, a-1
	c, d := 1.0, nonzero(1-qab*x/qap)
	d = 1 / d
	h := d
	for m := 1; m <= 10_000; m++ {
		fm := float64(m)
		m2 := 2 * fm
		// Two steps of Lentz's method a term: the even one, then the odd.
		h *= lentzStep(fm*(b-fm)*x/((qam+m2)*(a+m2)), &c, &d)
		del := lentzStep(-(a+fm)*(qab+fm)*x/((a+m2)*(qap+m2)), &c, &d)
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}

// lentzStep takes the continued fraction's coefficient aa into c and d and
// returns the factor it multiplies the fraction by.
func lentzStep(aa float64, c, d *float64) float64 {
	*d = 1 / nonzero(1+aa**d)
	*c = nonzero(1 + aa/(*c))
	return *d * *c
}

// nonzero keeps v away from zero, where the fraction would divide by it.
func nonzero(v float64) float64 {
	if math.Abs(v) < 1e-300 {
		return 1e-300
	}
	return v
}

// Agreement beyond chance.

// AgreementStats is how often two raters (the agent and a person, or two
// people) gave the same verdict, and that agreement corrected for chance:
// Cohen's κ, and Gwet's AC1, which stays stable when most answers are one
// verdict, where κ collapses. A figure is nil where it is undefined (no
// pairs, or chance agreement of 1).
type AgreementStats struct {
	N     int      `json:"n"`
	Raw   *float64 `json:"raw"`
	Kappa *float64 `json:"kappa"`
	AC1   *float64 `json:"ac1"`
}

// Agreement computes AgreementStats from a confusion table (agent verdict
// × human verdict, counted in pairs; a cell may appear more than once).
// With q verdicts seen, n pairs, p_a the share on the diagonal, r_k and c_k
// the row and column shares of verdict k and π_k = (r_k + c_k)/2:
//
//	κ   = (p_a − Σ r_k·c_k) / (1 − Σ r_k·c_k)
//	AC1 = (p_a − p_e) / (1 − p_e),  p_e = Σ π_k(1 − π_k) / (q − 1)
func Agreement(cells []VerdictAgreement) AgreementStats {
	rows, cols := map[string]float64{}, map[string]float64{}
	var n, agree float64
	for _, c := range cells {
		if c.N <= 0 {
			continue
		}
		w := float64(c.N)
		n += w
		rows[c.AgentVerdict] += w
		cols[c.HumanVerdict] += w
		if c.AgentVerdict == c.HumanVerdict {
			agree += w
		}
	}
	s := AgreementStats{N: int(n)}
	if n == 0 {
		return s
	}
	pa := agree / n
	s.Raw = &pa
	verdicts := map[string]bool{}
	for v := range rows {
		verdicts[v] = true
	}
	for v := range cols {
		verdicts[v] = true
	}
	var pk, pg float64
	for v := range verdicts {
		r, c := rows[v]/n, cols[v]/n
		pk += r * c
		pi := (r + c) / 2
		pg += pi * (1 - pi)
	}
	if pk < 1 {
		kappa := (pa - pk) / (1 - pk)
		s.Kappa = &kappa
	}
	if q := len(verdicts); q > 1 {
		pe := pg / float64(q-1)
		if pe < 1 {
			ac1 := (pa - pe) / (1 - pe)
			s.AC1 = &ac1
		}
	}
	return s
}

// Strata.

// The dimensions a report is broken down by (CalibrationStratum).
const (
	StratumTaskType = "task_type"
	StratumModel    = "model"
	StratumVersion  = "version"
)

// MaxStrata bounds the strata of each dimension a report lists: those
// with the most pairs.
const MaxStrata = 20

// StratumBuckets is one stratum's pairs summed by confidence bucket, as the
// store reads them.
type StratumBuckets struct {
	Dimension string
	Value     string
	Buckets   []ConfidenceBucket
}

// CalibrationStratum is the certificate of one stratum of the report's
// pairs: one task_type, one verifier model, or one verifier version label
// (as the report's filter selects them). A new prompt or model has its own
// series here.
type CalibrationStratum struct {
	Dimension     string        `json:"dimension"`
	Value         string        `json:"value"`
	N             int           `json:"n"`
	Audits        int           `json:"audits"`
	Certification Certification `json:"certification"`
}

// Stratify certifies each stratum for the target and confidence, the
// strata of a dimension in order of pairs (most first), at most MaxStrata
// of each.
func Stratify(strata []StratumBuckets, target, confidence float64) []CalibrationStratum {
	out := make([]CalibrationStratum, 0, len(strata))
	for _, s := range strata {
		var all ConfidenceBucket
		for _, b := range s.Buckets {
			all.add(b)
		}
		out = append(out, CalibrationStratum{Dimension: s.Dimension, Value: s.Value, N: all.N, Audits: all.Audits,
			Certification: Certify(s.Buckets, target, confidence)})
	}
	slices.SortStableFunc(out, func(a, b CalibrationStratum) int {
		return cmp.Or(strings.Compare(a.Dimension, b.Dimension), b.N-a.N, strings.Compare(a.Value, b.Value))
	})
	kept, n := out[:0], map[string]int{}
	for _, s := range out {
		if n[s.Dimension] < MaxStrata {
			n[s.Dimension]++
			kept = append(kept, s)
		}
	}
	return kept
}

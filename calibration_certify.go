package arbiter

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
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
// this threshold exceeds α" is tested on the labelled answers at or above
// it; the sequence stops at the first threshold whose null it cannot
// reject, and the certified threshold is the last one rejected. With
// probability at least 1−δ, the agent's error rate at or above the
// certified threshold is at most α.
//
// Every label counts, as it was sampled. A person's decision on a routed
// task labels an answer the agent gave below the task's threshold, and
// every such answer is labelled; a blind audit labels an answer at or
// above it, and only a share r of those is (the audit rate). The labels
// of one sampling rate — its stratum: weight 1 for routed tasks (and
// audits at rate 1), 1/r for audits at rate r — are a uniform sample of
// the answers they stand for, so the errors among a stratum's n labels at
// or above a threshold bound that stratum's error rate exactly
// (Clopper–Pearson). The error rate at or above the threshold is the
// strata's rates weighted by the share of answers each stands for
// (n·weight, the Horvitz–Thompson count), so the weighted sum of the
// strata's upper bounds bounds it, when every stratum's bound holds: the
// strata split δ (Bonferroni), each in proportion to its weight, which is
// how the split minimises the bound when no label is wrong (an audit at
// rate 5% stands for twenty answers and needs most of the confidence).
// With one stratum this is the exact binomial test at δ.
//
// Never beyond the evidence. A threshold is only tested where labels
// exist: at each thousandth of confidence holding a labelled answer, the
// lowest confidence labelled in it. Below the lowest labelled confidence
// nothing is known of the agent's answers, so no threshold there is
// tested (the floor, where the evidence ends). Which thresholds are
// tested, and where the sequence starts — past those it could not certify
// even if every label were right — depend on the answers' confidences and
// how they were sampled, never on whether people agreed: the sequence is
// fixed before the labels are read, as the method requires.

// DefaultCertificationConfidence is the confidence 1−δ of a certificate
// when the reader chooses none: 95%.
const DefaultCertificationConfidence = 0.95

// CertificationPower is the power the audits-needed calculation plans for:
// the chance that the certificate is granted if the error rate seen holds.
const CertificationPower = 0.8

// CertificationMethod says in words how a threshold is certified; the
// report and the page repeat it.
const CertificationMethod = "Fixed-sequence testing (Learn then Test): thresholds are tested from the top down, at each thousandth of confidence that holds a labelled answer and never below the lowest one. People's decisions on routed tasks and blind audits both count: the labels of each sampling rate get an exact Clopper–Pearson bound, and the bounds are weighted by the share of the agent's answers each stands for, δ split between them in proportion to their weights. The certified threshold is the last one at which that bound is at most the target, with the stated confidence."

// Certification is the certified threshold of a report: the lowest
// threshold the fixed sequence reached, with what it rests on. Threshold
// is nil when none is certified; Message says why and, where more labels
// would do, AuditsNeeded says about how many.
type Certification struct {
	TargetErrorRate float64  `json:"target_error_rate"` // α
	Confidence      float64  `json:"confidence"`        // 1−δ
	Method          string   `json:"method"`
	Threshold       *float64 `json:"threshold"`
	// Coverage is the estimated share of the agent's answers at or above
	// the threshold (from the weighted pairs, as the estimate's).
	Coverage *float64 `json:"coverage"`
	// N and Errors are the labelled answers at or above the threshold
	// and how many of them a person disagreed with; Audits and Routed
	// split N into blind audits and people's decisions on routed tasks.
	// ErrorUpper is the bound on the error rate there at the confidence
	// (the strata's, weighted): at most α.
	N          int      `json:"n"`
	Errors     int      `json:"errors"`
	Audits     int      `json:"audits"`
	Routed     int      `json:"routed"`
	ErrorUpper *float64 `json:"error_upper"`
	// Evidence is the labels at or above the threshold by sampling rate,
	// with what each bounds; empty when nothing is certified.
	Evidence []EvidenceStratum `json:"evidence"`
	// Floor is where the evidence ends: the lowest confidence a label
	// covers. No threshold below it is certified or may be applied; nil
	// when nothing is labelled.
	Floor *float64 `json:"floor"`
	// AuditsNeeded, with AtThreshold, is how many more labelled answers
	// at or above that threshold would give the certificate there, with
	// the power CertificationPower, if the error rate seen holds (the
	// estimate's threshold; nil when there is none or it is certified).
	AuditsNeeded *int     `json:"audits_needed"`
	AtThreshold  *float64 `json:"at_threshold"`
	// AuditDays is about how many days of traffic would bring those
	// labels, at the pace of the last 30 days' labels at or above
	// AtThreshold (PlanAuditDays); nil when there were none.
	AuditDays *int   `json:"audit_days"`
	Message   string `json:"message"`
}

// EvidenceStratum is the labels of one sampling rate at or above a
// certified threshold: a uniform sample of the agent's answers they stand
// for, and the exact bound on those answers' error rate.
type EvidenceStratum struct {
	// SamplingRate is the chance each answer had of being labelled: 1
	// for people's decisions on routed tasks (and audits at rate 1), the
	// audit rate for blind audits.
	SamplingRate float64 `json:"sampling_rate"`
	N            int     `json:"n"`
	Errors       int     `json:"errors"`
	// Share is the share of the agent's answers at or above the
	// threshold the stratum stands for (n / SamplingRate of them).
	Share float64 `json:"share"`
	// ErrorUpper is the one-sided Clopper–Pearson upper bound of the
	// stratum's error rate at Confidence, its part of the certificate's.
	ErrorUpper float64 `json:"error_upper"`
	Confidence float64 `json:"confidence"`
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

// minRejectable returns the fewest labels of one stratum with no error
// that could reject the null at level delta for target alpha:
// ⌈ln δ / ln(1−α)⌉.
func minRejectable(alpha, delta float64) int {
	return int(math.Ceil(math.Log(delta)/math.Log1p(-alpha) - 1e-9))
}

// Evidence.

// FineBucketOf returns the thousandth a confidence falls in, 0 to 1000:
// floor(1000c + 1e-9), as ConfidenceBucketOf does for hundredths. The
// certificate tests its thresholds on this grid.
func FineBucketOf(c float64) int {
	scaled := float64(c * 1000) // rounded here, never fused with the addition
	k := int(math.Floor(scaled + 1e-9))
	return min(max(k, 0), 1000)
}

// EvidenceCell sums the labelled answers of one thousandth of confidence
// (FineBucketOf) that were labelled alike: by a blind audit or by a
// person's decision on a routed task, with one weight. The store adds
// them up in SQL; Evidence does the same in Go.
type EvidenceCell struct {
	Bucket int
	// Weight is the pairs' weight, 1/π with π the chance the answer was
	// labelled: 1 for a routed task, 1/r for an audit at rate r.
	Weight float64
	Audit  bool
	N      int
	Errors int     // those a person disagreed with
	Lowest float64 // the lowest confidence among them
}

// Evidence sums pairs into their evidence cells, in bucket order (then
// weight, routed before audits).
func Evidence(pairs []LabelledPair) []EvidenceCell {
	type key struct {
		bucket int
		weight float64
		audit  bool
	}
	by := map[key]*EvidenceCell{}
	for _, p := range pairs {
		k := key{FineBucketOf(p.Confidence), p.Weight, p.Audit}
		c := by[k]
		if c == nil {
			c = &EvidenceCell{Bucket: k.bucket, Weight: k.weight, Audit: k.audit, Lowest: p.Confidence}
			by[k] = c
		}
		c.N++
		if !p.Correct() {
			c.Errors++
		}
		c.Lowest = min(c.Lowest, p.Confidence)
	}
	out := make([]EvidenceCell, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	slices.SortFunc(out, compareCells)
	return out
}

// compareCells orders evidence cells by bucket, weight and kind.
func compareCells(a, b EvidenceCell) int {
	return cmp.Or(cmp.Compare(a.Bucket, b.Bucket), cmp.Compare(a.Weight, b.Weight), compareBool(a.Audit, b.Audit))
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// samplingStratum is the labels of one weight at or above a threshold,
// with the bound of its errors last computed (at level, for n and errors).
type samplingStratum struct {
	weight           float64
	n, errors, audit int
	boundN, boundE   int
	level, upper     float64
}

// stratifiedUpper returns the bound on the error rate at or above a
// threshold from the strata's labels there (each with n > 0), at level
// delta: Σ q_s·U_s, where q_s = n_s·w_s / Σ n·w is the share of answers
// stratum s stands for and U_s the one-sided Clopper–Pearson upper bound
// of its errors at confidence 1 − δ·w_s/Σw. With clean true, every label
// is taken as right: the best bound the labels could give. A stratum
// keeps its last bound for the next call that asks the same of it.
func stratifiedUpper(strata []samplingStratum, delta float64, clean bool) float64 {
	var mass, weights float64
	for _, s := range strata {
		mass += float64(s.n) * s.weight
		weights += s.weight
	}
	var upper float64
	for i := range strata {
		s := &strata[i]
		level := 1 - delta*s.weight/weights
		var u float64
		switch {
		case clean:
			u = 1 - math.Pow(1-level, 1/float64(s.n)) // the bound with no error, Beta(1, n)'s quantile
		case s.boundN == s.n && s.boundE == s.errors && s.level == level:
			u = s.upper
		default:
			u = ClopperPearsonUpper(float64(s.errors), float64(s.n), level)
			s.boundN, s.boundE, s.level, s.upper = s.n, s.errors, level, u
		}
		upper += float64(s.n) * s.weight / mass * u
	}
	return min(upper, 1)
}

// evidenceOf returns the strata's part in a certificate: each one's
// labels, share and bound, as stratifiedUpper last computed them.
func evidenceOf(strata []samplingStratum) []EvidenceStratum {
	var mass float64
	for _, s := range strata {
		mass += float64(s.n) * s.weight
	}
	out := make([]EvidenceStratum, 0, len(strata))
	for _, s := range strata {
		out = append(out, EvidenceStratum{SamplingRate: 1 / s.weight, N: s.n, Errors: s.errors,
			Share: float64(s.n) * s.weight / mass, ErrorUpper: s.upper, Confidence: s.level})
	}
	slices.SortFunc(out, func(a, b EvidenceStratum) int { return cmp.Compare(b.SamplingRate, a.SamplingRate) })
	return out
}

// evidenceLevels gathers the cells by thousandth: the cells of each, the
// lowest confidence labelled in it, and the weight all of them stand for.
type evidenceLevels struct {
	cells  [1001][]EvidenceCell
	lowest [1001]float64
	mass   float64
	labels int
}

func levelsOf(cells []EvidenceCell) *evidenceLevels {
	l := &evidenceLevels{}
	for _, cell := range cells {
		if cell.N <= 0 || !(cell.Weight >= 1) {
			continue
		}
		k := min(max(cell.Bucket, 0), 1000)
		if len(l.cells[k]) == 0 || cell.Lowest < l.lowest[k] {
			l.lowest[k] = cell.Lowest
		}
		l.cells[k] = append(l.cells[k], cell)
		l.mass += float64(cell.N) * cell.Weight
		l.labels += cell.N
	}
	return l
}

// walk calls visit at each thousandth that holds labels, from the top
// down, with the strata of the labels at or above it and the weight they
// stand for; visit returns false to stop.
func (l *evidenceLevels) walk(visit func(k int, strata []samplingStratum, above float64) bool) {
	var strata []samplingStratum
	var above float64
	for k := 1000; k >= 0; k-- {
		if len(l.cells[k]) == 0 {
			continue
		}
		for _, cell := range l.cells[k] {
			i := slices.IndexFunc(strata, func(s samplingStratum) bool { return s.weight == cell.Weight })
			if i < 0 {
				i = len(strata)
				strata = append(strata, samplingStratum{weight: cell.Weight})
			}
			s := &strata[i]
			s.n += cell.N
			s.errors += cell.Errors
			if cell.Audit {
				s.audit += cell.N
			}
			above += float64(cell.N) * cell.Weight
		}
		if !visit(k, strata, above) {
			return
		}
	}
}

// Certify runs the fixed sequence over the evidence (in any order; a cell
// may appear more than once) for a target error rate alpha in (0, 1) and a
// confidence in (0, 1). The thresholds it may test are, from the top down,
// the lowest labelled confidence of each thousandth that holds a label,
// less those where labels that were all right could not give a bound at
// most α. It starts at the first whose bound with no error would be at
// most α/2, which leaves room for an error or two where a start at the
// first possible threshold would stop at the first error (or, when none
// would, at the first it may test); it stops at the first whose bound
// exceeds α.
func Certify(cells []EvidenceCell, alpha, confidence float64) Certification {
	c := Certification{TargetErrorRate: alpha, Confidence: confidence, Method: CertificationMethod, Evidence: []EvidenceStratum{}}
	delta := 1 - confidence
	l := levelsOf(cells)
	for k := range l.cells {
		if len(l.cells[k]) > 0 {
			floor := l.lowest[k]
			c.Floor = &floor
			break
		}
	}
	// Where the sequence starts depends on how the answers were
	// labelled, never on whether people agreed.
	start, first := -1, -1
	l.walk(func(k int, strata []samplingStratum, _ float64) bool {
		clean := stratifiedUpper(strata, delta, true)
		if clean <= alpha && first < 0 {
			first = k
		}
		if clean <= alpha/2 {
			start = k
			return false
		}
		return true
	})
	if start < 0 {
		start = first
	}
	tested, stopped := false, -1.0
	if start >= 0 {
		l.walk(func(k int, strata []samplingStratum, above float64) bool {
			if k > start || stratifiedUpper(strata, delta, true) > alpha {
				return true // not in the sequence
			}
			tested = true
			upper := stratifiedUpper(strata, delta, false)
			if upper > alpha {
				stopped = l.lowest[k]
				return false
			}
			t, cov := l.lowest[k], above/l.mass
			c.Threshold, c.Coverage, c.ErrorUpper, c.Evidence = &t, &cov, &upper, evidenceOf(strata)
			c.N, c.Errors, c.Audits = 0, 0, 0
			for _, s := range strata {
				c.N += s.n
				c.Errors += s.errors
				c.Audits += s.audit
			}
			c.Routed = c.N - c.Audits
			return true
		})
	}
	need := minRejectable(alpha, delta)
	switch {
	case c.Threshold != nil:
		c.Message = fmt.Sprintf("At or above %s the agent is wrong at most %s of the time, with %s confidence (%s).",
			FormatThreshold(*c.Threshold), FormatShare(alpha), FormatShare(confidence), c.labelsPhrase())
	case l.labels == 0:
		c.Message = fmt.Sprintf("Not yet: nobody has labelled an answer of the agent. A person's decision on a routed task labels an answer below the threshold, a blind audit one at or above it: send tasks to people (a threshold of 1 sends them all) or set an audit rate above 0. With no error, at least %d labelled answers are needed before any threshold can be certified at %s.",
			need, FormatShare(alpha))
	case stopped >= 0:
		c.Message = fmt.Sprintf("Not yet: at or above %s the labelled answers do not show an error rate under %s with %s confidence.",
			FormatThreshold(stopped), FormatShare(alpha), FormatShare(confidence))
	case !tested:
		c.Message = fmt.Sprintf("Not yet: too few labelled answers (%d). With no error, at least %d labelled alike are needed to certify %s; audits at a low rate stand for many answers each and need more.",
			l.labels, need, FormatShare(alpha))
	}
	return c
}

// labelsPhrase says what a certificate rests on: "412 labelled answers
// (300 people's decisions on routed tasks, 112 blind audits), 3 wrong".
func (c Certification) labelsPhrase() string {
	var kinds []string
	if c.Routed > 0 {
		kinds = append(kinds, fmt.Sprintf("%d %s on routed tasks", c.Routed, plural(c.Routed, "person's decision", "people's decisions")))
	}
	if c.Audits > 0 {
		kinds = append(kinds, fmt.Sprintf("%d blind %s", c.Audits, plural(c.Audits, "audit", "audits")))
	}
	return fmt.Sprintf("%d labelled %s: %s; %d wrong", c.N, plural(c.N, "answer", "answers"), strings.Join(kinds, ", "), c.Errors)
}

// EvidenceEnds says where the evidence ends, for the page: below the
// floor nothing is labelled, so nothing is certified or applied.
func (c Certification) EvidenceEnds() string {
	if c.Floor == nil {
		return "Nobody has labelled an answer of the agent yet: no threshold can be certified or applied."
	}
	return fmt.Sprintf("The evidence ends at %s: nobody has labelled an answer of the agent below it, so no threshold below it is certified, and none below it can be applied.",
		FormatThreshold(*c.Floor))
}

// FormatThreshold writes a threshold with at least two decimals and at
// most four: "0.90", "0.973", "0.9987".
func FormatThreshold(t float64) string {
	s := strconv.FormatFloat(t, 'f', -1, 64)
	whole, frac, _ := strings.Cut(s, ".")
	switch {
	case len(frac) < 2:
		return whole + "." + frac + strings.Repeat("0", 2-len(frac))
	case len(frac) > 4:
		return strconv.FormatFloat(t, 'f', 4, 64)
	}
	return s
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
		have += byBucket[k].N
	}
	more, t := max(need-have, 1), float64(at)/100
	c.AuditsNeeded, c.AtThreshold = &more, &t
	c.Message += fmt.Sprintf(" About %d more labelled answers at or above %.2f would certify it there, if the error rate seen (%s) holds: blind audits above the policy's threshold, people's decisions below it.", more, t, FormatShare(rate))
}

// AuditPaceDays is the window whose labels set the pace of AuditDays.
const AuditPaceDays = 30

// PlanAuditDays fills c's AuditDays from the answers people labelled in
// the last AuditPaceDays days (recent, with the report's filter: blind
// audits and decisions on routed tasks) and the share of the report's
// labels at or above AtThreshold:
// ⌈AuditsNeeded / (recent / AuditPaceDays · share)⌉.
func (c *Certification) PlanAuditDays(buckets []ConfidenceBucket, recent int) {
	if c.AuditsNeeded == nil || c.AtThreshold == nil || recent <= 0 {
		return
	}
	at := int(math.Round(*c.AtThreshold * 100))
	all, above := 0, 0
	for _, b := range buckets {
		all += b.N
		if b.Bucket >= at {
			above += b.N
		}
	}
	if all == 0 || above == 0 {
		return
	}
	perDay := float64(recent) / AuditPaceDays * float64(above) / float64(all)
	days := int(math.Ceil(float64(*c.AuditsNeeded)/perDay - 1e-9))
	c.AuditDays = &days
	c.Message += fmt.Sprintf(" At the pace of the last %d days' labels, that is about %d %s.", AuditPaceDays, days, plural(days, "day", "days"))
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

// BetaQuantile returns the x in [0, 1] with I_x(a, b) = q: Newton's
// method on RegularizedBeta from the mean a/(a+b), each step kept inside
// the bracket the signs so far allow (bisecting when it would leave it),
// to within 1e-14.
func BetaQuantile(q, a, b float64) float64 {
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	lbeta := la + lb - lab
	lo, hi := 0.0, 1.0
	x := a / (a + b)
	for range 200 {
		f := RegularizedBeta(x, a, b) - q
		if f < 0 {
			lo = x
		} else {
			hi = x
		}
		if hi-lo < 1e-14 || f == 0 {
			break
		}
		density := math.Exp((a-1)*math.Log(x) + (b-1)*math.Log1p(-x) - lbeta)
		next := x - f/density
		if !(next > lo && next < hi) {
			next = (lo + hi) / 2
		}
		if math.Abs(next-x) < 1e-16 {
			break
		}
		x = next
	}
	return x
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

// StratumBuckets is one stratum's labelled answers as evidence cells, as
// the store reads them.
type StratumBuckets struct {
	Dimension string
	Value     string
	Evidence  []EvidenceCell
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
	cells := make([][]EvidenceCell, 0, len(strata))
	for _, s := range strata {
		c := CalibrationStratum{Dimension: s.Dimension, Value: s.Value}
		for _, e := range s.Evidence {
			c.N += e.N
			if e.Audit {
				c.Audits += e.N
			}
		}
		out = append(out, c)
		cells = append(cells, s.Evidence)
	}
	order := make([]int, len(out))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		a, b := out[i], out[j]
		return cmp.Or(strings.Compare(a.Dimension, b.Dimension), b.N-a.N, strings.Compare(a.Value, b.Value))
	})
	kept, n := make([]CalibrationStratum, 0, len(out)), map[string]int{}
	for _, i := range order {
		s := out[i]
		if n[s.Dimension] < MaxStrata {
			n[s.Dimension]++
			s.Certification = Certify(cells[i], target, confidence)
			kept = append(kept, s)
		}
	}
	return kept
}

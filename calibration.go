package arbiter

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Audit sampling.
//
// When the agent completes a task at or above its threshold, nobody would
// ever look at it again, so nobody would learn how often the agent is wrong
// there. An audit rate r (the account's, or the task's own from its create)
// puts a share r of those tasks in the reviewers' queue as well, blind: the
// reviewer does not see what the agent said. The task stays completed with
// the agent's verdict; the reviewer's answer is an attempt with audit true.

// The states of a task's audit (Task.AuditState).
const (
	AuditStateNone    = ""        // not chosen for audit
	AuditStateWaiting = "waiting" // chosen: in the reviewers' queue, blind
	AuditStateDone    = "done"    // a reviewer answered it
)

// AuditDraw returns the task's fixed draw in [0, 1): the first 8 bytes of
// the SHA-256 of its id, read as a big-endian unsigned 64-bit integer and
// divided by 2^64. Only the integer's top 53 bits are kept, so the quotient
// is exact in a float64 and never rounds up to 1. SHA-256 spreads any ids,
// random or not, evenly over [0, 1), and the same id always draws the same
// number, in every process and on every store.
func AuditDraw(taskID string) float64 {
	sum := sha256.Sum256([]byte(taskID))
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

// ChosenForAudit reports whether a task the agent completed above its
// threshold is also put in the reviewers' queue: its draw is below the audit
// rate. The choice is deterministic, so the same task is always chosen or
// not; a rate of 0 chooses none and a rate of 1 chooses all. The store
// applies this rule as AuditDraw(id) < rate in its SQL, with the draw
// computed here.
func ChosenForAudit(taskID string, rate float64) bool {
	return AuditDraw(taskID) < rate
}

// DemoAuditRate is the audit rate of the demo account's seeded history.
const DemoAuditRate = 0.25

// CheckAuditRate returns EINVALID unless rate is a share from 0 to 1.
func CheckAuditRate(rate float64) error {
	if math.IsNaN(rate) || rate < 0 || rate > 1 {
		return errAuditRate
	}
	return nil
}

var errAuditRate = FieldErrorf("audit_rate", "audit_rate must be a number from 0 to 1: the share of the agent's confident answers a person checks.")

// ParseAuditRate reads an audit rate typed in a form: a share such as 0.05,
// or a percentage such as "5%". Returns EINVALID otherwise.
func ParseAuditRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	percent := strings.HasSuffix(s, "%")
	s = strings.TrimSpace(strings.TrimSuffix(s, "%"))
	if s == "" || len(s) > 32 || strings.Trim(s, "0123456789.") != "" {
		return 0, errAuditRate // plain decimals only: no signs, exponents or hex
	}
	rate, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errAuditRate
	}
	if percent {
		rate /= 100
	}
	if err := CheckAuditRate(rate); err != nil {
		return 0, err
	}
	return rate, nil
}

// Labelled pairs.

// LabelledPair is one task where the agent gave a verdict with a confidence
// and a person later gave a verdict: because the agent's confidence was
// below the threshold and the task was routed to a human, or because it was
// chosen for audit. Its weight makes the pairs an unbiased sample of the
// agent's answers: 1 for a routed task (every one of them is labelled), and
// 1/r for an audit at rate r (one in 1/r of those tasks is labelled, so each
// stands for 1/r of them). This is the Horvitz–Thompson estimator.
type LabelledPair struct {
	TaskID    string
	AccountID string
	TaskType  string
	Source    string
	Model     string // the agent's model; "" when it named none
	Version   string // the agent attempt's version label; "" when none was set
	// Verifier names the verifier of the cascade whose answer the pair
	// labels (VerifierPairsOf); "" for the agent tier's pair.
	Verifier     string
	Confidence   float64
	AgentVerdict string
	HumanVerdict string
	Audit        bool
	Weight       float64
	CreatedAt    Timestamp // the task's
	LabelledAt   Timestamp // when the person answered
}

// Correct reports whether the agent's verdict is the person's.
func (p LabelledPair) Correct() bool { return p.AgentVerdict == p.HumanVerdict }

// Bucket returns the pair's confidence bucket (ConfidenceBucketOf).
func (p LabelledPair) Bucket() int { return ConfidenceBucketOf(p.Confidence) }

// ConfidenceBucketOf returns the hundredth a confidence falls in, 0 to 100:
// floor(100c + 1e-9), so that a confidence written as 0.57 falls in bucket
// 57 although 100 × 0.57 is 56.99999999999999 in floating point. A task of
// bucket k is one the agent decides at every threshold up to k/100. The
// reliability diagram's bin of a bucket is min(k/10, 9) (integer division).
func ConfidenceBucketOf(c float64) int {
	scaled := float64(c * 100) // rounded here, never fused with the addition
	k := int(math.Floor(scaled + 1e-9))
	return min(max(k, 0), 100)
}

// LabelledPairOf returns the pair a person's attempt h on t makes, with
// the agent's last answer that had a verdict and a confidence; ok is false
// when the agent gave none (it declined, or every call failed). An audit's
// weight is 1/t's audit rate; a routed task's is 1.
func LabelledPairOf(t *Task, h Attempt) (_ LabelledPair, ok bool) {
	if h.Verdict == nil {
		return LabelledPair{}, false
	}
	var agent *Attempt
	for i := len(t.Attempts) - 1; i >= 0; i-- {
		if a := &t.Attempts[i]; a.Tier == TierAgent && a.Verdict != nil && a.Confidence != nil {
			agent = a
			break
		}
	}
	if agent == nil {
		return LabelledPair{}, false
	}
	p := LabelledPair{
		TaskID: t.ID, AccountID: t.AccountID, TaskType: t.TaskType, Source: t.Source,
		Confidence: *agent.Confidence, AgentVerdict: *agent.Verdict, HumanVerdict: *h.Verdict,
		Audit: h.Audit, Weight: 1, CreatedAt: t.CreatedAt, LabelledAt: h.StartedAt,
	}
	if agent.Model != nil {
		p.Model = *agent.Model
	}
	if agent.Version != nil {
		p.Version = *agent.Version
	}
	if h.Audit {
		if t.AuditRate == nil || *t.AuditRate <= 0 {
			return LabelledPair{}, false
		}
		p.Weight = 1 / *t.AuditRate
	}
	return p, true
}

// The estimator.

// ConfidenceBucket sums the labelled pairs of one confidence bucket (0 to
// 100, see ConfidenceBucketOf). The store adds them up in SQL; Bucketize
// does the same in Go. y is 1 when the agent was right and 0 when not; w
// is the pair's weight.
type ConfidenceBucket struct {
	Bucket         int
	N              int     // pairs
	Audits         int     // pairs from audits
	AuditsDisagree int     // audits where the person disagreed
	W              float64 // Σ w
	W2             float64 // Σ w²
	WCorrect       float64 // Σ w·y
	WConfidence    float64 // Σ w·c
	WSquaredError  float64 // Σ w·(c − y)²
}

// Bucketize sums pairs into their confidence buckets, in bucket order.
func Bucketize(pairs []LabelledPair) []ConfidenceBucket {
	by := map[int]*ConfidenceBucket{}
	for _, p := range pairs {
		k := p.Bucket()
		b := by[k]
		if b == nil {
			b = &ConfidenceBucket{Bucket: k}
			by[k] = b
		}
		y := 0.0
		if p.Correct() {
			y = 1
		}
		b.N++
		if p.Audit {
			b.Audits++
			if y == 0 {
				b.AuditsDisagree++
			}
		}
		b.W += p.Weight
		b.W2 += p.Weight * p.Weight
		b.WCorrect += p.Weight * y
		b.WConfidence += p.Weight * p.Confidence
		b.WSquaredError += p.Weight * (p.Confidence - y) * (p.Confidence - y)
	}
	out := make([]ConfidenceBucket, 0, len(by))
	for _, k := range slices.Sorted(maps.Keys(by)) {
		out = append(out, *by[k])
	}
	return out
}

// add sums b into s.
func (s *ConfidenceBucket) add(b ConfidenceBucket) {
	s.N += b.N
	s.Audits += b.Audits
	s.AuditsDisagree += b.AuditsDisagree
	s.W += b.W
	s.W2 += b.W2
	s.WCorrect += b.WCorrect
	s.WConfidence += b.WConfidence
	s.WSquaredError += b.WSquaredError
}

// effectiveN is Kish's effective sample size of weighted pairs,
// (Σw)² / Σw²: the number of equally weighted pairs that would estimate a
// share as precisely. With equal weights it is the count.
func (s ConfidenceBucket) effectiveN() float64 {
	if s.W2 == 0 {
		return 0
	}
	return s.W * s.W / s.W2
}

// WilsonZ is the normal quantile of the 95% intervals: 1.959963984540054.
const WilsonZ = 1.959963984540054

// WilsonInterval returns the Wilson score interval at 95% of a share p
// observed on n trials (n may be an effective, fractional count).
func WilsonInterval(p, n float64) (lower, upper float64) { return WilsonIntervalZ(p, n, WilsonZ) }

// WilsonIntervalZ returns the Wilson score interval of a share p observed
// on n trials with the normal quantile z:
// (p + z²/2n ± z·√(p(1−p)/n + z²/4n²)) / (1 + z²/n). For n = 0 it is
// [0, 1].
func WilsonIntervalZ(p, n, z float64) (lower, upper float64) {
	if n <= 0 {
		return 0, 1
	}
	z2 := z * z
	center := p + z2/(2*n)
	spread := z * math.Sqrt(p*(1-p)/n+z2/(4*n*n))
	den := 1 + z2/n
	return max(0, (center-spread)/den), min(1, (center+spread)/den)
}

// IntervalZ returns the normal quantile of a two-sided interval at a
// confidence: Φ⁻¹((1 + confidence)/2), WilsonZ at 95%.
func IntervalZ(confidence float64) float64 {
	if confidence == 0.95 {
		return WilsonZ
	}
	return NormalQuantile((1 + confidence) / 2)
}

// DefaultTargetErrorRate is the error rate the recommendation aims under
// when the reader chooses none: 2%.
const DefaultTargetErrorRate = 0.02

// CalibrationBins is the number of bins of the reliability diagram.
const CalibrationBins = 10

// maxAuditsNeeded bounds the search for how many more audits would be
// needed: past it the answer is "too many to say".
const maxAuditsNeeded = 1_000_000

// Calibration is the report on how well the agent's confidence predicts
// that a person would agree with it, computed from weighted labelled pairs
// by Calibrate. Shares and rates are in [0, 1]; a figure without data is
// nil.
type Calibration struct {
	N              int     `json:"n"`               // labelled pairs
	Audits         int     `json:"audits"`          // of them from audits
	AuditsDisagree int     `json:"audits_disagree"` // audits where the person disagreed
	Weight         float64 `json:"weight"`          // Σ w: the agent's answers the pairs stand for

	// ECE is the expected calibration error: Σ over the bins of
	// (W_bin / W) · |accuracy − mean confidence|. MCE is the largest
	// |accuracy − mean confidence| of a bin with pairs. Brier is the
	// weighted mean of (c − y)².
	ECE   *float64 `json:"ece"`
	MCE   *float64 `json:"mce"`
	Brier *float64 `json:"brier"`

	Bins         []ReliabilityBin    `json:"bins"`
	RiskCoverage []RiskCoveragePoint `json:"risk_coverage"`
	// Recommendation is the estimate: the lowest threshold whose Wilson
	// bound looks under the target. Certification is the threshold the
	// fixed sequence certifies (calibration_certify.go), and Feasibility
	// says whether any threshold can meet the target.
	Recommendation Recommendation `json:"recommendation"`
	Certification  Certification  `json:"certification"`
	Feasibility    Feasibility    `json:"feasibility"`
}

// ReliabilityBin is one bin of the reliability diagram: the pairs whose
// confidence is in [Lower, Upper) (the last bin includes 1).
type ReliabilityBin struct {
	Lower          float64  `json:"lower"`
	Upper          float64  `json:"upper"`
	N              int      `json:"n"`
	Weight         float64  `json:"weight"`
	MeanConfidence *float64 `json:"mean_confidence"` // Σ w·c / Σ w
	Accuracy       *float64 `json:"accuracy"`        // Σ w·y / Σ w
	// WilsonLower and WilsonUpper bound the accuracy at 95%, with the
	// bin's effective number of pairs.
	WilsonLower *float64 `json:"wilson_lower"`
	WilsonUpper *float64 `json:"wilson_upper"`
	// ClopperPearsonLower and ClopperPearsonUpper are the exact interval
	// at 95%, with the same effective number of pairs.
	ClopperPearsonLower *float64 `json:"clopper_pearson_lower"`
	ClopperPearsonUpper *float64 `json:"clopper_pearson_upper"`
}

// RiskCoveragePoint is what a threshold would give: the share of the
// agent's answers at or above it (coverage: what the agent would decide
// alone) and the estimated error rate among those, with its upper 95%
// bound (the Wilson interval's upper end, with their effective number).
type RiskCoveragePoint struct {
	Threshold  float64  `json:"threshold"`
	N          int      `json:"n"`
	Coverage   float64  `json:"coverage"`
	ErrorRate  *float64 `json:"error_rate"`
	ErrorUpper *float64 `json:"error_upper"`
}

// Recommendation is the threshold to use for a target error rate: the
// lowest threshold (in hundredths) whose error's upper 95% bound is below
// the target, and the automation rate (coverage) it gives. When no
// threshold qualifies, Threshold is nil and Message says why; when more
// audits would help, MoreAuditsNeeded says about how many, at the threshold
// where the fewest would do, if the error rate seen there holds.
type Recommendation struct {
	TargetErrorRate  float64  `json:"target_error_rate"`
	Threshold        *float64 `json:"threshold"`
	AutomationRate   *float64 `json:"automation_rate"`
	ErrorRate        *float64 `json:"error_rate"`
	ErrorUpper       *float64 `json:"error_upper"`
	MoreAuditsNeeded *int     `json:"more_audits_needed"`
	// AtThreshold is where MoreAuditsNeeded counts the audits: pairs with
	// a confidence at or above it.
	AtThreshold *float64 `json:"at_threshold"`
	Message     string   `json:"message"`
}

// Calibrate computes the report from the pairs summed by confidence bucket
// (in any order; a bucket may appear more than once) for a target error
// rate in (0, 1), its estimates at a confidence in (0, 1), certifying a
// threshold at that confidence from the same pairs as evidence cells
// (Certify).
func Calibrate(buckets []ConfidenceBucket, evidence []EvidenceCell, target, confidence float64) Calibration {
	var byBucket [101]ConfidenceBucket
	var all ConfidenceBucket
	for _, b := range buckets {
		k := min(max(b.Bucket, 0), 100)
		byBucket[k].add(b)
		all.add(b)
	}
	c := Calibration{N: all.N, Audits: all.Audits, AuditsDisagree: all.AuditsDisagree, Weight: all.W,
		Bins: make([]ReliabilityBin, CalibrationBins), RiskCoverage: make([]RiskCoveragePoint, 0, 101)}

	// The reliability diagram: bucket k is in bin min(k/10, 9).
	var bins [CalibrationBins]ConfidenceBucket
	for k := range byBucket {
		bins[min(k/10, CalibrationBins-1)].add(byBucket[k])
	}
	var ece, mce float64
	for i, s := range bins {
		bin := ReliabilityBin{Lower: float64(i) / CalibrationBins, Upper: float64(i+1) / CalibrationBins, N: s.N, Weight: s.W}
		if s.N > 0 && s.W > 0 {
			conf, acc := s.WConfidence/s.W, s.WCorrect/s.W
			n := s.effectiveN()
			lo, hi := WilsonInterval(acc, n)
			cpLo, cpHi := ClopperPearson(acc*n, n, 0.95)
			bin.MeanConfidence, bin.Accuracy, bin.WilsonLower, bin.WilsonUpper = &conf, &acc, &lo, &hi
			bin.ClopperPearsonLower, bin.ClopperPearsonUpper = &cpLo, &cpHi
			gap := math.Abs(acc - conf)
			ece += s.W / all.W * gap
			mce = max(mce, gap)
		}
		c.Bins[i] = bin
	}
	if all.N > 0 && all.W > 0 {
		brier := all.WSquaredError / all.W
		c.ECE, c.MCE, c.Brier = &ece, &mce, &brier
	}

	// The risk–coverage curve, threshold by threshold from 1 down, and the
	// lowest threshold that meets the target, with intervals at the
	// confidence asked for.
	z := IntervalZ(confidence)
	var above ConfidenceBucket
	points := make([]RiskCoveragePoint, 101)
	for k := 100; k >= 0; k-- {
		above.add(byBucket[k])
		p := RiskCoveragePoint{Threshold: float64(k) / 100, N: above.N}
		if above.N > 0 && above.W > 0 {
			p.Coverage = above.W / all.W
			rate := 1 - above.WCorrect/above.W
			rate = max(rate, 0)
			_, hi := WilsonIntervalZ(rate, above.effectiveN(), z)
			p.ErrorRate, p.ErrorUpper = &rate, &hi
		}
		points[k] = p
	}
	c.RiskCoverage = points
	c.Recommendation = recommend(points, byBucket, target, confidence)
	c.Certification = Certify(evidence, target, confidence)
	// The threshold the estimate points at: its recommendation, or where
	// it says more audits would give one.
	if at := cmp.Or(c.Recommendation.Threshold, c.Recommendation.AtThreshold); at != nil {
		k := int(math.Round(*at * 100))
		if rate := points[k].ErrorRate; rate != nil {
			c.Certification.planAudits(byBucket, k, *rate)
		}
	}
	var mu *float64
	if all.N > 0 && all.W > 0 {
		m := max(1-all.WCorrect/all.W, 0)
		mu = &m
	}
	c.Feasibility = CheckFeasibility(mu, target)
	return c
}

// recommend picks the lowest threshold whose upper bound (at confidence)
// is below target, or says what is missing.
func recommend(points []RiskCoveragePoint, byBucket [101]ConfidenceBucket, target, confidence float64) Recommendation {
	r := Recommendation{TargetErrorRate: target}
	z := IntervalZ(confidence)
	for _, p := range points {
		if p.ErrorUpper != nil && *p.ErrorUpper < target {
			threshold, coverage := p.Threshold, p.Coverage
			r.Threshold, r.AutomationRate, r.ErrorRate, r.ErrorUpper = &threshold, &coverage, p.ErrorRate, p.ErrorUpper
			r.Message = fmt.Sprintf("At a threshold of %.2f the agent decides %s of tasks alone, with an estimated error rate of %s (at most %s at %s confidence), under the %s target.",
				threshold, FormatShare(coverage), FormatShare(*p.ErrorRate), FormatShare(*p.ErrorUpper), FormatShare(confidence), FormatShare(target))
			return r
		}
	}
	// No threshold qualifies: where would the fewest more pairs do, if the
	// error rate seen there held?
	best, bestAt, seen := 0, -1, false
	var above ConfidenceBucket
	for k := 100; k >= 0; k-- {
		above.add(byBucket[k])
		if above.N == 0 || above.W == 0 {
			continue
		}
		seen = true
		rate := max(1-above.WCorrect/above.W, 0)
		need, ok := pairsNeeded(rate, target, z)
		if !ok {
			continue
		}
		more := max(int(math.Ceil(float64(need)-above.effectiveN()-1e-9)), 1)
		if bestAt < 0 || more < best {
			best, bestAt = more, k
		}
	}
	switch {
	case !seen:
		need, _ := pairsNeeded(0, target, z)
		r.MoreAuditsNeeded = &need
		r.Message = fmt.Sprintf("Not enough data yet: there are no labelled pairs. With no errors, at least %d audited tasks are needed before any threshold can be shown to keep the error rate under %s; set an audit rate above 0 to collect them.",
			need, FormatShare(target))
	case bestAt < 0:
		r.Message = fmt.Sprintf("The agent's estimated error rate is at or above the %s target at every threshold, or too close to it to tell; more audits will not change that. Choose a higher target, or improve the verifier.",
			FormatShare(target))
	default:
		at := float64(bestAt) / 100
		rate := points[bestAt].ErrorRate
		r.MoreAuditsNeeded, r.AtThreshold, r.ErrorRate, r.ErrorUpper = &best, &at, rate, points[bestAt].ErrorUpper
		r.Message = fmt.Sprintf("Not enough data yet to recommend a threshold for a %s error rate: about %d more audited tasks with a confidence of at least %.2f are needed, if the agent's error rate there stays at %s.",
			FormatShare(target), best, at, FormatShare(*rate))
	}
	return r
}

// pairsNeeded returns the smallest number of pairs n for which the upper
// end of the Wilson interval (with the normal quantile z) of an error
// rate observed at rate is below target; ok is false when no n up to
// maxAuditsNeeded does.
func pairsNeeded(rate, target, z float64) (n int, ok bool) {
	below := func(n int) bool { _, hi := WilsonIntervalZ(rate, float64(n), z); return hi < target }
	if !below(maxAuditsNeeded) {
		return 0, false
	}
	lo, hi := 0, maxAuditsNeeded // below(hi) holds; below(lo) does not (n = 0 gives 1)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if below(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, true
}

// FormatShare writes a share as a percentage with up to one decimal:
// "2%", "0.8%", "64.5%".
func FormatShare(x float64) string {
	s := strconv.FormatFloat(math.Round(x*1000)/10, 'f', -1, 64)
	return s + "%"
}

// The report's filter and service.

// MaxCalibrationPairs bounds the labelled pairs one report reads: the
// newest ones, by the task's creation, when more match.
const MaxCalibrationPairs = 50_000

// CalibrationFilter selects the labelled pairs of a report. Empty fields
// match every pair; the labels match exactly.
type CalibrationFilter struct {
	TaskType string
	Source   string
	Model    string
	// Version is the verifier version label of the agent's answer
	// (Attempt.Version); a version no pair has selects none.
	Version string
	// Verifier, when set, selects the answers of one verifier of the
	// cascade (VerifierPairsOf): its own certificate, over the tasks that
	// reached it. Unset, the report is the agent tier's as a whole.
	Verifier string
	// CreatedAfter and CreatedBefore bound the task's created_at, both
	// exclusive.
	CreatedAfter, CreatedBefore *Timestamp
	// TargetErrorRate is the recommendation's target, in (0, 1).
	TargetErrorRate float64
	// Confidence is the certificate's confidence 1−δ, in (0, 1).
	Confidence float64
}

// calibrationParameters are the query parameters of GET /v1/calibration
// and of the dashboard's report.
var calibrationParameters = []string{"task_type", "source", "model", "version", "verifier", "created_after", "created_before", "target_error_rate", "confidence"}

// ParseCalibrationQuery reads the query of a calibration report: task_type,
// source, model, version, verifier (a verifier of the cascade: its own
// report), created_after, created_before (epoch seconds, exclusive)
// target_error_rate (a share in (0, 1), default 0.02, or a percentage
// such as "2%") and confidence (the same, default 0.95), each at most once. Empty values are left out, as an HTML
// form sends them. Every failure, an unknown parameter among them, is an
// EINVALID *Error naming the parameter.
func ParseCalibrationQuery(rawQuery string) (CalibrationFilter, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return CalibrationFilter{}, Errorf(EINVALID, "The query string could not be read; escape it as a URL query.")
	}
	f := CalibrationFilter{TargetErrorRate: DefaultTargetErrorRate, Confidence: DefaultCertificationConfidence}
	for _, name := range slices.Sorted(maps.Keys(q)) {
		values := q[name]
		if !slices.Contains(calibrationParameters, name) {
			return CalibrationFilter{}, Errorf(EINVALID, "%.64q is not a parameter of the calibration report; it takes %s.", name, strings.Join(calibrationParameters, ", "))
		} else if len(values) != 1 {
			return CalibrationFilter{}, FieldErrorf(name, "%s may be given once.", name)
		}
		v := values[0]
		if v == "" {
			continue
		}
		switch name {
		case "task_type", "source", "model", "version":
			if utf8.RuneCountInString(v) > MaxLabelChars || !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
				return CalibrationFilter{}, FieldErrorf(name, "%s must be valid text of at most %d characters.", name, MaxLabelChars)
			}
			switch name {
			case "task_type":
				f.TaskType = v
			case "source":
				f.Source = v
			case "version":
				f.Version = v
			default:
				f.Model = v
			}
		case "verifier":
			if err := CheckVerifierName(v); err != nil {
				return CalibrationFilter{}, asField("verifier", err)
			}
			f.Verifier = v
		case "created_after", "created_before":
			ts, err := parseEpochSeconds(name, v)
			if err != nil {
				return CalibrationFilter{}, err
			}
			if name == "created_after" {
				f.CreatedAfter = &ts
			} else {
				f.CreatedBefore = &ts
			}
		case "target_error_rate":
			rate, err := ParseAuditRate(v)
			if err != nil || rate <= 0 || rate >= 1 {
				return CalibrationFilter{}, FieldErrorf("target_error_rate", "target_error_rate must be a share between 0 and 1, such as 0.02 (or 2%%).")
			}
			f.TargetErrorRate = rate
		case "confidence":
			c, err := ParseAuditRate(v)
			if err != nil || c < 0.5 || c >= 1 {
				return CalibrationFilter{}, FieldErrorf("confidence", "confidence must be a share from 0.5 to below 1, such as 0.95 (or 95%%).")
			}
			f.Confidence = c
		}
	}
	return f, nil
}

// Query returns the filter as a URL query ParseCalibrationQuery reads back,
// leaving out what is empty or the default.
func (f CalibrationFilter) Query() url.Values {
	q := url.Values{}
	for _, p := range []struct{ name, value string }{
		{"task_type", f.TaskType}, {"source", f.Source}, {"model", f.Model}, {"version", f.Version},
		{"verifier", f.Verifier},
	} {
		if p.value != "" {
			q.Set(p.name, p.value)
		}
	}
	if f.CreatedAfter != nil {
		q.Set("created_after", string(f.CreatedAfter.AppendJSON(nil)))
	}
	if f.CreatedBefore != nil {
		q.Set("created_before", string(f.CreatedBefore.AppendJSON(nil)))
	}
	if f.TargetErrorRate != 0 && f.TargetErrorRate != DefaultTargetErrorRate {
		q.Set("target_error_rate", strconv.FormatFloat(f.TargetErrorRate, 'f', -1, 64))
	}
	if f.Confidence != 0 && f.Confidence != DefaultCertificationConfidence {
		q.Set("confidence", strconv.FormatFloat(f.Confidence, 'f', -1, 64))
	}
	return q
}

// VerdictAgreement is one cell of the confusion table: how many pairs had
// this agent verdict and this human verdict, and the weight they carry.
type VerdictAgreement struct {
	AgentVerdict string  `json:"agent_verdict"`
	HumanVerdict string  `json:"human_verdict"`
	N            int     `json:"n"`
	Weight       float64 `json:"weight"`
}

// MaxConfusionCells bounds the confusion table's cells, the most frequent
// first.
const MaxConfusionCells = 400

// AuditDisagreement is an audit where the person disagreed with the agent,
// flagged in the report.
type AuditDisagreement struct {
	TaskID       string    `json:"task_id"`
	AgentVerdict string    `json:"agent_verdict"`
	Confidence   float64   `json:"confidence"`
	HumanVerdict string    `json:"human_verdict"`
	LabelledAt   Timestamp `json:"labelled_at"`
}

// MaxListedDisagreements bounds the audit disagreements a report lists,
// the newest first.
const MaxListedDisagreements = 20

// CalibrationData is what the store reads for a report: the pairs summed
// by bucket, the confusion table, the latest audit disagreements, and how
// many audits wait for a reviewer.
type CalibrationData struct {
	Buckets []ConfidenceBucket
	// Evidence is the same pairs as evidence cells, for the certificate.
	Evidence []EvidenceCell
	// Strata are the same pairs as evidence cells per task_type, per
	// verifier model and per verifier version.
	Strata        []StratumBuckets
	Confusion     []VerdictAgreement
	Disagreements []AuditDisagreement
	AuditsWaiting int
	// RecentLabels counts the pairs f selects whose answer a person
	// labelled in the last AuditPaceDays days.
	RecentLabels int
	// Drifts are the account's open crossings of an audited error rate
	// above its policy's target (NextDrift) that concern the report: its
	// task type's policy's, or every policy's for a report of every
	// type.
	Drifts []Drift
	// Cascade is who decided the tasks of the report's window, what the
	// verifiers cost, and the audits of their decisions (ComposeCascade).
	Cascade CascadeData
	// Capped is true when MaxCalibrationPairs pairs or more matched; the
	// newest were read.
	Capped bool
	// ComputedAt is when the pairs were read: a store may keep the data
	// of a report for a short while.
	ComputedAt Timestamp
}

// CalibrationService reads the labelled pairs of an account.
type CalibrationService interface {
	// CalibrationData reads, for the account's pairs that f selects (at
	// most MaxCalibrationPairs, the newest), the sums by confidence
	// bucket, the confusion table (at most MaxConfusionCells cells), the
	// latest audit disagreements (at most MaxListedDisagreements) and how
	// many audits are waiting.
	CalibrationData(ctx context.Context, accountID string, f CalibrationFilter) (CalibrationData, error)

	// AuditRate returns the account's audit rate.
	AuditRate(ctx context.Context, accountID string) (float64, error)

	// SeedDemoHistory stores the demo account's seeded history of
	// labelled pairs unless it is there; cheap when it is.
	SeedDemoHistory(ctx context.Context) error

	// CalibrationDrifts returns the account's open crossings of an
	// audited error rate above its policy's target (NextDrift), by
	// policy.
	CalibrationDrifts(ctx context.Context, accountID string) ([]Drift, error)

	// SetAuditRate sets the account's audit rate, which applies to the
	// tasks the agent completes from then on unless their create set one.
	// Returns EINVALID for a rate CheckAuditRate refuses and ENOTFOUND for
	// an unknown account.
	SetAuditRate(ctx context.Context, accountID string, rate float64) error
}

// CalibrationReport is the report of GET /v1/calibration and the dashboard's
// /calibration page: the estimator's figures with the table and the flags.
type CalibrationReport struct {
	Calibration
	Capped        bool             `json:"capped"`
	AuditsWaiting int              `json:"audits_waiting"`
	Agreement     []VerdictSummary `json:"agreement"`
	// AgentPerson is the agent × person agreement over the confusion
	// table: raw, Cohen's κ and Gwet's AC1.
	AgentPerson AgreementStats `json:"agent_person"`
	// Drift is the first of Drifts, or nil.
	Drift *Drift `json:"drift"`
	// Drifts are the open crossings (NextDrift) of the policies the
	// report concerns.
	Drifts []Drift `json:"drifts"`
	// Strata certify each task_type, verifier model and verifier version
	// apart.
	Strata        []CalibrationStratum `json:"strata"`
	Confusion     []VerdictAgreement   `json:"confusion"`
	Disagreements []AuditDisagreement  `json:"disagreements"`
	// Cascade is the composition of the report's window (each verifier,
	// people, the fallback), each verifier's cost per decided task, its
	// drift alarm, and the bound on the agent tier's error.
	Cascade CascadeReport `json:"cascade"`
	// ComputedAt is when the store read the pairs; a report may be kept
	// and answered again for a short while.
	ComputedAt Timestamp `json:"computed_at"`
}

// VerdictSummary is the agreement on one agent verdict: how many pairs the
// agent gave it in, and the weighted share of them a person agreed with.
type VerdictSummary struct {
	AgentVerdict string  `json:"agent_verdict"`
	N            int     `json:"n"`
	Agreement    float64 `json:"agreement"`
}

// NewCalibrationReport computes the report from the store's data for a
// target error rate and a certificate's confidence.
func NewCalibrationReport(d CalibrationData, target, confidence float64) CalibrationReport {
	r := CalibrationReport{Calibration: Calibrate(d.Buckets, d.Evidence, target, confidence), Capped: d.Capped, AuditsWaiting: d.AuditsWaiting,
		AgentPerson: Agreement(d.Confusion), Strata: Stratify(d.Strata, target, confidence), Drifts: d.Drifts,
		Confusion: d.Confusion, Disagreements: d.Disagreements, Agreement: []VerdictSummary{}, ComputedAt: d.ComputedAt,
		Cascade: ComposeCascade(d.Cascade, target, confidence)}
	r.Certification.PlanAuditDays(d.Buckets, d.RecentLabels)
	if len(r.Drifts) > 0 {
		r.Drift = &r.Drifts[0]
	} else {
		r.Drifts = []Drift{}
	}
	if r.Confusion == nil {
		r.Confusion = []VerdictAgreement{}
	}
	if r.Disagreements == nil {
		r.Disagreements = []AuditDisagreement{}
	}
	type sums struct {
		n        int
		w, agree float64
	}
	by := map[string]*sums{}
	for _, cell := range d.Confusion {
		s := by[cell.AgentVerdict]
		if s == nil {
			s = &sums{}
			by[cell.AgentVerdict] = s
		}
		s.n += cell.N
		s.w += cell.Weight
		if cell.AgentVerdict == cell.HumanVerdict {
			s.agree += cell.Weight
		}
	}
	for _, v := range slices.Sorted(maps.Keys(by)) {
		s := by[v]
		share := 0.0
		if s.w > 0 {
			share = s.agree / s.w
		}
		r.Agreement = append(r.Agreement, VerdictSummary{AgentVerdict: v, N: s.n, Agreement: share})
	}
	return r
}

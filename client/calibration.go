package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// CalibrationOptions select the labelled pairs of a calibration report and
// its target. Zero fields match every pair.
type CalibrationOptions struct {
	// TaskType, Source, Model and Version keep the pairs of tasks with
	// exactly this label, or whose verifier answer came from this model or
	// carried this version label (ARBITER_AGENT_VERSION).
	TaskType, Source, Model, Version string
	// CreatedAfter and CreatedBefore keep the pairs of tasks created
	// strictly between them.
	CreatedAfter, CreatedBefore time.Time
	// TargetErrorRate is the error rate the recommendation aims under,
	// between 0 and 1 (zero: the server's default, 0.02).
	TargetErrorRate float64
	// Confidence is the certificate's confidence, from 0.5 to below 1
	// (zero: the server's default, 0.95).
	Confidence float64
}

func (o CalibrationOptions) query() string {
	q := url.Values{}
	for _, p := range []struct{ name, value string }{{"task_type", o.TaskType}, {"source", o.Source}, {"model", o.Model}, {"version", o.Version}} {
		if p.value != "" {
			q.Set(p.name, p.value)
		}
	}
	if !o.CreatedAfter.IsZero() {
		q.Set("created_after", epochString(o.CreatedAfter))
	}
	if !o.CreatedBefore.IsZero() {
		q.Set("created_before", epochString(o.CreatedBefore))
	}
	if o.TargetErrorRate != 0 {
		q.Set("target_error_rate", strconv.FormatFloat(o.TargetErrorRate, 'f', -1, 64))
	}
	if o.Confidence != 0 {
		q.Set("confidence", strconv.FormatFloat(o.Confidence, 'f', -1, 64))
	}
	return q.Encode()
}

// CalibrationReport is how well the verifier's confidence predicts that a
// person agrees with it, from the account's labelled pairs: tasks the
// verifier answered with a confidence that a person then decided, routed
// below the threshold (weight 1) or audited (weight 1/audit rate). Shares
// are from 0 to 1; a figure without data is nil. See docs/calibration.md
// for how to read it.
type CalibrationReport struct {
	N              int     `json:"n"`
	Audits         int     `json:"audits"`
	AuditsDisagree int     `json:"audits_disagree"`
	Weight         float64 `json:"weight"`
	// ECE is the expected calibration error, MCE the largest gap of a
	// bin, Brier the weighted mean squared error of the confidence.
	ECE            *float64            `json:"ece"`
	MCE            *float64            `json:"mce"`
	Brier          *float64            `json:"brier"`
	Bins           []ReliabilityBin    `json:"bins"`
	RiskCoverage   []RiskCoveragePoint `json:"risk_coverage"`
	Recommendation Recommendation      `json:"recommendation"`
	// Certification is the certified threshold; Feasibility says whether
	// the target can be met at all; AgentPerson is the agreement of the
	// verifier and people beyond chance.
	Certification Certification  `json:"certification"`
	Feasibility   Feasibility    `json:"feasibility"`
	AgentPerson   AgreementStats `json:"agent_person"`
	// Drift is the first of Drifts, or nil.
	Drift *Drift `json:"drift"`
	// Drifts are the open calibration drifts of the policies the report
	// concerns: the latest blind audits under a policy show the verifier
	// wrong more often than the policy's target.
	Drifts []Drift `json:"drifts"`
	// Strata certify each task_type and each verifier model apart.
	Strata []struct {
		Dimension     string        `json:"dimension"` // "task_type" or "model"
		Value         string        `json:"value"`
		N             int           `json:"n"`
		Audits        int           `json:"audits"`
		Certification Certification `json:"certification"`
	} `json:"strata"`
	// Capped is true when only the newest 50,000 pairs were counted.
	Capped        bool `json:"capped"`
	AuditsWaiting int  `json:"audits_waiting"`
	Agreement     []struct {
		AgentVerdict string  `json:"agent_verdict"`
		N            int     `json:"n"`
		Agreement    float64 `json:"agreement"`
	} `json:"agreement"`
	Confusion []struct {
		AgentVerdict string  `json:"agent_verdict"`
		HumanVerdict string  `json:"human_verdict"`
		N            int     `json:"n"`
		Weight       float64 `json:"weight"`
	} `json:"confusion"`
	Disagreements []AuditDisagreement `json:"disagreements"`
}

// Drift is a crossing of the audited error rate under one policy above its
// target.
type Drift struct {
	TaskType   string  `json:"task_type"` // the policy's; "default" for the default policy
	TaskID     string  `json:"task_id"`
	Audits     int     `json:"audits"`
	Errors     int     `json:"errors"`
	ErrorRate  float64 `json:"error_rate"`
	ErrorLower float64 `json:"error_lower"`
	Target     float64 `json:"target_error_rate"`
	Confidence float64 `json:"confidence"`
}

// ReliabilityBin is one of the reliability diagram's ten confidence bins.
type ReliabilityBin struct {
	Lower          float64  `json:"lower"`
	Upper          float64  `json:"upper"`
	N              int      `json:"n"`
	Weight         float64  `json:"weight"`
	MeanConfidence *float64 `json:"mean_confidence"`
	Accuracy       *float64 `json:"accuracy"`
	WilsonLower    *float64 `json:"wilson_lower"`
	WilsonUpper    *float64 `json:"wilson_upper"`
	// ClopperPearsonLower and ClopperPearsonUpper are the exact 95%
	// interval of the accuracy.
	ClopperPearsonLower *float64 `json:"clopper_pearson_lower"`
	ClopperPearsonUpper *float64 `json:"clopper_pearson_upper"`
}

// Certification is the threshold certified by fixed-sequence testing: with
// probability at least Confidence, the verifier is wrong at most
// TargetErrorRate of the time at or above Threshold (nil when none is
// certified yet; Message says why, AuditsNeeded how many more labelled
// answers at or above AtThreshold would do). N labelled answers rest under
// it: Audits blind audits and Routed people's decisions on routed tasks,
// by sampling rate in Evidence. Floor is where the evidence ends: nothing
// below it is certified.
type Certification struct {
	TargetErrorRate float64  `json:"target_error_rate"`
	Confidence      float64  `json:"confidence"`
	Method          string   `json:"method"`
	Threshold       *float64 `json:"threshold"`
	Coverage        *float64 `json:"coverage"`
	N               int      `json:"n"`
	Errors          int      `json:"errors"`
	Audits          int      `json:"audits"`
	Routed          int      `json:"routed"`
	ErrorUpper      *float64 `json:"error_upper"`
	Evidence        []struct {
		SamplingRate float64 `json:"sampling_rate"`
		N            int     `json:"n"`
		Errors       int     `json:"errors"`
		Share        float64 `json:"share"`
		ErrorUpper   float64 `json:"error_upper"`
		Confidence   float64 `json:"confidence"`
	} `json:"evidence"`
	Floor        *float64 `json:"floor"`
	AuditsNeeded *int     `json:"audits_needed"`
	AtThreshold  *float64 `json:"at_threshold"`
	AuditDays    *int     `json:"audit_days"`
	Message      string   `json:"message"`
}

// Feasibility says whether the target can be met: when the verifier's
// error rate is above it, at least MinHumanShare of tasks must go to
// people whatever the threshold.
type Feasibility struct {
	AgentErrorRate *float64 `json:"agent_error_rate"`
	Feasible       bool     `json:"feasible"`
	MinHumanShare  float64  `json:"min_human_share"`
	Message        string   `json:"message"`
}

// AgreementStats is the agreement of two raters: raw, Cohen's κ and
// Gwet's AC1 (nil where undefined).
type AgreementStats struct {
	N     int      `json:"n"`
	Raw   *float64 `json:"raw"`
	Kappa *float64 `json:"kappa"`
	AC1   *float64 `json:"ac1"`
}

// RiskCoveragePoint is what a threshold gives: the share of tasks the
// verifier would decide alone, and the estimated error among them with its
// upper 95% bound.
type RiskCoveragePoint struct {
	Threshold  float64  `json:"threshold"`
	N          int      `json:"n"`
	Coverage   float64  `json:"coverage"`
	ErrorRate  *float64 `json:"error_rate"`
	ErrorUpper *float64 `json:"error_upper"`
}

// Recommendation is the lowest threshold whose error's upper bound is
// under the target, with the share of tasks it automates; or, with
// Threshold nil, why there is none yet (Message) and about how many more
// audits would give one (MoreAuditsNeeded, when more would help).
type Recommendation struct {
	TargetErrorRate  float64  `json:"target_error_rate"`
	Threshold        *float64 `json:"threshold"`
	AutomationRate   *float64 `json:"automation_rate"`
	ErrorRate        *float64 `json:"error_rate"`
	ErrorUpper       *float64 `json:"error_upper"`
	MoreAuditsNeeded *int     `json:"more_audits_needed"`
	AtThreshold      *float64 `json:"at_threshold"`
	Message          string   `json:"message"`
}

// AuditDisagreement is an audit where the person disagreed with the
// verifier.
type AuditDisagreement struct {
	TaskID       string    `json:"task_id"`
	AgentVerdict string    `json:"agent_verdict"`
	Confidence   float64   `json:"confidence"`
	HumanVerdict string    `json:"human_verdict"`
	LabelledAt   time.Time `json:"-"`
}

// UnmarshalJSON reads the API's disagreement object.
func (d *AuditDisagreement) UnmarshalJSON(b []byte) error {
	type plain AuditDisagreement
	var w struct {
		plain
		LabelledAt epoch `json:"labelled_at"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*d = AuditDisagreement(w.plain)
	d.LabelledAt = w.LabelledAt.time()
	return nil
}

// Calibration reads the account's calibration report. Options the server
// refuses are an error for which IsInvalid is true.
func (c *Client) Calibration(ctx context.Context, opts CalibrationOptions) (*CalibrationReport, error) {
	path := "/v1/calibration"
	if q := opts.query(); q != "" {
		path += "?" + q
	}
	var r CalibrationReport
	if err := c.do(ctx, call{method: http.MethodGet, path: path, auth: true}, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

package dashboard

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/arbiterhq/arbiter"
)

// optCoefficient writes an agreement coefficient with two decimals, or an
// en dash when it is undefined.
func optCoefficient(x *float64) string {
	if x == nil {
		return "–"
	}
	return strconv.FormatFloat(*x, 'f', 2, 64)
}

// confidenceInput writes the certificate's confidence for the filter form.
func (v CalibrationView) confidenceInput() string { return percentText(v.Filter.Confidence) }

// versions are the verifier version labels the version selector offers:
// those of the report's strata, and the one the filter selects.
func (v CalibrationView) versions() []string {
	var out []string
	for _, s := range v.Report.Strata {
		if s.Dimension == arbiter.StratumVersion && s.Value != "" {
			out = append(out, s.Value)
		}
	}
	if f := v.Filter.Version; f != "" && !slices.Contains(out, f) {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// applyLabel is the apply button's text: "Apply 0.87 to policy refund",
// "Apply 0.87 to the default policy".
func applyLabel(o arbiter.ThresholdOffer) string {
	if o.TaskType == arbiter.DefaultPolicyName {
		return "Apply " + threshold(o.Threshold) + " to the default policy"
	}
	return "Apply " + threshold(o.Threshold) + " to policy " + o.TaskType
}

// upperFirst writes s with its first letter upper case (s is ASCII at
// its start: "the policy of …").
func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// stratumLabel names a stratum of the report: "task type refund", "model
// (none)".
func stratumLabel(dimension, value string) string {
	if value == "" {
		value = "(none)"
	}
	if dimension == arbiter.StratumTaskType {
		return "task type " + value
	}
	return dimension + " " + value
}

// evidenceLine says one sampling stratum's part in a certificate: "People's
// decisions on routed tasks: 400 answers, 2 wrong; 12% of the agent's
// answers at or above the threshold, wrong at most 1.6% (99.5%
// confidence)".
func evidenceLine(s arbiter.EvidenceStratum) string {
	kind := "Answers labelled in full (people's decisions on routed tasks, audits at 100%)"
	if s.SamplingRate < 1 {
		kind = "Blind audits at " + percentText(s.SamplingRate)
	}
	return kind + ": " + formatInt(s.N) + " answers, " + formatInt(s.Errors) + " wrong; they stand for " + percentText(s.Share) +
		" of the agent's answers at or above the threshold, wrong at most " + percentText(s.ErrorUpper) + " (" + percentText(s.Confidence) + " confidence)"
}

// optCost writes a cost per decided task, or a dash.
func optCost(x *float64) string {
	if x == nil {
		return "–"
	}
	return strconv.FormatFloat(*x, 'f', 4, 64)
}

// driftCell says a verifier's drift alarm in a few words.
func driftCell(d arbiter.CascadeDecider) string {
	switch {
	case d.Drift == nil:
		return "–"
	case d.Drift.Drifted:
		return "drifted"
	}
	return "within target"
}

// verifierDriftText says a verifier's drift in a sentence.
func verifierDriftText(d arbiter.CascadeDecider) string {
	w := d.Drift
	return fmt.Sprintf("The decisions of %s have drifted above the %s target: %d of its latest %d audited decisions were wrong (%s; at least %s with %s confidence).",
		d.Decider, percentText(w.Target), w.Errors, w.Audits, percentText(w.ErrorRate), percentText(w.ErrorLower), percentText(w.Confidence))
}

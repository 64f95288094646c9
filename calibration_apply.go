package arbiter

import (
	"fmt"
	"math"
)

// Applying a certified threshold.
//
// A report that certifies a threshold offers owners and admins to make it
// the threshold of the policy the report concerns: its task type's, or the
// default policy for a report of every type. The offer is made on the page
// with the threshold shown; the apply computes the certificate again and
// refuses when it changed since, so nobody applies a number they did not
// see.

// PolicyTaskType returns the task type of the policy a report of f
// concerns: f's task type, or DefaultPolicyName for a report of every
// type. ok is false for a report of one source, a part of the traffic of
// the types it covers, whose certificate says nothing of the rest, and
// for the report of one verifier of a cascade, whose certificate is its
// own threshold (a certified policy's), not the policy's.
func (f CalibrationFilter) PolicyTaskType() (taskType string, ok bool) {
	if f.Source != "" || f.Verifier != "" {
		return "", false
	}
	if f.TaskType == "" {
		return DefaultPolicyName, true
	}
	return f.TaskType, true
}

// ThresholdOffer is the offer to set a policy's confidence_threshold to a
// report's certified threshold.
type ThresholdOffer struct {
	TaskType  string   // the policy's task type (DefaultPolicyName for the default policy)
	Threshold float64  // the certified threshold
	Current   *float64 // the policy's threshold now; nil when it sets none
}

// OfferThreshold returns the offer to apply c's certified threshold to the
// policy of a report of f (PolicyTaskType), whose confidence_threshold is
// current (nil when the policy sets none or does not exist). ok is false
// when nothing is certified, when the report concerns no policy, and when
// the policy has that threshold already.
func OfferThreshold(c Certification, f CalibrationFilter, current *float64) (_ ThresholdOffer, ok bool) {
	taskType, ok := f.PolicyTaskType()
	if !ok || c.Threshold == nil || (current != nil && sameThreshold(*current, *c.Threshold)) {
		return ThresholdOffer{}, false
	}
	return ThresholdOffer{TaskType: taskType, Threshold: *c.Threshold, Current: current}, true
}

// CheckCertifiedThreshold returns ECONFLICT unless c certifies threshold:
// never one below where c's evidence ends (its floor: no label covers an
// answer below it), and never one c does not certify — an offer is stale
// when the certificate changed after the page showed it.
func CheckCertifiedThreshold(c Certification, threshold float64) error {
	switch {
	case c.Floor == nil:
		return Errorf(ECONFLICT, "Nobody has labelled an answer of the agent yet, so no threshold is certified and %s was not applied.", FormatThreshold(threshold))
	case threshold < *c.Floor && !sameThreshold(threshold, *c.Floor):
		return Errorf(ECONFLICT, "%s is below where the evidence ends (%s): nobody has labelled an answer of the agent below it, so nothing was applied.",
			FormatThreshold(threshold), FormatThreshold(*c.Floor))
	case c.Threshold == nil:
		return Errorf(ECONFLICT, "The report no longer certifies a threshold (it certified %s when the page was shown), so nothing was applied. Open the calibration report again to see why.", FormatThreshold(threshold))
	case !sameThreshold(*c.Threshold, threshold):
		return Errorf(ECONFLICT, "The certified threshold changed since the page was shown: it is %s now, not %s, so nothing was applied. Open the calibration report again to apply the new one.",
			FormatThreshold(*c.Threshold), FormatThreshold(threshold))
	}
	return nil
}

// sameThreshold reports whether a and b are the same threshold, to within
// the rounding of a number written in a form.
func sameThreshold(a, b float64) bool { return math.Abs(a-b) <= 1e-9 }

// PolicyName names a policy in a sentence: "the default policy", "the
// policy of refund".
func PolicyName(taskType string) string {
	if taskType == DefaultPolicyName {
		return "the default policy"
	}
	return fmt.Sprintf("the policy of %s", taskType)
}

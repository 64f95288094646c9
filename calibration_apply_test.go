package arbiter_test

import (
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestOfferThreshold(t *testing.T) {
	p := func(x float64) *float64 { return &x }
	certified := arbiter.Certification{Threshold: p(0.87)}
	for _, tc := range []struct {
		name    string
		c       arbiter.Certification
		f       arbiter.CalibrationFilter
		current *float64
		ok      bool
		policy  string
	}{
		{"a task type's report offers its policy", certified, arbiter.CalibrationFilter{TaskType: "refund"}, p(0.8), true, "refund"},
		{"every type's report offers the default policy", certified, arbiter.CalibrationFilter{}, p(0.8), true, arbiter.DefaultPolicyName},
		{"a policy without a threshold is offered one", certified, arbiter.CalibrationFilter{TaskType: "refund"}, nil, true, "refund"},
		{"a version's report offers its task type's policy", certified, arbiter.CalibrationFilter{TaskType: "refund", Version: "p2"}, nil, true, "refund"},
		{"the same threshold is no offer", certified, arbiter.CalibrationFilter{TaskType: "refund"}, p(0.8700000001), false, ""},
		{"nothing certified is no offer", arbiter.Certification{}, arbiter.CalibrationFilter{TaskType: "refund"}, p(0.8), false, ""},
		{"one source's report concerns no policy", certified, arbiter.CalibrationFilter{TaskType: "refund", Source: "bot"}, p(0.8), false, ""},
		{"one verifier's report is its own threshold, not the policy's", certified, arbiter.CalibrationFilter{TaskType: "refund", Verifier: "small"}, p(0.8), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, ok := arbiter.OfferThreshold(tc.c, tc.f, tc.current)
			if ok != tc.ok || o.TaskType != tc.policy || (ok && (o.Threshold != 0.87 || o.Current != tc.current)) {
				t.Errorf("got %+v, %v; want ok %v for policy %q", o, ok, tc.ok, tc.policy)
			}
		})
	}
}

func TestCheckCertifiedThreshold(t *testing.T) {
	at, floor := 0.87, 0.6
	for _, tc := range []struct {
		name      string
		c         arbiter.Certification
		threshold float64
		code      string
	}{
		{"the threshold shown is certified", arbiter.Certification{Threshold: &at, Floor: &floor}, 0.87, ""},
		{"to within a form's rounding", arbiter.Certification{Threshold: &at, Floor: &floor}, 0.87000000001, ""},
		{"another threshold is stale", arbiter.Certification{Threshold: &at, Floor: &floor}, 0.86, arbiter.ECONFLICT},
		{"a thousandth off is another threshold", arbiter.Certification{Threshold: &at, Floor: &floor}, 0.871, arbiter.ECONFLICT},
		{"no certificate is stale", arbiter.Certification{Floor: &floor}, 0.87, arbiter.ECONFLICT},
		{"below the evidence is refused", arbiter.Certification{Threshold: &at, Floor: &floor}, 0.5, arbiter.ECONFLICT},
		{"no labels is refused", arbiter.Certification{}, 0.87, arbiter.ECONFLICT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := arbiter.CheckCertifiedThreshold(tc.c, tc.threshold); arbiter.ErrorCode(err) != tc.code {
				t.Errorf("got %v, want code %q", err, tc.code)
			}
		})
	}
}

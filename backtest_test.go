package arbiter_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// backtestCases returns routed labels (weight 1) and audits at rate 1/2
// (weight 2); the cascade's answer on the audits is wrong on the first
// wrongAudits, and each task's attempts cost 0.01.
func backtestCases(routed, audits, wrongAudits int) []arbiter.BacktestCase {
	var out []arbiter.BacktestCase
	for i := range routed + audits {
		cost := 0.01
		t := &arbiter.Task{ID: fmt.Sprintf("tsk_%d", i), Attempts: []arbiter.Attempt{{Tier: arbiter.TierAgent, Cost: &cost}}}
		p := arbiter.LabelledPair{TaskID: t.ID, Confidence: 0.5, AgentVerdict: "approve", HumanVerdict: "approve", Weight: 1}
		if i >= routed {
			p.Audit, p.Weight, p.Confidence = true, 2, 0.95
			if i-routed < wrongAudits {
				p.AgentVerdict = "reject"
			}
		}
		out = append(out, arbiter.BacktestCase{Task: t, Pair: p})
	}
	return out
}

// answer is a candidate's call: verdict at confidence, costing cost.
func answer(id, verdict string, confidence, cost float64) arbiter.BacktestCall {
	return arbiter.BacktestCall{TaskID: id, Verdict: &verdict, Confidence: &confidence, Cost: cost}
}

func TestBacktest(t *testing.T) {
	t.Parallel()
	spec := arbiter.VerifierSpec{Name: "large", Model: "m", Version: "v2"}
	failed := arbiter.VerifierTimedOut
	tests := []struct {
		name  string
		cases []arbiter.BacktestCase
		// calls answers each case: right at 0.99, but for the indices
		// listed.
		wrong, failed, declined                  []int
		wantThreshold                            bool
		wantCoverage, wantError, wantCostPer     float64
		wantCurrentCoverage, wantCurrentError    float64
		wantFailed, wantDeclined, wantCandidateN int
	}{{
		// 60 routed + 30 audits × 2 = 120 tasks' weight; every answer
		// right at 0.99 certifies 0.99 at 10%, and decides all.
		name: "a better verifier decides everything", cases: backtestCases(60, 30, 2),
		wantThreshold: true, wantCoverage: 1, wantError: 0, wantCostPer: 0.002,
		wantCurrentCoverage: 0.5, wantCurrentError: 4.0 / 60, wantCandidateN: 90,
	}, {
		// A failure and a decline weigh in the total but decide nothing:
		// the candidate covers (120 − 1 − 2) / 120. The declined call
		// cost as much as an answer, the failed one nothing: 119 × 0.002
		// over the 117 decided.
		name: "failures and declines pass on", cases: backtestCases(60, 30, 0), failed: []int{0}, declined: []int{89},
		wantThreshold: true, wantCoverage: 117.0 / 120, wantError: 0, wantCostPer: 0.002 * 119 / 117,
		wantCurrentCoverage: 0.5, wantCurrentError: 0, wantFailed: 1, wantDeclined: 1, wantCandidateN: 88,
	}, {
		// Five labels cannot certify 10%: the candidate decides nothing.
		name: "too few labels certify nothing", cases: backtestCases(5, 0, 0),
		wantThreshold: false, wantCoverage: 0, wantError: math.NaN(), wantCostPer: math.NaN(),
		wantCurrentCoverage: 0, wantCurrentError: math.NaN(), wantCandidateN: 5,
	}, {
		// Every answer wrong: nothing certified, nothing decided.
		name: "a wrong verifier decides nothing", cases: backtestCases(60, 30, 0), wrong: seq(90),
		wantThreshold: false, wantCoverage: 0, wantError: math.NaN(), wantCostPer: math.NaN(),
		wantCurrentCoverage: 0.5, wantCurrentError: 0, wantCandidateN: 90,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := make([]arbiter.BacktestCall, len(tt.cases))
			for i, c := range tt.cases {
				calls[i] = answer(c.Task.ID, "approve", 0.99, 0.002)
			}
			for _, i := range tt.wrong {
				reject := "reject"
				calls[i].Verdict = &reject
			}
			for _, i := range tt.failed {
				calls[i] = arbiter.BacktestCall{TaskID: tt.cases[i].Task.ID, Error: &failed}
			}
			for _, i := range tt.declined {
				calls[i] = arbiter.BacktestCall{TaskID: tt.cases[i].Task.ID, Cost: 0.002}
			}
			r := arbiter.Backtest(spec, tt.cases, calls, 0.1, 0.95)
			if r.Verifier != "large" || r.Version != "v2" || r.Tasks != len(tt.cases) || r.Failed != tt.wantFailed || r.Declined != tt.wantDeclined {
				t.Errorf("report %+v", r)
			}
			c := r.Candidate
			if (c.Threshold != nil) != tt.wantThreshold || c.Answered != tt.wantCandidateN {
				t.Fatalf("candidate threshold %v, answered %d: %s", c.Threshold, c.Answered, c.Certification.Message)
			}
			if tt.wantThreshold && *c.Threshold != 0.99 {
				t.Errorf("threshold %v, want 0.99", *c.Threshold)
			}
			sameFigure(t, "candidate coverage", c.Coverage, tt.wantCoverage)
			sameFigureOrNone(t, "candidate error", c.ErrorRate, tt.wantError)
			sameFigureOrNone(t, "candidate cost per decided", c.CostPerDecided, tt.wantCostPer)
			sameFigure(t, "current coverage", r.Current.Coverage, tt.wantCurrentCoverage)
			sameFigureOrNone(t, "current error", r.Current.ErrorRate, tt.wantCurrentError)
			if r.Current.Answered != len(tt.cases) || math.Abs(r.Current.Cost-0.01*float64(len(tt.cases))) > 1e-9 {
				t.Errorf("current answered %d, cost %v", r.Current.Answered, r.Current.Cost)
			}
			if r.Current.Decided > 0 {
				// Every task's attempts cost 0.01; per decided task the
				// weighted total over the weighted decided.
				sameFigureOrNone(t, "current cost per decided", r.Current.CostPerDecided, 0.01/r.Current.Coverage)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func sameFigure(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// sameFigureOrNone checks a figure that may be missing: want NaN for none.
func sameFigureOrNone(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	switch {
	case math.IsNaN(want) && got != nil:
		t.Errorf("%s = %v, want none", what, *got)
	case !math.IsNaN(want) && got == nil:
		t.Errorf("%s is missing, want %v", what, want)
	case got != nil:
		sameFigure(t, what, *got, want)
	}
}

func TestBacktestFilter_Validate(t *testing.T) {
	t.Parallel()
	good := arbiter.NewBacktestFilter("large")
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		field string
		edit  func(*arbiter.BacktestFilter)
	}{
		{"verifier", func(f *arbiter.BacktestFilter) { f.Verifier = "" }},
		{"verifier", func(f *arbiter.BacktestFilter) { f.Verifier = "Large" }},
		{"since", func(f *arbiter.BacktestFilter) { f.Since = 0 }},
		{"since", func(f *arbiter.BacktestFilter) { f.Since = arbiter.MaxBacktestSince + time.Hour }},
		{"limit", func(f *arbiter.BacktestFilter) { f.Limit = 0 }},
		{"limit", func(f *arbiter.BacktestFilter) { f.Limit = arbiter.MaxBacktestTasks + 1 }},
		{"target_error_rate", func(f *arbiter.BacktestFilter) { f.TargetErrorRate = 1 }},
		{"target_error_rate", func(f *arbiter.BacktestFilter) { f.TargetErrorRate = math.NaN() }},
		{"confidence", func(f *arbiter.BacktestFilter) { f.Confidence = 0.4 }},
	}
	for _, tt := range tests {
		f := good
		tt.edit(&f)
		err := f.Validate()
		if arbiter.ErrorCode(err) != arbiter.EINVALID || arbiter.ErrorField(err) != tt.field {
			t.Errorf("%+v: %v, want EINVALID on %s", f, err, tt.field)
		}
	}
}

func TestParseBacktestSince(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "1d": 24 * time.Hour, "12h": 12 * time.Hour, "365d": arbiter.MaxBacktestSince} {
		if got, err := arbiter.ParseBacktestSince(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0d", "-1d", "366d", "30m", "d", "1w", "1e3d", "9999999999999999999d"} {
		if _, err := arbiter.ParseBacktestSince(in); arbiter.ErrorField(err) != "since" {
			t.Errorf("%q: %v, want EINVALID on since", in, err)
		}
	}
}

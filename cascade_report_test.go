package arbiter_test

import (
	"math"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// audits returns n audits of verifier's decisions at weight w, the first
// wrong of them wrong.
func audits(verifier, version string, n, wrong int, w float64) []arbiter.DecisionAudit {
	out := make([]arbiter.DecisionAudit, n)
	for i := range out {
		out[i] = arbiter.DecisionAudit{Verifier: verifier, Version: version, Weight: w, Correct: i >= wrong}
	}
	return out
}

func TestComposeCascade(t *testing.T) {
	t.Parallel()
	// The exact bounds by hand: with no error in n audits at 95%, 1 −
	// 0.05^(1/n); with k errors, the Beta(k+1, n−k) quantile.
	clean50 := 1 - math.Pow(0.05, 1.0/50)
	twoIn40 := arbiter.ClopperPearsonUpper(2, 40, 0.95)
	tests := []struct {
		name string
		data arbiter.CascadeData
		// want per decider: tasks, share, cost per decided (NaN: none),
		// error upper (NaN: none)
		want                      map[string][4]float64
		wantBound, wantAgentBound float64 // NaN: none
		wantConfidence            float64
		wantUnaudited             []string
		wantDrifted               map[string]bool
		wantOrder                 []string
	}{{
		name: "rules, small, large, people, fallback",
		data: arbiter.CascadeData{
			Deciders: []arbiter.DeciderCount{{arbiter.TierAgent, "small", 50}, {arbiter.TierAgent, "large", 20},
				{arbiter.TierHuman, "", 25}, {arbiter.TierFallback, "", 5}},
			Spend:  []arbiter.VerifierSpend{{"small", 95, 0.5}, {"large", 45, 2.0}},
			Audits: append(audits("small", "v1", 50, 0, 1), audits("large", "", 40, 2, 1)...),
		},
		want: map[string][4]float64{
			"small": {50, 0.5, 0.01, clean50}, "large": {20, 0.2, 0.1, twoIn40},
			"people": {25, 0.25, math.NaN(), math.NaN()}, "fallback": {5, 0.05, math.NaN(), math.NaN()},
		},
		wantBound: 0.5*clean50 + 0.2*twoIn40, wantAgentBound: (0.5*clean50 + 0.2*twoIn40) / 0.7,
		wantConfidence: 0.9, wantUnaudited: []string{}, wantDrifted: map[string]bool{"small": false, "large": false},
		wantOrder: []string{"small", "large", "people", "fallback"},
	}, {
		// A verifier with no audit of its decisions counts them all
		// wrong, and spends δ on nothing.
		name: "an unaudited verifier",
		data: arbiter.CascadeData{
			Deciders: []arbiter.DeciderCount{{arbiter.TierAgent, "small", 30}, {arbiter.TierAgent, "rules", 10}, {arbiter.TierHuman, "", 60}},
			Audits:   audits("small", "", 50, 0, 1),
		},
		want: map[string][4]float64{
			"small": {30, 0.3, math.NaN(), clean50}, "rules": {10, 0.1, math.NaN(), math.NaN()}, "people": {60, 0.6, math.NaN(), math.NaN()},
		},
		wantBound: 0.3*clean50 + 0.1, wantAgentBound: (0.3*clean50 + 0.1) / 0.4, wantConfidence: 0.95,
		wantUnaudited: []string{"rules"}, wantDrifted: map[string]bool{"small": false},
		wantOrder: []string{"small", "rules", "people"},
	}, {
		// 30 errors in 100 audits of v2 drift above 2%; v1's errors
		// before are another series. Audits at rate 1/4 weigh 4.
		name: "a drifted verifier, its new version's series",
		data: arbiter.CascadeData{
			Deciders: []arbiter.DeciderCount{{arbiter.TierAgent, "small", 10}, {arbiter.TierHuman, "", 10}},
			Audits:   append(audits("small", "v2", 100, 30, 4), audits("small", "v1", 100, 0, 4)...),
		},
		want: map[string][4]float64{
			"small": {10, 0.5, math.NaN(), arbiter.ClopperPearsonUpper(30, 200, 0.95)}, "people": {10, 0.5, math.NaN(), math.NaN()},
		},
		wantBound: 0.5 * arbiter.ClopperPearsonUpper(30, 200, 0.95), wantAgentBound: arbiter.ClopperPearsonUpper(30, 200, 0.95),
		wantConfidence: 0.95, wantUnaudited: []string{}, wantDrifted: map[string]bool{"small": true},
		wantOrder: []string{"small", "people"},
	}, {
		name:      "people decided everything",
		data:      arbiter.CascadeData{Deciders: []arbiter.DeciderCount{{arbiter.TierHuman, "", 7}}, Spend: []arbiter.VerifierSpend{{"small", 7, 0.07}}},
		want:      map[string][4]float64{"people": {7, 1, math.NaN(), math.NaN()}, "small": {0, 0, math.NaN(), math.NaN()}},
		wantBound: math.NaN(), wantAgentBound: math.NaN(), wantConfidence: 1, wantUnaudited: []string{},
		wantOrder: []string{"small", "people"},
	}, {
		name: "nothing finished", data: arbiter.CascadeData{},
		want: map[string][4]float64{}, wantBound: math.NaN(), wantAgentBound: math.NaN(), wantConfidence: 1, wantUnaudited: []string{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := arbiter.ComposeCascade(tt.data, 0.02, 0.95)
			if len(r.Deciders) != len(tt.want) {
				t.Fatalf("deciders %+v", r.Deciders)
			}
			for i, c := range r.Deciders {
				if tt.wantOrder != nil && c.Decider != tt.wantOrder[i] {
					t.Errorf("decider %d is %s, want %v", i, c.Decider, tt.wantOrder)
				}
				w, ok := tt.want[c.Decider]
				if !ok {
					t.Fatalf("unexpected decider %s", c.Decider)
				}
				if float64(c.Tasks) != w[0] {
					t.Errorf("%s decided %d, want %v", c.Decider, c.Tasks, w[0])
				}
				sameFigure(t, c.Decider+" share", c.Share, w[1])
				sameFigureOrNone(t, c.Decider+" cost per decided", c.CostPerDecided, w[2])
				sameFigureOrNone(t, c.Decider+" error upper", c.ErrorUpper, w[3])
				if drifted, ok := tt.wantDrifted[c.Decider]; ok != (c.Drift != nil) || ok && c.Drift.Drifted != drifted {
					t.Errorf("%s drift %+v, want drifted %v (%v)", c.Decider, c.Drift, drifted, ok)
				}
			}
			sameFigureOrNone(t, "bound", r.ErrorBound, tt.wantBound)
			sameFigureOrNone(t, "agent bound", r.AgentErrorBound, tt.wantAgentBound)
			sameFigure(t, "bound confidence", r.BoundConfidence, tt.wantConfidence)
			if strings.Join(r.Unaudited, ",") != strings.Join(tt.wantUnaudited, ",") || r.Unaudited == nil {
				t.Errorf("unaudited %v, want %v", r.Unaudited, tt.wantUnaudited)
			}
			if r.Message == "" || r.Method != arbiter.CascadeBoundMethod {
				t.Errorf("message %q, method %q", r.Message, r.Method)
			}
		})
	}
}

// TestComposeCascade_DriftSeries checks that the drift window is the
// newest version's: 25 wrong of 100 under v1 and 100 right under v2 is no
// drift, and the window holds v2's 100.
func TestComposeCascade_DriftSeries(t *testing.T) {
	t.Parallel()
	d := arbiter.CascadeData{Deciders: []arbiter.DeciderCount{{arbiter.TierAgent, "small", 1}},
		Audits: append(audits("small", "v2", 100, 0, 1), audits("small", "v1", 100, 25, 1)...)}
	r := arbiter.ComposeCascade(d, 0.02, 0.95)
	if got := r.Deciders[0].Drift; got == nil || got.Drifted || got.Version != "v2" || got.Audits != 100 || got.Errors != 0 {
		t.Errorf("drift %+v", got)
	}
	d.Audits = append(audits("small", "v1", 100, 25, 1), audits("small", "v2", 100, 0, 1)...)
	if got := arbiter.ComposeCascade(d, 0.02, 0.95).Deciders[0].Drift; !got.Drifted || got.Version != "v1" || got.Errors != 25 {
		t.Errorf("drift of v1 newest %+v", got)
	}
}

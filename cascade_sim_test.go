package arbiter_test

import (
	"reflect"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// TestSimulateCascade_TheGuarantee runs the scripted cascade (fewer
// deployments than the bench's 200, so that it stays a few seconds under
// -race) and holds it to the certificate's promise: the share of
// deployments whose realized error on the tasks the verifiers decided
// exceeds α is at most δ, up to the noise of a finite number of
// deployments — the count seen must not be significant evidence against
// "at most δ" at the 1% level (one-sided binomial). The realized error is
// measured on 2,000 fresh tasks, whose own noise only makes exceeding
// more likely, so the check errs on the strict side. And the cascade
// covers at least as much as the best single verifier certified alone
// at the same α and δ over the same tasks.
func TestSimulateCascade_TheGuarantee(t *testing.T) {
	s := arbiter.ScriptedCascade()
	s.Deployments = 30
	r := arbiter.SimulateCascade(s)
	if r.Deployments != 30 || r.Alpha != 0.1 || r.Delta < 0.0999 || r.Delta > 0.1001 || len(r.Singles) != 3 {
		t.Fatalf("report = %+v", r)
	}
	for _, o := range append([]arbiter.SimOutcome{r.Cascade}, r.Singles...) {
		// P(X ≥ k) for X ~ Binomial(n, δ): at least 1% unless the
		// certificate fails more often than it promises.
		k := o.Exceeded
		if tail := 1 - arbiter.BinomialCDF(k-1, r.Deployments, r.Delta); k > 0 && tail < 0.01 {
			t.Errorf("%s: %d of %d deployments exceeded α = %v (P = %.4f at δ = %v)", o.Name, k, r.Deployments, r.Alpha, tail, r.Delta)
		}
		if o.WorstError > 2*r.Alpha {
			t.Errorf("%s: worst realized error %.3f", o.Name, o.WorstError)
		}
	}
	best := r.BestSingle()
	if r.Cascade.Coverage < best.Coverage {
		t.Errorf("cascade covers %.3f, %s alone %.3f", r.Cascade.Coverage, best.Name, best.Coverage)
	}
	// Every stage decides some: the figures are the cascade's, not one
	// verifier's under another name.
	for _, name := range []string{"rules", "small", "large"} {
		if r.Cascade.DecidedBy[name] <= 0 {
			t.Errorf("cascade: %s decided nothing: %v", name, r.Cascade.DecidedBy)
		}
	}
	// The large model is what costs: the cascade, which asks it only of
	// what the others passed on, costs less per decided task than the
	// large model alone.
	var large arbiter.SimOutcome
	for _, o := range r.Singles {
		if o.Name == "large" {
			large = o
		}
	}
	if r.Cascade.CostPerDecided <= 0 || r.Cascade.CostPerDecided >= large.CostPerDecided {
		t.Errorf("cost per decided task: cascade %v, large alone %v", r.Cascade.CostPerDecided, large.CostPerDecided)
	}
	// Deterministic for a seed.
	s.Deployments = 2
	if a, b := arbiter.SimulateCascade(s), arbiter.SimulateCascade(s); !reflect.DeepEqual(a, b) {
		t.Errorf("a second run differs:\n%+v\n%+v", a, b)
	}
}

// TestSimulateCascade_AnOverconfidentVerifierIsCaught checks that the
// simulation can fail: a verifier whose wrong answers are as confident as
// its right ones and wrong 30% of the time certifies nothing at 10%, so
// it decides nothing and exceeds nothing, where deciding at any threshold
// would be wrong 30% of the time.
func TestSimulateCascade_AnOverconfidentVerifierIsCaught(t *testing.T) {
	s := arbiter.ScriptedCascade()
	s.Deployments = 5
	s.Verifiers = []arbiter.SimVerifier{{Name: "bold", Answers: []arbiter.SimAnswer{
		{Answers: 1, Accuracy: 0.7, Right: [2]float64{0.9, 1}, Wrong: [2]float64{0.9, 1}},
		{Answers: 1, Accuracy: 0.7, Right: [2]float64{0.9, 1}, Wrong: [2]float64{0.9, 1}},
		{Answers: 1, Accuracy: 0.7, Right: [2]float64{0.9, 1}, Wrong: [2]float64{0.9, 1}},
	}}}
	r := arbiter.SimulateCascade(s)
	if r.Cascade.Coverage != 0 || r.Cascade.Exceeded != 0 {
		t.Errorf("an overconfident verifier decided: %+v", r.Cascade)
	}
}

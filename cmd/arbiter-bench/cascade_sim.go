package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
)

// The cascade-sim phase (-phases=cascade-sim) is the synthetic proof of
// the certified cascade: arbiter.ScriptedCascade run over
// -cascade-deployments simulated deployments (200 by default), each
// bootstrapped from nothing in certified mode, certified on its people's
// labels and blind audits, and measured on fresh tasks. It needs no
// server: the simulation calls the certificate and the cascade's steps
// directly. It prints
//
//   - the share of deployments whose realized error on the tasks the
//     verifiers decided exceeded α: the certificate promises at most δ;
//   - the cascade's coverage against each verifier certified alone at the
//     same α and δ over the same tasks: at least the best single one's;
//   - the cost per decided task, the cascade's and each verifier's alone.

// cascadeSimResult is what the cascade-sim phase measured.
type cascadeSimResult struct {
	report  arbiter.CascadeSimReport
	elapsed time.Duration
}

// measureCascadeSim runs the scripted simulation.
func (b *bench) measureCascadeSim() {
	s := arbiter.ScriptedCascade()
	s.Deployments = b.cascadeDeployments
	start := time.Now()
	r := arbiter.SimulateCascade(s)
	b.cascadeSim = &cascadeSimResult{report: r, elapsed: time.Since(start)}
	b.logf("cascade-sim: %d deployments in %s", r.Deployments, b.cascadeSim.elapsed.Round(time.Millisecond))
}

// printCascadeSim writes the cascade-sim phase's figures against their
// targets.
func printCascadeSim(w io.Writer, m *cascadeSimResult) {
	if m == nil {
		return
	}
	r := m.report
	var singles, costs, by []string
	for _, s := range r.Singles {
		singles = append(singles, fmt.Sprintf("%s %s", s.Name, arbiter.FormatShare(s.Coverage)))
		costs = append(costs, fmt.Sprintf("%s $%.5f", s.Name, s.CostPerDecided))
	}
	for name, share := range r.Cascade.DecidedBy {
		by = append(by, fmt.Sprintf("%s %s", name, arbiter.FormatShare(share)))
	}
	slices.Sort(by)
	best := r.BestSingle()
	fmt.Fprintf(w, "%-22s %d of %d deployments over α %s, %s (worst realized error %s, mean %s) (target ≤ δ %s) %s\n",
		"cascade-sim: error", r.Cascade.Exceeded, r.Deployments, arbiter.FormatShare(r.Alpha), arbiter.FormatShare(r.ExceededShare()),
		arbiter.FormatShare(r.Cascade.WorstError), arbiter.FormatShare(r.Cascade.MeanError), arbiter.FormatShare(r.Delta),
		verdict(r.Deployments > 0 && r.ExceededShare() <= r.Delta))
	fmt.Fprintf(w, "%-22s cascade %s (%s); alone: %s (target ≥ best single, %s) %s\n",
		"cascade-sim: coverage", arbiter.FormatShare(r.Cascade.Coverage), strings.Join(by, ", "), strings.Join(singles, ", "),
		best.Name, verdict(r.Deployments > 0 && r.Cascade.Coverage >= best.Coverage))
	fmt.Fprintf(w, "%-22s cascade $%.5f a decided task; alone: %s (%d deployments in %s)\n",
		"cascade-sim: cost", r.Cascade.CostPerDecided, strings.Join(costs, ", "), r.Deployments, m.elapsed.Round(time.Millisecond))
}

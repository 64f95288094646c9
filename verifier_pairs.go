package arbiter

// Labels per verifier.
//
// The agent tier's labelled pairs (LabelledPairOf) pair a person's verdict
// with the tier's last answer: one certificate for the whole tier. A
// cascade certifies each verifier apart, over the tasks that reached it:
// the person who decides a task labels the answer of every verifier that
// passed it on (each was asked, and each passed it on), and the blind
// audit of a task a verifier decided labels that verifier's answer and
// those of the verifiers before it. The weights follow the same rule:
// every answer on a task sent to people is labelled (1), one in 1/r of
// those on a task the agent decided is (1/r at audit rate r).

// VerifierPairsOf returns the pairs a person's attempt h on t makes for
// the verifiers of its cascade: one a verifier named on t's agent
// attempts, with its last answer that had a verdict and a confidence
// (LabelledPair.Verifier names it), newest first. It returns none where
// LabelledPairOf makes no pair.
func VerifierPairsOf(t *Task, h Attempt) []LabelledPair {
	whole, ok := LabelledPairOf(t, h)
	if !ok {
		return nil
	}
	var out []LabelledPair
	seen := map[string]bool{}
	for i := len(t.Attempts) - 1; i >= 0; i-- {
		a := &t.Attempts[i]
		if a.Tier != TierAgent || a.Verifier == nil || a.Verdict == nil || a.Confidence == nil || seen[*a.Verifier] {
			continue
		}
		seen[*a.Verifier] = true
		p := whole
		p.Verifier, p.Confidence, p.AgentVerdict, p.Model, p.Version = *a.Verifier, *a.Confidence, *a.Verdict, "", ""
		if a.Model != nil {
			p.Model = *a.Model
		}
		if a.Version != nil {
			p.Version = *a.Version
		}
		out = append(out, p)
	}
	return out
}

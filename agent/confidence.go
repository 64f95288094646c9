package agent

import (
	"math"

	"github.com/arbiterhq/arbiter"
)

// Answer is one of a model's answers on a task: its verdict, the
// confidence it stated and its rationale, and, when the server sent token
// log-probabilities that spell the verdict (HasProbability), the
// probability exp(Σ logprob) of the verdict's tokens.
type Answer struct {
	Verdict        string
	Confidence     float64
	Rationale      string
	Probability    float64
	HasProbability bool
}

// ConfidenceSource turns a model's answers on a task into one verdict and
// confidence: how many answers to ask for and at what temperature, and
// how to combine them. NewConfidenceSource builds the one a verifier's
// file names.
type ConfidenceSource interface {
	// Plan returns how many answers to ask for, at what temperature, and
	// whether to ask for the tokens' log-probabilities.
	Plan() (answers int, temperature float64, logprobs bool)
	// Combine returns the verdict, the confidence and the rationale of
	// the answers (as many as Plan asked for, at least one).
	Combine(answers []Answer) (verdict string, confidence float64, rationale string)
}

// NewConfidenceSource returns the source spec names: self (the stated
// confidence), logprobs (the smaller of the stated confidence and the
// verdict tokens' probability, when the server sends them) or sampling
// (the share of answers agreeing with the most frequent verdict).
func NewConfidenceSource(spec arbiter.ConfidenceSpec) ConfidenceSource {
	switch spec.Source {
	case arbiter.ConfidenceLogprobs:
		return logprobsSource{}
	case arbiter.ConfidenceSampling:
		n, temperature := spec.Plan()
		return samplingSource{answers: n, temperature: temperature}
	}
	return selfSource{}
}

// selfSource takes the model's stated confidence, from one answer at
// temperature 0.
type selfSource struct{}

func (selfSource) Plan() (int, float64, bool) { return 1, 0, false }

func (selfSource) Combine(a []Answer) (string, float64, string) {
	return a[0].Verdict, a[0].Confidence, a[0].Rationale
}

// logprobsSource tempers the stated confidence by the verdict tokens'
// probability: a model that claims 0.95 while its verdict tokens had
// probability 0.6 is taken at 0.6. Without log-probabilities the stated
// confidence stands.
type logprobsSource struct{}

func (logprobsSource) Plan() (int, float64, bool) { return 1, 0, true }

func (logprobsSource) Combine(a []Answer) (string, float64, string) {
	c := a[0].Confidence
	if a[0].HasProbability {
		c = math.Min(c, a[0].Probability)
	}
	return a[0].Verdict, c, a[0].Rationale
}

// samplingSource asks for several answers at a temperature and takes the
// share agreeing with the most frequent verdict (the first to reach the
// most, on a tie) as the confidence, with the rationale of the first
// answer that gave it. It works on any provider, logprobs or not.
type samplingSource struct {
	answers     int
	temperature float64
}

func (s samplingSource) Plan() (int, float64, bool) { return s.answers, s.temperature, false }

func (samplingSource) Combine(a []Answer) (string, float64, string) {
	counts := map[string]int{}
	best := ""
	for _, ans := range a {
		counts[ans.Verdict]++
		if counts[ans.Verdict] > counts[best] {
			best = ans.Verdict
		}
	}
	for _, ans := range a {
		if ans.Verdict == best {
			return best, float64(counts[best]) / float64(len(a)), ans.Rationale
		}
	}
	return best, 0, ""
}

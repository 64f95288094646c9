package arbiter

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// The cascade's guarantee, simulated.
//
// A certified cascade promises that, with confidence 1−δ, each verifier's
// answers at or above its certified threshold are wrong at most α of the
// time, so the tasks the tier decides are too. SimulateCascade checks the
// promise end to end with the code the worker and the calibration report
// run, and nothing re-implemented: fake verifiers answer tasks of mixed
// difficulty with a scripted accuracy and confidence; each simulated
// deployment starts from nothing in certified mode (PlanCascade with no
// certificate: every verifier passes every task on, people decide them
// all), certifies each verifier on the labels people gave
// (VerifierPairsOf, Evidence, Certify), runs more tasks at those
// thresholds with blind audits of what the verifiers decided
// (ChosenForAudit), certifies again on all the labels, and then runs
// fresh tasks through the cascade (NextCascadeStep) to see how often the
// verifiers' decisions were wrong. Each verifier alone goes through the
// same deployment over the same tasks and answers, for the coverage the
// cascade must at least match.

// SimAnswer is how a fake verifier answers the tasks of one difficulty.
type SimAnswer struct {
	// Answers is the chance it gives a verdict at all (a rules verifier
	// whose rules do not match declines).
	Answers float64
	// Accuracy is the chance a verdict it gives is the person's.
	Accuracy float64
	// Right and Wrong are the ranges its confidence is drawn from,
	// uniformly, when its verdict is right and when it is wrong.
	Right, Wrong [2]float64
}

// SimVerifier is a fake verifier: its name, what a call costs, and how it
// answers each difficulty (indexed as CascadeSimulation.Mix).
type SimVerifier struct {
	Name    string
	Price   Price
	Usage   Usage // the tokens each call takes
	Answers []SimAnswer
}

// CascadeSimulation is what SimulateCascade runs: the verifiers in cascade
// order, the share of tasks of each difficulty, the target α and the
// confidence 1−δ of the certificates, the audit rate, and how many tasks
// each deployment's phases hold.
type CascadeSimulation struct {
	Verifiers       []SimVerifier
	Mix             []float64
	TargetErrorRate float64
	Confidence      float64
	AuditRate       float64
	// Bootstrap tasks run with no certificate (people decide them all);
	// Deployed tasks run at the first certificates, with audits; Fresh
	// tasks run at the certificates of all those labels and are measured.
	Bootstrap, Deployed, Fresh int
	Deployments                int
	Seed                       uint64
}

// SimOutcome is one configuration's figures over the deployments: the
// cascade's, or one verifier's alone.
type SimOutcome struct {
	Name string
	// Exceeded is how many deployments' realized error on the tasks the
	// verifiers decided was above α; a deployment that decided nothing
	// exceeded nothing.
	Exceeded int
	// Coverage is the mean share of fresh tasks the verifiers decided;
	// MeanError the mean realized error where they decided any; WorstError
	// the highest.
	Coverage, MeanError, WorstError float64
	// CostPerDecided is what the verifiers' calls on fresh tasks cost,
	// over the tasks they decided, summed over the deployments.
	CostPerDecided float64
	// DecidedBy is the share of fresh tasks each verifier decided, by name.
	DecidedBy map[string]float64
}

// CascadeSimReport is SimulateCascade's answer.
type CascadeSimReport struct {
	Deployments int
	Alpha       float64 // the target α
	Delta       float64 // 1 − the confidence
	Cascade     SimOutcome
	Singles     []SimOutcome // each verifier alone, in cascade order
}

// ExceededShare is the share of the cascade's deployments whose realized
// error exceeded α: the certificate promises at most δ, up to the noise
// of a finite number of deployments.
func (r CascadeSimReport) ExceededShare() float64 {
	return float64(r.Cascade.Exceeded) / float64(max(r.Deployments, 1))
}

// BestSingle returns the single verifier that covered the most.
func (r CascadeSimReport) BestSingle() SimOutcome {
	var best SimOutcome
	for i, s := range r.Singles {
		if i == 0 || s.Coverage > best.Coverage {
			best = s
		}
	}
	return best
}

// simTask is one drawn task: its difficulty, the person's verdict, and
// every verifier's answer, drawn once so that every configuration sees the
// same.
type simTask struct {
	id      string
	truth   string
	answers []Verification
}

// simVerdicts are the allowed verdicts of every simulated task.
var simVerdicts = []string{"approve", "reject"}

// SimulateCascade runs s: deterministic for a seed.
func SimulateCascade(s CascadeSimulation) CascadeSimReport {
	r := CascadeSimReport{Deployments: s.Deployments, Alpha: s.TargetErrorRate, Delta: 1 - s.Confidence}
	names := make([]string, len(s.Verifiers))
	for i, v := range s.Verifiers {
		names[i] = v.Name
	}
	configs := [][]int{make([]int, len(s.Verifiers))}
	for i := range s.Verifiers {
		configs[0][i] = i
		configs = append(configs, []int{i})
	}
	sums := make([]simSum, len(configs))
	for d := range s.Deployments {
		rng := rand.New(rand.NewPCG(s.Seed, uint64(d)))
		draw := func(phase string, n int) []simTask {
			out := make([]simTask, n)
			for i := range out {
				out[i] = s.draw(rng, fmt.Sprintf("sim-%d-%d-%s-%d", s.Seed, d, phase, i))
			}
			return out
		}
		bootstrap, deployed, fresh := draw("b", s.Bootstrap), draw("d", s.Deployed), draw("f", s.Fresh)
		for c, order := range configs {
			sums[c].add(s.deploy(order, bootstrap, deployed, fresh), s.TargetErrorRate)
		}
	}
	for c, order := range configs {
		o := sums[c].outcome(s.Deployments)
		if c == 0 {
			o.Name = "cascade"
			r.Cascade = o
			continue
		}
		o.Name = names[order[0]]
		r.Singles = append(r.Singles, o)
	}
	return r
}

// draw draws one task and every verifier's answer to it.
func (s CascadeSimulation) draw(rng *rand.Rand, id string) simTask {
	difficulty, u := len(s.Mix)-1, rng.Float64()
	for i, share := range s.Mix {
		if u < share {
			difficulty = i
			break
		}
		u -= share
	}
	truth := simVerdicts[rng.IntN(2)]
	t := simTask{id: id, truth: truth, answers: make([]Verification, len(s.Verifiers))}
	for i, v := range s.Verifiers {
		a := v.Answers[difficulty]
		answer := Verification{Model: v.Name, Usage: v.Usage}
		// Every draw is made whatever the outcome, so that one
		// verifier's script never shifts another's answers.
		answers, right, at := rng.Float64() < a.Answers, rng.Float64() < a.Accuracy, rng.Float64()
		if answers {
			answer.Decided, answer.Verdict = true, truth
			span := a.Right
			if !right {
				answer.Verdict, span = simVerdicts[0], a.Wrong
				if truth == simVerdicts[0] {
					answer.Verdict = simVerdicts[1]
				}
			}
			answer.Confidence = span[0] + at*(span[1]-span[0])
		}
		t.answers[i] = answer
	}
	return t
}

// simRun is one configuration's fresh tasks in one deployment.
type simRun struct {
	tasks, decided, wrong int
	cost                  float64
	decidedBy             map[string]int
}

// deploy runs one deployment of the cascade of the verifiers order names:
// the bootstrap, the deployed tasks and the fresh ones.
func (s CascadeSimulation) deploy(order []int, bootstrap, deployed, fresh []simTask) simRun {
	names := make([]string, len(order))
	for i, v := range order {
		names[i] = s.Verifiers[v].Name
	}
	policy := &Policy{Agent: PolicyAgent{Cascade: names,
		Certified: &ErrorTarget{ErrorRate: s.TargetErrorRate, Confidence: s.Confidence}}}
	labels := map[string][]LabelledPair{}
	certificates := func(verifier string) *float64 {
		return Certify(Evidence(labels[verifier]), s.TargetErrorRate, s.Confidence).Threshold
	}
	template := &Task{AllowedVerdicts: simVerdicts, ConfidenceThreshold: 1, AuditRate: &s.AuditRate}
	label := func(stages []CascadeStage, tasks []simTask) {
		for _, st := range tasks {
			t, _ := s.run(order, stages, st)
			decided := t.Status == StatusCompleted
			if decided && !ChosenForAudit(t.ID, s.AuditRate) {
				continue
			}
			truth := st.truth
			for _, p := range VerifierPairsOf(t, Attempt{Tier: TierHuman, Verdict: &truth, Audit: decided}) {
				labels[p.Verifier] = append(labels[p.Verifier], p)
			}
		}
	}
	label(PlanCascade(template, policy, nil, nil), bootstrap)
	label(PlanCascade(template, policy, nil, certificates), deployed)
	stages := PlanCascade(template, policy, nil, certificates)
	out := simRun{decidedBy: map[string]int{}}
	for _, st := range fresh {
		t, cost := s.run(order, stages, st)
		out.tasks++
		out.cost += cost
		if t.Status != StatusCompleted {
			continue
		}
		out.decided++
		if *t.FinalVerdict != st.truth {
			out.wrong++
		}
		out.decidedBy[*t.Attempts[len(t.Attempts)-1].Verifier]++
	}
	return out
}

// run takes one task through the cascade's stages as the worker does:
// each verifier's answer routed by NextCascadeStep until one decides or
// the task goes to people. It returns the task and what the calls cost.
func (s CascadeSimulation) run(order []int, stages []CascadeStage, st simTask) (*Task, float64) {
	rate := s.AuditRate
	t := &Task{ID: st.id, AllowedVerdicts: simVerdicts, ConfidenceThreshold: 1, AuditRate: &rate, Status: StatusPending}
	now, cost := time.Unix(0, 0), 0.0
	for t.Status == StatusPending {
		stage := StageOf(t, stages)
		v := s.Verifiers[order[stage]]
		answer := st.answers[order[stage]]
		if c := CostOf(v.Price, answer.Usage); c != nil {
			cost += *c
		}
		step := NextCascadeStep(t, stages, stage, answer, nil, now, now, AgentRetry{})
		t.Attempts = append(t.Attempts, step.Attempt)
		t.Status, t.CascadeStage = step.Next, step.Stage
		if step.Next == StatusCompleted {
			t.FinalVerdict = step.Attempt.Verdict
		}
	}
	return t, cost
}

// simSum adds up one configuration's deployments.
type simSum struct {
	exceeded, withDecisions int
	coverage, errors, worst float64
	cost                    float64
	decided, tasks          int
	decidedBy               map[string]int
}

func (m *simSum) add(r simRun, alpha float64) {
	if m.decidedBy == nil {
		m.decidedBy = map[string]int{}
	}
	m.coverage += float64(r.decided) / float64(max(r.tasks, 1))
	if r.decided > 0 {
		e := float64(r.wrong) / float64(r.decided)
		m.withDecisions++
		m.errors += e
		m.worst = max(m.worst, e)
		if e > alpha {
			m.exceeded++
		}
	}
	m.cost += r.cost
	m.decided += r.decided
	m.tasks += r.tasks
	for name, n := range r.decidedBy {
		m.decidedBy[name] += n
	}
}

func (m simSum) outcome(deployments int) SimOutcome {
	o := SimOutcome{Exceeded: m.exceeded, Coverage: m.coverage / float64(max(deployments, 1)), WorstError: m.worst,
		DecidedBy: map[string]float64{}}
	if m.withDecisions > 0 {
		o.MeanError = m.errors / float64(m.withDecisions)
	}
	if m.decided > 0 {
		o.CostPerDecided = m.cost / float64(m.decided)
	}
	for name, n := range m.decidedBy {
		o.DecidedBy[name] = float64(n) / float64(max(m.tasks, 1))
	}
	return o
}

// ScriptedCascade is the simulation the bench runs and the test checks:
// rules, a small model and a large one over tasks a half easy, a third
// middling and a sixth hard, certified at 10% with 90% confidence, blind
// audits at 20%, 200 deployments of 1,000 bootstrap tasks, 3,000 deployed
// and 2,000 fresh. The rules answer six easy tasks in ten and are almost
// always right, at confidence 1; the small model (sampling, so its
// confidence ranks its answers well) is good on easy and middling tasks
// and a coin toss on hard ones; the large model costs more, is fair
// everywhere, and its right and wrong answers' confidences overlap
// between 0.5 and 0.8.
func ScriptedCascade() CascadeSimulation {
	return CascadeSimulation{
		Verifiers: []SimVerifier{
			{Name: "rules", Answers: []SimAnswer{
				{Answers: 0.6, Accuracy: 0.995, Right: [2]float64{1, 1}, Wrong: [2]float64{1, 1}},
				{}, {},
			}},
			{Name: "small", Price: Price{InputPerMillion: 0.15, OutputPerMillion: 0.6}, Usage: Usage{InputTokens: 4000, OutputTokens: 300},
				Answers: []SimAnswer{
					{Answers: 1, Accuracy: 0.95, Right: [2]float64{0.7, 1}, Wrong: [2]float64{0.3, 0.75}},
					{Answers: 1, Accuracy: 0.85, Right: [2]float64{0.6, 1}, Wrong: [2]float64{0.3, 0.7}},
					{Answers: 1, Accuracy: 0.5, Right: [2]float64{0.3, 0.75}, Wrong: [2]float64{0.3, 0.75}},
				}},
			{Name: "large", Price: Price{InputPerMillion: 3, OutputPerMillion: 15}, Usage: Usage{InputTokens: 800, OutputTokens: 60},
				Answers: []SimAnswer{
					{Answers: 1, Accuracy: 0.9, Right: [2]float64{0.5, 1}, Wrong: [2]float64{0.3, 0.8}},
					{Answers: 1, Accuracy: 0.85, Right: [2]float64{0.5, 1}, Wrong: [2]float64{0.3, 0.8}},
					{Answers: 1, Accuracy: 0.75, Right: [2]float64{0.5, 1}, Wrong: [2]float64{0.3, 0.8}},
				}},
		},
		Mix:             []float64{0.5, 1.0 / 3, 1.0 / 6},
		TargetErrorRate: 0.1, Confidence: 0.9, AuditRate: 0.2,
		Bootstrap: 1000, Deployed: 3000, Fresh: 2000, Deployments: 200, Seed: 43,
	}
}

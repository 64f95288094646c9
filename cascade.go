package arbiter

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"cel.dev/cel-go/cel"

	"github.com/arbiterhq/arbiter/internal/celtask"
)

// The agent tier as a cascade.
//
// A task's claims ask the verifiers of its cascade in order: rules, say,
// then a small model, then a large one. An answer at or above its
// verifier's threshold decides the task; otherwise the task passes to the
// next verifier, and after the last to people. Each call is an attempt
// naming its verifier; the one that passes the task on says so
// (Attempt.PassedOn). A verifier whose calls fail MaxAgentFailures times,
// or stay throttled until the deadline nears, passes the task on too: the
// attempt says why. The cascade comes from the task's policy (its
// cascade, else the verifiers file's), each verifier's threshold from the
// policy's thresholds, else its certificate when the policy is certified
// (no certificate yet: it passes every answer on), else the task's own
// confidence_threshold. A policy's require_person_if sends the tasks it
// matches to people before any verifier is asked.

// PassAll is the threshold of a verifier that decides nothing: certified
// mode with no certificate yet. No confidence reaches it.
const PassAll = 2.0

// CascadeStage is one verifier of a task's cascade and the threshold its
// answers must reach to decide.
type CascadeStage struct {
	Verifier  string
	Threshold float64
}

// Certificates returns the threshold a verifier's current certificate
// gives the tasks of a policy: nil when it has none yet.
type Certificates func(verifier string) *float64

// PlanCascade returns t's cascade under its policy p (nil for none) with
// defaults, the verifiers file's cascade: p's cascade, else defaults;
// each verifier's threshold p's thresholds[name], else, for a certified
// policy, certified(name) (PassAll without a certificate), else t's
// confidence_threshold.
func PlanCascade(t *Task, p *Policy, defaults []string, certified Certificates) []CascadeStage {
	names := defaults
	if p != nil && len(p.Agent.Cascade) > 0 {
		names = p.Agent.Cascade
	}
	stages := make([]CascadeStage, 0, len(names))
	for _, name := range names {
		s := CascadeStage{Verifier: name, Threshold: t.ConfidenceThreshold}
		switch {
		case p != nil && p.Agent.Thresholds[name] != nil:
			s.Threshold = *p.Agent.Thresholds[name]
		case p != nil && p.Agent.Certified != nil:
			s.Threshold = PassAll
			if certified != nil {
				if c := certified(name); c != nil {
					s.Threshold = *c
				}
			}
		}
		stages = append(stages, s)
	}
	return stages
}

// StageOf returns the stage of stages t's next call asks: t's cascade
// stage (Task.CascadeStage, moved on each time a verifier passed it on),
// within the cascade (a policy that dropped verifiers leaves the last).
func StageOf(t *Task, stages []CascadeStage) int {
	return min(max(t.CascadeStage, 0), len(stages)-1)
}

// NextCascadeStep routes a call to the verifier of stages[stage] on t,
// made from started to now, as NextAgentStep does with that verifier's
// threshold; where NextAgentStep would send the task to people — an
// answer below the threshold, a declined one, MaxAgentFailures failed
// calls, a throttled one whose deadline nears — and a verifier is left,
// the task passes to it instead: pending at once, the attempt marked
// PassedOn, the failures count started anew. The attempt names the
// verifier.
func NextCascadeStep(t *Task, stages []CascadeStage, stage int, v Verification, callErr error, started, now time.Time, retry AgentRetry) AgentStep {
	at := *t
	at.ConfidenceThreshold = stages[stage].Threshold
	step := NextAgentStep(&at, v, callErr, started, now, retry)
	step.Stage = stage
	name := stages[stage].Verifier
	step.Attempt.Verifier = &name
	if !step.Throttled && (v.Usage != Usage{}) {
		in, out := v.Usage.InputTokens, v.Usage.OutputTokens
		step.Attempt.InputTokens, step.Attempt.OutputTokens = &in, &out
	}
	if step.Next == StatusHumanNeeded && stage+1 < len(stages) {
		step.Next, step.RunAfter, step.Stage = StatusPending, TimestampOf(now), stage+1
		step.Attempt.PassedOn, step.ResetFailures = true, true
	}
	return step
}

// SkipStep passes t on from the verifier of stages[stage], which this
// worker cannot ask (the verifiers file names no such verifier): an
// attempt saying so, and the next verifier, or people after the last.
func SkipStep(stages []CascadeStage, stage int, now time.Time) AgentStep {
	at, name := TimestampOf(now), stages[stage].Verifier
	reason := fmt.Sprintf("no verifier named %s in the verifiers file", strconv.Quote(name))
	step := AgentStep{Attempt: Attempt{Tier: TierAgent, Verifier: &name, StartedAt: at, FinishedAt: &at, Error: &reason},
		Next: StatusHumanNeeded, Stage: stage}
	if stage+1 < len(stages) {
		step.Next, step.RunAfter, step.Stage = StatusPending, at, stage+1
		step.Attempt.PassedOn, step.ResetFailures = true, true
	}
	return step
}

// RequirePersonStep sends t to people without asking a verifier: its
// policy's require_person_if expr matched. The attempt's rationale says
// which rule.
func RequirePersonStep(expr string, now time.Time) AgentStep {
	at := TimestampOf(now)
	return AgentStep{Attempt: Attempt{Tier: TierAgent, StartedAt: at, FinishedAt: &at,
		Rationale: "The policy requires a person for this task: require_person_if " + strconv.Quote(expr) + " matched."},
		Next: StatusHumanNeeded}
}

// CostOf returns what usage cost at price, nil when nothing was used.
func CostOf(price Price, u Usage) *float64 {
	if u == (Usage{}) {
		return nil
	}
	c := price.Cost(u)
	if math.IsNaN(c) || math.IsInf(c, 0) {
		return nil
	}
	return &c
}

// requirePersonPrograms keeps the compiled require_person_if expressions,
// so that a worker compiles each once. An expression is a policy's, which
// Validate compiled when it was put: few, and bounded by the policies.
var requirePersonPrograms sync.Map // expression → cel.Program

// RequirePerson reports whether expr, a policy's require_person_if, is true
// for t; an expression that does not evaluate to true (a missing field)
// is no match. An error is a context that is not JSON or an expression
// that does not compile.
func RequirePerson(expr string, t *Task) (bool, error) {
	p, ok := requirePersonPrograms.Load(expr)
	if !ok {
		program, err := celtask.Compile(expr, 0)
		if err != nil {
			return false, err
		}
		p, _ = requirePersonPrograms.LoadOrStore(expr, program)
	}
	vars, err := celtask.Vars(celtask.Task{Prompt: t.Prompt, TaskType: t.TaskType, Touchpoint: t.Touchpoint, Source: t.Source,
		AllowedVerdicts: t.AllowedVerdicts, ConfidenceThreshold: t.ConfidenceThreshold, Context: t.Context})
	if err != nil {
		return false, err
	}
	return celtask.Matches(p.(cel.Program), vars), nil
}

package arbiter

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// The cascade in the calibration report.
//
// Beside each verifier's certificate, the report says who decided the
// tasks of its window — each verifier, people, the fallback at a
// deadline — what each verifier's calls cost per task it decided, a
// bound on the error of everything the agent tier decided, and whether
// a verifier's own decisions have drifted.
//
// The bound. The blind audits of the tasks a verifier v decided are a
// sample of those decisions at the audit rate, so the audits give an
// exact one-sided bound ε_v on the error rate of v's decisions at
// confidence 1−δ (Clopper–Pearson, one stratum per audit rate as the
// certificate does). If every ε_v holds — by the union bound, with
// confidence at least 1 − k·δ for the k verifiers bounded this way — the
// share of all the window's tasks the agent tier decided wrongly is at
// most Σ_v c_v·ε_v, where c_v is the share of the tasks v decided, and
// the error rate among the tier's decisions at most that over Σ_v c_v. A
// verifier that decided tasks with no audit of them counts ε_v = 1: the
// bound stays true, and the report names it.

// MaxCascadeTasks bounds the tasks the composition counts: the newest of
// the window.
const MaxCascadeTasks = 50_000

// CascadeWindow is how far back the composition reaches when the report
// sets no created_after: the drift window's age.
const CascadeWindow = DefaultDriftAge

// People and Fallback name the deciders that are not verifiers.
const (
	DeciderPeople   = "people"
	DeciderFallback = "fallback"
	// DeciderAgent names the agent tier's decisions that name no
	// verifier (made before verifiers had names).
	DeciderAgent = "agent"
)

// DeciderCount is how many of the window's tasks one decider finished:
// Tier is the task's final tier, Verifier its final verifier ("" for
// none).
type DeciderCount struct {
	Tier     string
	Verifier string
	Tasks    int
}

// VerifierSpend is what a verifier's calls on the window's tasks took:
// every call, those that passed the task on too.
type VerifierSpend struct {
	Verifier string
	Calls    int
	Cost     float64
}

// DecisionAudit is one blind audit of a task a verifier decided, the
// newest first: its version, weight (1/audit rate) and whether the
// person agreed.
type DecisionAudit struct {
	Verifier string
	Version  string
	Weight   float64
	Correct  bool
}

// CascadeData is what the store reads for the report's cascade.
type CascadeData struct {
	Since    Timestamp
	Deciders []DeciderCount
	Spend    []VerifierSpend
	// Audits are, per verifier, the newest DefaultDriftAudits blind
	// audits of its decisions in the window, newest first.
	Audits []DecisionAudit
	// Capped is true when MaxCascadeTasks tasks or more were in the
	// window; the newest were counted.
	Capped bool
}

// CascadeReport is the report's cascade: who decided, at what cost, and
// the bound on the agent tier's error.
type CascadeReport struct {
	// Since is where the window starts (tasks created after it).
	Since    Timestamp        `json:"since"`
	Tasks    int              `json:"tasks"`
	Capped   bool             `json:"capped"`
	Deciders []CascadeDecider `json:"deciders"`
	// AgentShare is the share of the tasks the agent tier decided.
	AgentShare float64 `json:"agent_share"`
	// ErrorBound bounds the share of all the tasks the agent tier
	// decided wrongly (Σ c_v·ε_v); AgentErrorBound the error rate among
	// the tier's decisions (ErrorBound / AgentShare). Both hold together
	// with BoundConfidence (1 − k·δ); nil when the tier decided nothing.
	ErrorBound      *float64 `json:"error_bound"`
	AgentErrorBound *float64 `json:"agent_error_bound"`
	BoundConfidence float64  `json:"bound_confidence"`
	// Unaudited names the verifiers that decided tasks with no audit of
	// them: the bound counts each of their decisions as wrong.
	Unaudited []string `json:"unaudited"`
	Method    string   `json:"method"`
	Message   string   `json:"message"`
}

// CascadeDecider is one decider's part: a verifier, people or the
// fallback.
type CascadeDecider struct {
	Decider string  `json:"decider"`
	Tier    string  `json:"tier"`
	Tasks   int     `json:"tasks"`
	Share   float64 `json:"share"`
	// Calls and Cost are a verifier's calls on the window's tasks and
	// what they cost (the verifiers file's price); CostPerDecided is
	// Cost over the tasks it decided.
	Calls          int      `json:"calls"`
	Cost           float64  `json:"cost"`
	CostPerDecided *float64 `json:"cost_per_decided"`
	// Audits and AuditErrors are the blind audits of its decisions and
	// those a person disagreed with; ErrorUpper is ε_v, the bound on its
	// decisions' error rate at the report's confidence (nil without
	// audits).
	Audits      int      `json:"audits"`
	AuditErrors int      `json:"audit_errors"`
	ErrorUpper  *float64 `json:"error_upper"`
	// Drift is the drift rule (NextDrift) on the audits of its newest
	// version's decisions; nil for people and the fallback.
	Drift *VerifierDrift `json:"drift"`
}

// VerifierDrift is a verifier's drift alarm: the window of its newest
// version's audited decisions, and whether it shows, with the report's
// confidence, an error rate above the report's target.
type VerifierDrift struct {
	Version    string  `json:"version"`
	Audits     int     `json:"audits"`
	Errors     int     `json:"errors"`
	ErrorRate  float64 `json:"error_rate"`
	ErrorLower float64 `json:"error_lower"`
	Target     float64 `json:"target_error_rate"`
	Confidence float64 `json:"confidence"`
	Drifted    bool    `json:"drifted"`
}

// CascadeBoundMethod says how the report's bound is derived.
const CascadeBoundMethod = "Union bound over the verifiers: each verifier's decisions are bounded by an exact Clopper–Pearson upper bound from the blind audits of them (one stratum per audit rate); weighted by the share of the tasks each decided, the bounds sum to a bound on the share the agent tier decided wrongly, which holds with confidence 1 − k·δ for k verifiers. A verifier that decided tasks without an audit counts every decision as wrong."

// ComposeCascade computes the report's cascade from the store's data at
// the report's target error rate and confidence (1−δ).
func ComposeCascade(d CascadeData, target, confidence float64) CascadeReport {
	r := CascadeReport{Since: d.Since, Capped: d.Capped, Deciders: []CascadeDecider{}, Unaudited: []string{},
		Method: CascadeBoundMethod, BoundConfidence: 1}
	by := map[string]*CascadeDecider{}
	decider := func(name, tier string) *CascadeDecider {
		c := by[name]
		if c == nil {
			c = &CascadeDecider{Decider: name, Tier: tier}
			by[name] = c
		}
		return c
	}
	for _, n := range d.Deciders {
		r.Tasks += n.Tasks
		switch {
		case n.Tier == TierAgent:
			decider(cmp.Or(n.Verifier, DeciderAgent), TierAgent).Tasks += n.Tasks
		case n.Tier == TierFallback:
			decider(DeciderFallback, TierFallback).Tasks += n.Tasks
		default:
			decider(DeciderPeople, TierHuman).Tasks += n.Tasks
		}
	}
	for _, s := range d.Spend {
		c := decider(s.Verifier, TierAgent)
		c.Calls += s.Calls
		c.Cost += s.Cost
	}
	audits := map[string][]DecisionAudit{}
	for _, a := range d.Audits {
		audits[a.Verifier] = append(audits[a.Verifier], a)
	}
	delta := 1 - confidence
	var bound float64
	for _, c := range by {
		if r.Tasks > 0 {
			c.Share = float64(c.Tasks) / float64(r.Tasks)
		}
		if c.Tier != TierAgent {
			continue
		}
		if c.Tasks > 0 && c.Calls > 0 {
			per := c.Cost / float64(c.Tasks)
			c.CostPerDecided = &per
		}
		mine := audits[c.Decider]
		c.Drift = driftOf(mine, target, confidence)
		epsilon := 1.0
		if len(mine) > 0 {
			var strata []samplingStratum
			for _, a := range mine {
				i := slices.IndexFunc(strata, func(s samplingStratum) bool { return s.weight == a.Weight })
				if i < 0 {
					i = len(strata)
					strata = append(strata, samplingStratum{weight: a.Weight})
				}
				strata[i].n++
				c.Audits++
				if !a.Correct {
					strata[i].errors++
					c.AuditErrors++
				}
			}
			epsilon = stratifiedUpper(strata, delta, false)
			c.ErrorUpper = &epsilon
			if c.Tasks > 0 {
				r.BoundConfidence -= delta
			}
		} else if c.Tasks > 0 {
			r.Unaudited = append(r.Unaudited, c.Decider)
		}
		r.AgentShare += c.Share
		bound += c.Share * epsilon
	}
	r.BoundConfidence = max(r.BoundConfidence, 0)
	for _, c := range by {
		r.Deciders = append(r.Deciders, *c)
	}
	slices.SortFunc(r.Deciders, compareDeciders)
	slices.Sort(r.Unaudited)
	if r.AgentShare > 0 {
		b, rate := bound, min(bound/r.AgentShare, 1)
		r.ErrorBound, r.AgentErrorBound = &b, &rate
	}
	r.Message = r.summary()
	return r
}

// driftOf applies the drift rule to the audits of a verifier's decisions
// (newest first) of its newest version; nil without audits.
func driftOf(audits []DecisionAudit, target, confidence float64) *VerifierDrift {
	if len(audits) == 0 {
		return nil
	}
	version := audits[0].Version
	var w DriftWindow
	for _, a := range audits {
		if a.Version != version {
			continue
		}
		w.Audits++
		if !a.Correct {
			w.Errors++
		}
	}
	s := DefaultDriftSettings
	s.Target, s.Confidence = target, confidence
	drifted, _ := NextDrift(false, w, s)
	return &VerifierDrift{Version: version, Audits: w.Audits, Errors: w.Errors, ErrorRate: w.ErrorRate(),
		ErrorLower: w.ErrorLower(confidence), Target: target, Confidence: confidence, Drifted: drifted}
}

// compareDeciders orders the verifiers by the share they decided, then
// people, then the fallback.
func compareDeciders(a, b CascadeDecider) int {
	rank := func(c CascadeDecider) int {
		return map[string]int{TierAgent: 0, TierHuman: 1, TierFallback: 2}[c.Tier]
	}
	return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(b.Tasks, a.Tasks), strings.Compare(a.Decider, b.Decider))
}

// summary says the cascade in a sentence.
func (r CascadeReport) summary() string {
	if r.Tasks == 0 {
		return "No task of the window is finished yet."
	}
	var parts []string
	for _, c := range r.Deciders {
		if c.Tasks > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", c.Decider, FormatShare(c.Share)))
		}
	}
	msg := fmt.Sprintf("Of %d finished tasks: %s.", r.Tasks, strings.Join(parts, ", "))
	if r.AgentErrorBound != nil {
		msg += fmt.Sprintf(" The agent tier's decisions are wrong at most %s of the time (%s of all tasks), with %s confidence.",
			FormatShare(*r.AgentErrorBound), FormatShare(*r.ErrorBound), FormatShare(r.BoundConfidence))
	}
	if len(r.Unaudited) > 0 {
		msg += fmt.Sprintf(" No audit yet of what %s decided: the bound counts those decisions as wrong.", strings.Join(r.Unaudited, ", "))
	}
	return msg
}

package arbiter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter/internal/celtask"
)

// TierFallback is the final_tier of a task its on-expiry outcome decided
// when its deadline passed, and the tier of the attempt that says so.
const TierFallback = "fallback"

// On-expiry outcomes: what happens to a task nobody decided by its
// deadline.
const (
	// OnExpiryExpire expires the task (status expired, final_* null).
	OnExpiryExpire = "expire"
	// OnExpiryAgentVerdict takes the verifier's last verdict when its
	// confidence reached the agent floor, else the fallback.
	OnExpiryAgentVerdict = "agent_verdict"
	// OnExpiryVerdictPrefix begins "verdict:<v>": the task is decided v.
	OnExpiryVerdictPrefix = "verdict:"
)

// DefaultPolicyName is the task_type of an account's default policy: the
// policy of every task type without its own (and of tasks of type
// "default").
const DefaultPolicyName = "default"

// OnExpiry is a task's on-expiry outcome. The zero value is OnExpiryExpire.
type OnExpiry struct {
	// Outcome is OnExpiryExpire, OnExpiryAgentVerdict or "verdict:<v>".
	Outcome string `json:"on_expiry"`
	// AgentFloor is the least confidence at which OnExpiryAgentVerdict
	// takes the verifier's verdict; nil for the other outcomes.
	AgentFloor *float64 `json:"agent_floor,omitempty"`
	// Fallback is what OnExpiryAgentVerdict does below the floor:
	// OnExpiryExpire or "verdict:<v>"; "" for the other outcomes.
	Fallback string `json:"on_expiry_fallback,omitempty"`
}

// IsExpire reports whether o only expires the task.
func (o OnExpiry) IsExpire() bool { return o.Outcome == "" || o.Outcome == OnExpiryExpire }

// ExpiryVerdict returns v of an outcome "verdict:<v>", and whether outcome
// is one.
func ExpiryVerdict(outcome string) (string, bool) {
	v, ok := strings.CutPrefix(outcome, OnExpiryVerdictPrefix)
	return v, ok && v != ""
}

// Validate returns an EINVALID error naming the field at fault unless o
// is a valid outcome: expire; verdict:<v> with a non-empty v; or
// agent_verdict with a floor from 0 to 1 and a fallback that is expire or
// verdict:<v> (expire when left out). Neither floor nor fallback goes with
// another outcome.
func (o OnExpiry) Validate() error {
	switch _, fixed := ExpiryVerdict(o.Outcome); {
	case o.IsExpire() || fixed:
		if o.AgentFloor != nil {
			return FieldErrorf("agent_floor", "agent_floor goes only with on_expiry agent_verdict.")
		} else if o.Fallback != "" {
			return FieldErrorf("on_expiry_fallback", "on_expiry_fallback goes only with on_expiry agent_verdict.")
		}
		if fixed && (strings.IndexByte(o.Outcome, 0) >= 0 || len([]rune(o.Outcome)) > len(OnExpiryVerdictPrefix)+MaxVerdictChars) {
			return FieldErrorf("on_expiry", "on_expiry verdict:<v> takes a verdict of at most %d characters.", MaxVerdictChars)
		}
	case o.Outcome == OnExpiryAgentVerdict:
		if f := o.AgentFloor; f == nil || math.IsNaN(*f) || *f < 0 || *f > 1 {
			return FieldErrorf("agent_floor", "on_expiry agent_verdict needs agent_floor, a number from 0 to 1.")
		}
		if _, fixed := ExpiryVerdict(o.Fallback); o.Fallback != "" && o.Fallback != OnExpiryExpire && !fixed {
			return FieldErrorf("on_expiry_fallback", "on_expiry_fallback must be \"expire\" or \"verdict:<v>\".")
		}
	default:
		return FieldErrorf("on_expiry", "on_expiry must be \"expire\", \"verdict:<v>\" or \"agent_verdict\".")
	}
	return nil
}

// CheckVerdicts returns EINVALID unless every verdict o may decide is one
// of allowed: a task cannot be decided a verdict it does not allow.
func (o OnExpiry) CheckVerdicts(allowed []string) error {
	for _, f := range []struct{ field, outcome string }{{"on_expiry", o.Outcome}, {"on_expiry_fallback", o.Fallback}} {
		v, ok := ExpiryVerdict(f.outcome)
		if !ok {
			continue
		}
		found := false
		for _, a := range allowed {
			found = found || a == v
		}
		if !found {
			return FieldErrorf(f.field, "%s decides %q, which is not one of allowed_verdicts.", f.field, v)
		}
	}
	return nil
}

// Describe says in a few words what o does at the deadline: "expire",
// "approve", "the agent's verdict at 0.9 or more, else reject".
func (o OnExpiry) Describe() string {
	say := func(outcome string) string {
		if v, ok := ExpiryVerdict(outcome); ok {
			return v
		}
		return "expire"
	}
	if o.Outcome == OnExpiryAgentVerdict && o.AgentFloor != nil {
		return fmt.Sprintf("the agent's verdict at confidence %s or more, else %s",
			strconv.FormatFloat(*o.AgentFloor, 'f', -1, 64), say(o.Fallback))
	}
	return say(o.Outcome)
}

// DeadlineOutcome is what happens to a task at its deadline: it expires,
// or it is completed with Attempt (tier fallback) deciding it.
type DeadlineOutcome struct {
	// Expire is true when the task expires; Attempt is then the zero
	// value and nothing is recorded.
	Expire bool
	// Attempt is the fallback attempt that decides the task: its verdict,
	// its confidence (the agent's for agent_verdict, nil for a fixed
	// verdict) and a rationale saying which rule decided.
	Attempt Attempt
}

// DeadlineStep decides what happens to t, whose deadline passed at now
// while it was not final, by its on-expiry outcome o and its attempts.
// A fixed verdict decides it when t still allows that verdict; with
// agent_verdict, the verifier's last verdict decides when its confidence
// is at least the floor and t allows it, else the fallback does as a
// fixed verdict would; anything else expires it. A task a person has
// voted on (HasVotes) expires whatever o says: its votes are kept.
func DeadlineStep(t *Task, o OnExpiry, now Timestamp) DeadlineOutcome {
	if HasVotes(t) {
		return DeadlineOutcome{Expire: true}
	}
	decide := func(verdict string, confidence *float64, rationale string) DeadlineOutcome {
		finished := now
		return DeadlineOutcome{Attempt: Attempt{Tier: TierFallback, Verdict: &verdict, Confidence: confidence,
			Rationale: rationale, StartedAt: now, FinishedAt: &finished, ActionDigest: t.ProposedDigest()}}
	}
	fixed := func(outcome, why string) DeadlineOutcome {
		if v, ok := ExpiryVerdict(outcome); ok && t.Allows(v) {
			return decide(v, nil, why+"on_expiry decided "+strconv.Quote(v)+" when the deadline passed.")
		}
		return DeadlineOutcome{Expire: true}
	}
	switch {
	case o.Outcome == OnExpiryAgentVerdict && o.AgentFloor != nil:
		if a := lastAgentVerdict(t); a != nil && *a.Confidence >= *o.AgentFloor && t.Allows(*a.Verdict) {
			confidence := *a.Confidence
			return decide(*a.Verdict, &confidence, fmt.Sprintf(
				"on_expiry took the agent's verdict %q at confidence %s, at least the floor %s, when the deadline passed.",
				*a.Verdict, strconv.FormatFloat(confidence, 'f', -1, 64), strconv.FormatFloat(*o.AgentFloor, 'f', -1, 64)))
		}
		return fixed(o.Fallback, "The agent's verdict fell short of the floor "+strconv.FormatFloat(*o.AgentFloor, 'f', -1, 64)+"; ")
	case !o.IsExpire():
		return fixed(o.Outcome, "")
	}
	return DeadlineOutcome{Expire: true}
}

// HasVotes reports whether a person has voted on t, a task that asks
// several votes and is not decided. Its deadline then expires it, as for a
// task without an on-expiry outcome, and its votes are kept: an on-expiry
// outcome is the default of a task nobody decided, and a default must
// never override a person who looked at the task (a reject vote completed
// as approve because a second reviewer did not come in time), nor decide
// with a verdict the votes did not reach.
func HasVotes(t *Task) bool {
	return len(VotesOf(t)) > 0
}

// lastAgentVerdict returns t's last agent attempt that gave a verdict with
// a confidence, or nil.
func lastAgentVerdict(t *Task) *Attempt {
	for i := len(t.Attempts) - 1; i >= 0; i-- {
		if a := &t.Attempts[i]; a.Tier == TierAgent && a.Verdict != nil && a.Confidence != nil && a.Error == nil {
			return a
		}
	}
	return nil
}

// Policy is how an account handles tasks of one task_type (or, named
// DefaultPolicyName, of every type without a policy of its own). Each
// field left nil (or empty) leaves the create's value, or its default, as
// it is.
type Policy struct {
	TaskType            string    `json:"task_type"`
	ConfidenceThreshold *float64  `json:"confidence_threshold"`
	DeadlineSeconds     *int      `json:"deadline_seconds"`
	AuditRate           *float64  `json:"audit_rate"`
	OnExpiry            OnExpiry  `json:"-"`
	UpdatedAt           Timestamp `json:"updated_at"`
	// Notify, when not empty, is where the question of a task of the type
	// goes (see ParseNotify) when its create names no notify targets; the
	// default policy's is the account's default for every type without
	// its own.
	Notify []string `json:"notify"`
	// Review, when not nil, is the review requirement of a task of the
	// type whose create gives none of the requirement's fields; the
	// create's requested_by stays its own.
	Review *ReviewRequirement `json:"-"`
	// Alerts are the policy's reminders and escalation rungs
	// (escalation.go); none when zero.
	Alerts Alerts `json:"-"`
	// EditVerdicts, when not empty, are the verdicts that allow a
	// reviewer to edit the action of a task of the type whose create
	// gives no edit_verdicts (action.go).
	EditVerdicts []string `json:"edit_verdicts"`
	// Target, when not nil, is the error rate the policy holds the
	// agent's answers to, with the confidence it is certified at: applying
	// a certified threshold sets it to the certificate's, and drift is
	// watched against it.
	Target *ErrorTarget `json:"-"`
	// Agent is how the agent tier treats the tasks of the type
	// (cascade.go): zero leaves the verifiers file's cascade, each
	// verifier at the task's confidence_threshold.
	Agent PolicyAgent `json:"-"`
}

// PolicyAgent is a policy's say on the agent tier's cascade.
type PolicyAgent struct {
	// Cascade names the verifiers asked, in order; nil for the
	// verifiers file's cascade.
	Cascade []string `json:"cascade,omitempty"`
	// Thresholds are per verifier: an answer at or above decides. A
	// verifier without one takes its certificate when Certified is set,
	// else the task's confidence_threshold.
	Thresholds map[string]*float64 `json:"thresholds,omitempty"`
	// Certified, when set, has each verifier without a threshold decide
	// at its current certificate for this target (none yet: it passes
	// every task on).
	Certified *ErrorTarget `json:"certified,omitempty"`
	// RequirePersonIf is a CEL expression over task and context, as the
	// rules verifier reads them: a task it matches goes to people
	// whatever the verifiers would say; "" for none.
	RequirePersonIf string `json:"require_person_if,omitempty"`
}

// IsZero reports whether the policy leaves the cascade as it is.
func (a PolicyAgent) IsZero() bool {
	return len(a.Cascade) == 0 && len(a.Thresholds) == 0 && a.Certified == nil && a.RequirePersonIf == ""
}

// asField returns err, an EINVALID *Error, naming field instead of its
// own: the policy field whose part was at fault.
func asField(field string, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return err
	}
	named := *e
	named.Field = field
	return &named
}

// MaxRequirePersonIfChars bounds a require_person_if expression.
const MaxRequirePersonIfChars = 1000

// Validate returns an EINVALID error naming the field at fault unless the
// cascade names verifiers (each once), the thresholds are from 0 to 1,
// the certified target is one a report takes, and require_person_if is a
// boolean CEL expression.
func (a PolicyAgent) Validate() error {
	if len(a.Cascade) > MaxVerifiers {
		return FieldErrorf("cascade", "cascade may name at most %d verifiers.", MaxVerifiers)
	}
	for i, name := range a.Cascade {
		if err := CheckVerifierName(name); err != nil {
			return asField("cascade", err)
		}
		if slices.Contains(a.Cascade[:i], name) {
			return FieldErrorf("cascade", "cascade names %q twice.", name)
		}
	}
	if len(a.Thresholds) > MaxVerifiers {
		return FieldErrorf("thresholds", "thresholds may name at most %d verifiers.", MaxVerifiers)
	}
	for name, t := range a.Thresholds {
		if err := CheckVerifierName(name); err != nil {
			return asField("thresholds", err)
		}
		if t == nil || math.IsNaN(*t) || *t < 0 || *t > 1 {
			return FieldErrorf("thresholds", "The threshold of %s must be a number from 0 to 1.", name)
		}
	}
	if c := a.Certified; c != nil {
		if err := c.Validate(); err != nil {
			return asField("certified", err)
		}
	}
	if e := a.RequirePersonIf; e != "" {
		if utf8.RuneCountInString(e) > MaxRequirePersonIfChars || !utf8.ValidString(e) {
			return FieldErrorf("require_person_if", "require_person_if must be an expression of at most %d characters.", MaxRequirePersonIfChars)
		}
		if _, err := celtask.Compile(e, 0); err != nil {
			return FieldErrorf("require_person_if", "require_person_if does not compile: %s.", err.Error())
		}
	}
	return nil
}

// ErrorTarget is an error rate the agent is held to and the confidence a
// certificate of it is given at.
type ErrorTarget struct {
	ErrorRate  float64 // α, in (0, 1)
	Confidence float64 // 1−δ, from 0.5 to below 1
}

// Validate returns an EINVALID error naming the field at fault unless the
// error rate is in (0, 1) and the confidence from 0.5 to below 1, as a
// calibration report takes them.
func (t ErrorTarget) Validate() error {
	if math.IsNaN(t.ErrorRate) || t.ErrorRate <= 0 || t.ErrorRate >= 1 {
		return FieldErrorf("target_error_rate", "target_error_rate must be a share between 0 and 1, such as 0.02.")
	}
	if math.IsNaN(t.Confidence) || t.Confidence < 0.5 || t.Confidence >= 1 {
		return FieldErrorf("target_confidence", "target_confidence must be a share from 0.5 to below 1, such as 0.95.")
	}
	return nil
}

// Validate returns an EINVALID error naming the field at fault unless p's
// values are each what a create accepts: a task type label, a threshold
// and audit rate from 0 to 1, a deadline in the create's range, a valid
// on-expiry outcome, which needs a deadline unless it is expire.
func (p *Policy) Validate() error {
	if p.TaskType == "" {
		return FieldErrorf("task_type", "task_type is required: a task type, or %q for the default policy.", DefaultPolicyName)
	} else if err := checkLabel("task_type", p.TaskType); err != nil {
		return err
	}
	if t := p.ConfidenceThreshold; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 1) {
		return FieldErrorf("confidence_threshold", "confidence_threshold must be a number between 0 and 1.")
	}
	if d := p.DeadlineSeconds; d != nil && (*d < MinDeadlineSeconds || *d > MaxDeadlineSeconds) {
		return errDeadline
	}
	if r := p.AuditRate; r != nil {
		if err := CheckAuditRate(*r); err != nil {
			return inField("audit_rate", err)
		}
	}
	if err := p.OnExpiry.Validate(); err != nil {
		return err
	} else if !p.OnExpiry.IsExpire() && p.DeadlineSeconds == nil {
		// Else every create of the type without its own deadline would
		// be refused.
		return FieldErrorf("deadline_seconds", "A policy whose on_expiry is not expire needs deadline_seconds.")
	}
	if len(p.Notify) > 0 {
		if _, err := ParseNotify(stringPointers(p.Notify)); err != nil {
			return err
		}
	}
	if p.Review != nil {
		if _, err := p.Review.ForPolicy(); err != nil {
			return err
		}
	}
	if p.Alerts.NeedsDeadline() && p.DeadlineSeconds == nil {
		return FieldErrorf("deadline_seconds", "A policy whose reminders or escalation wait a share of the deadline needs deadline_seconds.")
	}
	if len(p.EditVerdicts) > MaxVerdicts {
		return FieldErrorf("edit_verdicts", "edit_verdicts may name at most %d verdicts.", MaxVerdicts)
	}
	for i, v := range p.EditVerdicts {
		switch {
		case strings.TrimSpace(v) == "" || utf8.RuneCountInString(v) > MaxVerdictChars || !isText(v):
			return FieldErrorf("edit_verdicts", "edit_verdicts must hold verdicts of 1 to %d characters.", MaxVerdictChars)
		case slices.Contains(p.EditVerdicts[:i], v):
			return FieldErrorf("edit_verdicts", "edit_verdicts names %q twice.", v)
		}
	}
	if p.Target != nil {
		if err := p.Target.Validate(); err != nil {
			return err
		}
	}
	return p.Agent.Validate()
}

// stringPointers returns pointers to list's strings, the form ParseNotify
// reads.
func stringPointers(list []string) []*string {
	out := make([]*string, len(list))
	for i := range list {
		out[i] = &list[i]
	}
	return out
}

// PolicyFields is a set of the create fields a policy can fill.
type PolicyFields uint16

// The create fields a policy can fill.
const (
	FieldThreshold PolicyFields = 1 << iota
	FieldDeadline
	FieldAuditRate
	FieldOnExpiry
	// FieldNotify is the create's notify targets.
	FieldNotify
	// FieldReview is the create's review requirement: reviews_required,
	// consensus, quorum, veto, exclude_requester and tiebreak, all left
	// out (requested_by is the create's own).
	FieldReview
	FieldReminders
	FieldEscalation
	// FieldEditVerdicts is the create's edit_verdicts, which a policy
	// fills for a create whose action has editable members.
	FieldEditVerdicts

	// AllPolicyFields is every field a policy can fill.
	AllPolicyFields = FieldThreshold | FieldDeadline | FieldAuditRate | FieldOnExpiry | FieldNotify | FieldReview |
		FieldReminders | FieldEscalation | FieldEditVerdicts
)

// Apply returns in with the policy's values in the fields in.Omitted (the
// fields the request left out); a field given on the create keeps its
// value. It returns EINVALID when the result does not hold together: an
// outcome deciding a verdict the create does not allow, or one other than
// expire without a deadline, or a review requirement of the policy's that
// vetoes a verdict the create does not allow or excludes a requester it
// does not name. A gold create takes no review requirement: one reviewer
// answers a gold task (gold.go). p may be nil (no policy): the checks
// still apply.
func (p *Policy) Apply(in TaskCreate) (TaskCreate, error) {
	if p != nil {
		if in.Omitted&FieldThreshold != 0 && p.ConfidenceThreshold != nil {
			in.ConfidenceThreshold = *p.ConfidenceThreshold
		}
		if in.Omitted&FieldDeadline != 0 && p.DeadlineSeconds != nil {
			in.DeadlineSeconds = *p.DeadlineSeconds
		}
		if in.Omitted&FieldAuditRate != 0 && p.AuditRate != nil {
			rate := *p.AuditRate
			in.AuditRate = &rate
		}
		if in.Omitted&FieldOnExpiry != 0 && !p.OnExpiry.IsExpire() {
			in.OnExpiry = p.OnExpiry
		}
		if in.Omitted&FieldNotify != 0 && len(p.Notify) > 0 {
			in.Notify = slices.Clone(p.Notify)
		}
		if in.Omitted&FieldReview != 0 && p.Review != nil && in.GoldVerdict == "" {
			review, err := p.reviewFor(in)
			if err != nil {
				return TaskCreate{}, err
			}
			in.Review = review
		}
		if in.Omitted&FieldReminders != 0 && len(p.Alerts.Reminders) > 0 {
			in.Alerts.Reminders = p.Alerts.Reminders
		}
		if in.Omitted&FieldEscalation != 0 && len(p.Alerts.Escalation) > 0 {
			in.Alerts.Escalation = p.Alerts.Escalation
		}
		if in.Omitted&FieldEditVerdicts != 0 && len(p.EditVerdicts) > 0 && in.Action != nil && len(in.Action.Editable) > 0 {
			for _, v := range p.EditVerdicts {
				if !slices.Contains(in.AllowedVerdicts, v) {
					return TaskCreate{}, FieldErrorf("edit_verdicts", "The policy of task_type %q lets %q edit the action, which is not one of allowed_verdicts; give edit_verdicts on the create, or change the policy.",
						p.TaskType, v)
				}
			}
			in.EditVerdicts = slices.Clone(p.EditVerdicts)
		}
	}
	if err := in.OnExpiry.CheckVerdicts(in.AllowedVerdicts); err != nil {
		if p != nil && in.Omitted&FieldOnExpiry != 0 {
			return TaskCreate{}, FieldErrorf("on_expiry", "The policy of task_type %q %s; give on_expiry on the create, or change the policy.",
				p.TaskType, strings.TrimSuffix(strings.Replace(err.Error(), " decides", " decides on expiry", 1), "."))
		}
		return TaskCreate{}, err
	}
	if in.DeadlineSeconds == 0 && !in.OnExpiry.IsExpire() {
		return TaskCreate{}, FieldErrorf("on_expiry", "on_expiry other than expire needs a deadline: give deadline_seconds.")
	}
	if in.DeadlineSeconds == 0 && in.Alerts.NeedsDeadline() {
		field := "reminders"
		if len(in.Alerts.Reminders) == 0 || !(Alerts{Reminders: in.Alerts.Reminders}).NeedsDeadline() {
			field = "escalation"
		}
		return TaskCreate{}, FieldErrorf(field, "%s waiting a share of the deadline (\"50%%\") need a deadline: give deadline_seconds.", field)
	}
	return in, nil
}

// reviewFor returns the policy's review requirement for the create in,
// which gave none of its own: the create's requested_by stays. It returns
// EINVALID when the create cannot take it: a veto the create does not
// allow, or a requester to exclude that the create does not name.
func (p *Policy) reviewFor(in TaskCreate) (*ReviewRequirement, error) {
	r := *p.Review
	r.Veto, r.RequestedBy = slices.Clone(r.Veto), ""
	if in.Review != nil {
		r.RequestedBy = in.Review.RequestedBy
	}
	for _, v := range r.Veto {
		if !slices.Contains(in.AllowedVerdicts, v) {
			return nil, FieldErrorf("veto", "The policy of task_type %q vetoes %q, which is not one of allowed_verdicts; give the review fields on the create, or change the policy.",
				p.TaskType, v)
		}
	}
	if r.ExcludeRequester && r.RequestedBy == "" {
		return nil, FieldErrorf("requested_by", "The policy of task_type %q keeps the requester from voting; give requested_by, the e-mail of the person who asked.",
			p.TaskType)
	}
	if r.IsDefault() {
		return nil, nil
	}
	return &r, nil
}

// PolicyService keeps an account's policies.
type PolicyService interface {
	// ListPolicies returns the account's policies by task type.
	ListPolicies(ctx context.Context, accountID string) ([]Policy, error)
	// FindPolicy returns the account's policy of a task type. Returns
	// ENOTFOUND when it has none.
	FindPolicy(ctx context.Context, accountID, taskType string) (*Policy, error)
	// PutPolicy stores the policy, replacing the one of its task type,
	// and records who did in the audit log. Tasks created before keep
	// the values they were created with. Returns EINVALID (see
	// Policy.Validate) and EFORBIDDEN when by may not manage policies.
	PutPolicy(ctx context.Context, accountID string, p Policy, by Actor) (*Policy, error)
	// DeletePolicy removes the account's policy of a task type. Returns
	// ENOTFOUND when it has none, EFORBIDDEN as PutPolicy.
	DeletePolicy(ctx context.Context, accountID, taskType string, by Actor) error
	// ApplyCertifiedThreshold sets the confidence_threshold of the policy
	// the calibration report of f concerns (f.PolicyTaskType) to
	// threshold when the report's certificate, computed again from the
	// labels as they are now, certifies that threshold
	// (CheckCertifiedThreshold), and the policy's target to the
	// certificate's (f's target error rate and confidence). A policy that
	// does not exist is created with those values alone; the others are
	// left as they are. Records who did in the audit log. Returns EINVALID
	// for a report that concerns no policy, ECONFLICT when the certificate
	// does not certify threshold (below where the evidence ends, none, or
	// another), and EFORBIDDEN as PutPolicy.
	ApplyCertifiedThreshold(ctx context.Context, accountID string, f CalibrationFilter, threshold float64, by Actor) (*Policy, error)
}

// MarshalJSON writes the policy with its on-expiry and review fields flat
// beside the others, as the API has them.
func (p Policy) MarshalJSON() ([]byte, error) {
	type plain Policy
	out := struct {
		plain
		OnExpiry         string              `json:"on_expiry"`
		AgentFloor       *float64            `json:"agent_floor"`
		Fallback         *string             `json:"on_expiry_fallback"`
		TargetErrorRate  *float64            `json:"target_error_rate"`
		TargetConfidence *float64            `json:"target_confidence"`
		Cascade          []string            `json:"cascade"`
		Thresholds       map[string]*float64 `json:"thresholds"`
		Certified        *errorTargetJSON    `json:"certified"`
		RequirePersonIf  *string             `json:"require_person_if"`
		policyReviewJSON
		alertsJSON
	}{plain: plain(p), OnExpiry: p.OnExpiry.Outcome, AgentFloor: p.OnExpiry.AgentFloor, policyReviewJSON: reviewJSON(p.Review),
		alertsJSON: p.Alerts.json()}
	if t := p.Target; t != nil {
		out.TargetErrorRate, out.TargetConfidence = &t.ErrorRate, &t.Confidence
	}
	out.Cascade, out.Thresholds = p.Agent.Cascade, p.Agent.Thresholds
	if c := p.Agent.Certified; c != nil {
		out.Certified = &errorTargetJSON{ErrorRate: c.ErrorRate, Confidence: c.Confidence}
	}
	if e := p.Agent.RequirePersonIf; e != "" {
		out.RequirePersonIf = &e
	}
	if out.OnExpiry == "" {
		out.OnExpiry = OnExpiryExpire
	}
	if p.OnExpiry.Fallback != "" {
		out.Fallback = &p.OnExpiry.Fallback
	}
	return json.Marshal(out)
}

// policyReviewJSON is a policy's review requirement as the API has it:
// every field null (exclude_requester false) when the policy has none.
type policyReviewJSON struct {
	ReviewsRequired  *int     `json:"reviews_required"`
	Consensus        *string  `json:"consensus"`
	Quorum           *int     `json:"quorum"`
	Veto             []string `json:"veto"`
	ExcludeRequester bool     `json:"exclude_requester"`
	Tiebreak         *string  `json:"tiebreak"`
}

// reviewJSON returns r's fields for a policy's answer.
func reviewJSON(r *ReviewRequirement) policyReviewJSON {
	if r == nil {
		return policyReviewJSON{}
	}
	out := policyReviewJSON{ReviewsRequired: &r.ReviewsRequired, Consensus: &r.Consensus, Veto: r.Veto, ExcludeRequester: r.ExcludeRequester}
	if r.Quorum != 0 {
		out.Quorum = &r.Quorum
	}
	if r.Tiebreak != "" {
		out.Tiebreak = &r.Tiebreak
	}
	return out
}

// DeadlinePassedError is the ECONFLICT error of a change refused because
// t's deadline passed before the change, though t may not have been swept
// yet: it says what happens to t instead (it expires, or its on-expiry
// outcome decides it).
func DeadlinePassedError(t *Task) *Error {
	if t.OnExpiry.IsExpire() || HasVotes(t) {
		if t.ExpiredAt != nil {
			return ExpiredError(t.ExpiredAt)
		}
		return ExpiredError(t.DeadlineAt)
	}
	e := Errorf(ECONFLICT, "The task's deadline passed before it was decided; its on-expiry outcome decides it (%s), and nothing else was recorded.",
		t.OnExpiry.Describe())
	e.Reason = ReasonTaskExpired
	return e
}

// Audit event kinds of policies.
const (
	AuditPolicyChanged = "policy_changed"
	AuditPolicyDeleted = "policy_deleted"
)

// NewPolicyAuditEvent returns the audit event of a change to the account's
// policy of taskType by the actor; detail says what it holds now.
func NewPolicyAuditEvent(kind, accountID, taskType, detail string, by Actor) *AuditEvent {
	actor := by.Email
	if actor == "" && by.PersonID == "" {
		actor = "an API key"
	}
	return &AuditEvent{
		AccountID: accountID,
		Kind:      kind,
		Actor:     actor,
		Detail:    strings.TrimSpace(taskType + " " + detail),
		ClientIP:  by.Client.IP,
		UserAgent: by.Client.UserAgent,
	}
}

// Summary says in a line what the policy sets, for the audit log.
func (p *Policy) Summary() string {
	var parts []string
	if p.ConfidenceThreshold != nil {
		parts = append(parts, "threshold "+strconv.FormatFloat(*p.ConfidenceThreshold, 'f', -1, 64))
	}
	if p.DeadlineSeconds != nil {
		parts = append(parts, "deadline "+strconv.Itoa(*p.DeadlineSeconds)+"s")
	}
	if p.AuditRate != nil {
		parts = append(parts, "audit rate "+strconv.FormatFloat(*p.AuditRate, 'f', -1, 64))
	}
	if len(p.Notify) > 0 {
		parts = append(parts, "notify "+strings.Join(p.Notify, " "))
	}
	if r := p.Review; r != nil {
		parts = append(parts, r.Describe())
	}
	parts = append(parts, "on expiry: "+p.OnExpiry.Describe())
	if len(p.Alerts.Reminders) > 0 {
		var waits []string
		for _, w := range p.Alerts.Reminders {
			waits = append(waits, w.String())
		}
		parts = append(parts, "reminders "+strings.Join(waits, " "))
	}
	for i, r := range p.Alerts.Escalation {
		parts = append(parts, fmt.Sprintf("rung %d: %s to %s", i+1, r.After, r.To))
	}
	if len(p.EditVerdicts) > 0 {
		parts = append(parts, "edits with "+strings.Join(p.EditVerdicts, " "))
	}
	if t := p.Target; t != nil {
		parts = append(parts, "target "+FormatShare(t.ErrorRate)+" at "+FormatShare(t.Confidence))
	}
	if a := p.Agent; len(a.Cascade) > 0 {
		parts = append(parts, "cascade "+strings.Join(a.Cascade, " "))
	}
	for _, name := range slices.Sorted(maps.Keys(p.Agent.Thresholds)) {
		parts = append(parts, "threshold of "+name+" "+strconv.FormatFloat(*p.Agent.Thresholds[name], 'f', -1, 64))
	}
	if c := p.Agent.Certified; c != nil {
		parts = append(parts, "certified at "+FormatShare(c.ErrorRate)+" with "+FormatShare(c.Confidence))
	}
	if e := p.Agent.RequirePersonIf; e != "" {
		parts = append(parts, "a person if "+e)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// errorTargetJSON is an ErrorTarget as the API writes it.
type errorTargetJSON struct {
	ErrorRate  float64 `json:"target_error_rate"`
	Confidence float64 `json:"confidence"`
}

// policyRequest is the wire form of a policy: every field may be left out
// or null, which leaves it unset.
type policyRequest struct {
	ConfidenceThreshold *float64  `json:"confidence_threshold"`
	DeadlineSeconds     *float64  `json:"deadline_seconds"`
	AuditRate           *float64  `json:"audit_rate"`
	OnExpiry            *string   `json:"on_expiry"`
	AgentFloor          *float64  `json:"agent_floor"`
	OnExpiryFallback    *string   `json:"on_expiry_fallback"`
	Notify              []*string `json:"notify"`
	// The review requirement's fields, as on the create (but nullable,
	// and without requested_by, which is each create's own).
	ReviewsRequired  *float64  `json:"reviews_required"`
	Consensus        *string   `json:"consensus"`
	Quorum           *float64  `json:"quorum"`
	Veto             []*string `json:"veto"`
	ExcludeRequester *bool     `json:"exclude_requester"`
	Tiebreak         *string   `json:"tiebreak"`
	EditVerdicts     []*string `json:"edit_verdicts"`
	policyAlertsRequest
	// The target the agent is held to (Policy.Target).
	TargetErrorRate  *float64 `json:"target_error_rate"`
	TargetConfidence *float64 `json:"target_confidence"`
	// The agent tier's cascade (Policy.Agent).
	Cascade    []*string           `json:"cascade"`
	Thresholds map[string]*float64 `json:"thresholds"`
	Certified  *struct {
		ErrorRate  *float64 `json:"target_error_rate"`
		Confidence *float64 `json:"confidence"`
	} `json:"certified"`
	RequirePersonIf *string `json:"require_person_if"`
}

// policyTypeErrors names, per policy field, what a wrong JSON type gets
// told.
var policyTypeErrors = map[string]string{
	"confidence_threshold": fieldTypeErrors["confidence_threshold"],
	"deadline_seconds":     fieldTypeErrors["deadline_seconds"],
	"audit_rate":           fieldTypeErrors["audit_rate"],
	"on_expiry":            fieldTypeErrors["on_expiry"],
	"agent_floor":          fieldTypeErrors["agent_floor"],
	"on_expiry_fallback":   fieldTypeErrors["on_expiry_fallback"],
	"notify":               fieldTypeErrors["notify"],
	"reviews_required":     reviewRequirementTypeErrors["reviews_required"],
	"consensus":            reviewRequirementTypeErrors["consensus"],
	"quorum":               reviewRequirementTypeErrors["quorum"],
	"veto":                 reviewRequirementTypeErrors["veto"],
	"exclude_requester":    reviewRequirementTypeErrors["exclude_requester"],
	"tiebreak":             reviewRequirementTypeErrors["tiebreak"],
	"reminders":            alertsTypeErrors["reminders"],
	"escalation":           alertsTypeErrors["escalation"],
	"edit_verdicts":        fieldTypeErrors["edit_verdicts"],
	"target_error_rate":    "target_error_rate must be a number between 0 and 1, such as 0.02.",
	"target_confidence":    "target_confidence must be a number from 0.5 to below 1, such as 0.95.",
	"cascade":              "cascade must be a list of verifier names, such as [\"rules\", \"small\", \"large\"].",
	"thresholds":           "thresholds must map verifier names to numbers from 0 to 1, such as {\"small\": 0.97}.",
	"certified":            "certified must be an object {\"target_error_rate\": 0.05, \"confidence\": 0.95}.",
	"require_person_if":    "require_person_if must be a CEL expression, such as \"context.amount > 1000\".",
}

// ParsePolicy decodes the body of a policy of taskType and validates it
// (Policy.Validate). Every failure is an EINVALID *Error.
func ParsePolicy(taskType string, body []byte) (Policy, error) {
	var req policyRequest
	if err := DecodeJSONStrict(body, &req, policyTypeErrors); err != nil {
		return Policy{}, err
	}
	p := Policy{TaskType: taskType, ConfidenceThreshold: req.ConfidenceThreshold, AuditRate: req.AuditRate}
	if d := req.DeadlineSeconds; d != nil {
		if *d != math.Trunc(*d) || *d < MinDeadlineSeconds || *d > MaxDeadlineSeconds {
			return Policy{}, errDeadline
		}
		seconds := int(*d)
		p.DeadlineSeconds = &seconds
	}
	if req.OnExpiry == nil && (req.AgentFloor != nil || req.OnExpiryFallback != nil) {
		return Policy{}, FieldErrorf("on_expiry", "agent_floor and on_expiry_fallback go with on_expiry agent_verdict; give on_expiry too.")
	} else if req.OnExpiry != nil && *req.OnExpiry != OnExpiryExpire {
		p.OnExpiry = OnExpiry{Outcome: *req.OnExpiry, AgentFloor: req.AgentFloor}
		if req.OnExpiryFallback != nil {
			p.OnExpiry.Fallback = *req.OnExpiryFallback
		}
	} else if req.AgentFloor != nil || req.OnExpiryFallback != nil {
		p.OnExpiry = OnExpiry{Outcome: OnExpiryExpire, AgentFloor: req.AgentFloor} // refused by Validate
	}
	if req.Notify != nil {
		targets, err := ParseNotify(req.Notify)
		if err != nil {
			return Policy{}, err
		}
		p.Notify = targets
	}
	review := reviewRequirementRequest{ReviewsRequired: req.ReviewsRequired, Consensus: req.Consensus, Quorum: req.Quorum,
		Veto: req.Veto, ExcludeRequester: req.ExcludeRequester, Tiebreak: req.Tiebreak}
	if review.given() {
		r, err := review.validate(nil, true)
		if err != nil {
			return Policy{}, err
		} else if !r.IsDefault() {
			p.Review = &r
		}
	}
	var err error
	if p.Alerts.Reminders, err = ParseReminders(req.Reminders); err != nil {
		return Policy{}, err
	}
	if p.Alerts.Escalation, err = ParseEscalation(req.Escalation); err != nil {
		return Policy{}, err
	}
	for i, v := range req.EditVerdicts {
		if v == nil {
			return Policy{}, FieldErrorf("edit_verdicts", "edit_verdicts must hold strings only; entry %d is null.", i)
		}
		p.EditVerdicts = append(p.EditVerdicts, *v)
	}
	switch {
	case req.TargetErrorRate != nil:
		p.Target = &ErrorTarget{ErrorRate: *req.TargetErrorRate, Confidence: DefaultCertificationConfidence}
		if req.TargetConfidence != nil {
			p.Target.Confidence = *req.TargetConfidence
		}
	case req.TargetConfidence != nil:
		return Policy{}, FieldErrorf("target_confidence", "target_confidence goes with target_error_rate; give target_error_rate too.")
	}
	for _, name := range req.Cascade {
		if name == nil {
			return Policy{}, FieldErrorf("cascade", "cascade must hold verifier names only; an entry is null.")
		}
		p.Agent.Cascade = append(p.Agent.Cascade, *name)
	}
	if len(req.Thresholds) > 0 {
		p.Agent.Thresholds = req.Thresholds
	}
	if c := req.Certified; c != nil {
		if c.ErrorRate == nil {
			return Policy{}, FieldErrorf("certified", "certified needs target_error_rate, such as {\"target_error_rate\": 0.05}.")
		}
		p.Agent.Certified = &ErrorTarget{ErrorRate: *c.ErrorRate, Confidence: DefaultCertificationConfidence}
		if c.Confidence != nil {
			p.Agent.Certified.Confidence = *c.Confidence
		}
	}
	if e := req.RequirePersonIf; e != nil {
		p.Agent.RequirePersonIf = *e
	}
	if err := p.Validate(); err != nil {
		return Policy{}, err
	}
	return p, nil
}

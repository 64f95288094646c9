package arbiter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter/internal/jsonfields"
)

// Task statuses, in lifecycle order (see ARCHITECTURE.md).
const (
	StatusPending      = "pending"       // accepted, waiting for a worker
	StatusAgentRunning = "agent_running" // claimed by a worker under a lease
	StatusHumanNeeded  = "human_needed"  // waiting for a reviewer
	StatusCompleted    = "completed"     // final_* fields are set
	StatusExpired      = "expired"       // its deadline passed first; final_* stay null
)

// Tiers that decide a task or make an attempt on it.
const (
	TierAgent = "agent"
	TierHuman = "human"
)

// Defaults applied to omitted task-create fields.
const (
	DefaultTaskType            = "decide"
	DefaultTouchpoint          = "chat"
	DefaultConfidenceThreshold = 0.8
)

// Limits on a task-create request. They are documented in docs/api.md.
const (
	MaxBodyBytes    = 1 << 20   // whole request body
	MaxPromptBytes  = 32 << 10  // prompt, in bytes of UTF-8
	MaxContextBytes = 256 << 10 // context, as compacted JSON
	MaxContextDepth = 64        // levels of arrays and objects nested in context
	MaxVerdicts     = 64        // entries in allowed_verdicts
	MaxVerdictChars = 200       // characters in one verdict
	MaxLabelChars   = 200       // characters in task_type, touchpoint or source

	MinDeadlineSeconds = 60                // the shortest deadline_seconds
	MaxDeadlineSeconds = 30 * 24 * 60 * 60 // the longest deadline_seconds: 30 days
)

// Task is a closed question put to the verifier and, if needed, to a human.
// Its JSON form is the Task object of the specification: it never carries the
// context, and the final_* fields are null until the task is completed.
type Task struct {
	ID                  string   `json:"id"`
	AccountID           string   `json:"-"`
	Status              string   `json:"status"`
	TaskType            string   `json:"task_type"`
	Source              string   `json:"source"`
	Touchpoint          string   `json:"touchpoint"`
	Prompt              string   `json:"prompt"`
	AllowedVerdicts     []string `json:"allowed_verdicts"`
	ConfidenceThreshold float64  `json:"confidence_threshold"`
	FinalVerdict        *string  `json:"final_verdict"`
	FinalTier           *string  `json:"final_tier"`
	FinalConfidence     *float64 `json:"final_confidence"`
	// FinalVerifier names the verifier of the agent tier's cascade that
	// decided the task; nil unless final_tier is agent.
	FinalVerifier *string    `json:"final_verifier"`
	CreatedAt     Timestamp  `json:"created_at"`
	CompletedAt   *Timestamp `json:"completed_at"`
	// DeadlineAt is when the task expires unless it is final by then:
	// created_at plus the create's deadline_seconds; null without one.
	DeadlineAt *Timestamp `json:"deadline_at"`
	// ExpiredAt is when the task expired, by the database's clock; null
	// unless its status is expired.
	ExpiredAt *Timestamp `json:"expired_at"`
	Attempts  []Attempt  `json:"attempts"`
	// Display is the create's hint of how reviewers see the context;
	// nil without one, and then absent from the JSON.
	Display *Display `json:"display,omitempty"`

	// AuditRate is the share of confident agent answers audited that
	// applies to the task: its create's audit_rate, nil for the
	// account's; once the agent completes it, the rate it was sampled at.
	AuditRate *float64 `json:"-"`
	// AuditState is AuditStateWaiting while the task, completed by the
	// agent, waits in the reviewers' queue as a blind audit, and
	// AuditStateDone once a reviewer answered; "" when it was not chosen.
	AuditState string `json:"-"`

	// Context is the caller's JSON, kept for the verifier and the reviewer.
	// It is deliberately absent from the API response.
	Context json.RawMessage `json:"-"`
	// Failures counts the task's failed verifier calls and its calls lost
	// with their workers (counted by the claim that takes it again), since
	// its cascade stage began.
	Failures int `json:"-"`
	// CascadeStage is the index in the task's cascade of the verifier its
	// next call asks (cascade.go): 0 until a verifier passes it on.
	CascadeStage int `json:"-"`
	// Reservation is who holds the task on the desk, in the human queue's
	// list; nil when nobody does.
	Reservation *Reservation `json:"-"`
	// OnExpiry is what happens at the deadline if nobody decides the task
	// first, as it was when the task was created.
	OnExpiry OnExpiry `json:"-"`
	// Review is the task's review requirement (consensus.go), nil for
	// today's single review.
	Review *ReviewRequirement `json:"review,omitempty"`
	// VotesCast is how many people have voted on a task that asks several
	// votes, set by HideOpenVotes for the API's reads; nil, and absent
	// from the JSON, on every other task and read.
	VotesCast *int `json:"votes_cast,omitempty"`
	// Alerts are the reminders and escalation rungs the task was created
	// with (escalation.go); zero without.
	Alerts Alerts `json:"-"`
	// Escalation is the last escalation rung the task reached; nil, and
	// absent from the JSON, until one is.
	Escalation *TaskEscalation `json:"escalation,omitempty"`
	// GoldVerdict is the create's gold_verdict (gold.go). Only the
	// account's own API reads fill it in (TaskService.GoldVerdicts); every
	// other read, the webhooks' and Slack's included, leaves it nil, and
	// then it is absent from the JSON.
	GoldVerdict *string `json:"gold_verdict,omitempty"`

	// Action is the tool call the task asks about, as its create proposed
	// it, with its digest (action.go); nil, and absent from the JSON,
	// for a task without one.
	Action *TaskAction `json:"action,omitempty"`
	// EditVerdicts are the verdicts with which a reviewer may edit the
	// action's editable members; absent unless it has some.
	EditVerdicts []string `json:"edit_verdicts,omitempty"`
	// ApprovedAction is the action the final decision bound itself to
	// (the proposal, or a reviewer's edit of it); absent until the task
	// is completed, and for a task without an action.
	ApprovedAction *ApprovedAction `json:"approved_action,omitempty"`
	// Receipt is the signed receipt of the final decision (receipt.go):
	// a compact JWS; absent until the task is completed.
	Receipt string `json:"receipt,omitempty"`
	// ActionEdit is the edit of the action in force: a consensus
	// voter's, which the other voters now vote on, or the deciding
	// reviewer's; nil without one.
	ActionEdit *ActionEdit `json:"-"`
	// TraceParent is the W3C trace context of the request that created
	// the task, which the queue's claim reads back while tracing is on so
	// that the agent decision joins the create's trace; never sent.
	TraceParent string `json:"-"`
}

// ProposedDigest returns the digest of the action the create proposed,
// which the agent and the on-expiry outcome decide on (neither edits);
// nil for a task without an action.
func (t *Task) ProposedDigest() *string {
	if t.Action == nil {
		return nil
	}
	d := t.Action.Digest
	return &d
}

// CurrentAction returns the action a decision on the task now binds to:
// the edit in force, or the proposal. ok is false for a task without an
// action.
func (t *Task) CurrentAction() (a ApprovedAction, ok bool) {
	if t.Action == nil {
		return ApprovedAction{}, false
	}
	cur, err := t.Action.WithEdit(t.ActionEdit)
	if err != nil {
		return t.Action.Proposed(), true
	}
	return cur, true
}

// Allows reports whether verdict is one of the task's allowed verdicts.
func (t *Task) Allows(verdict string) bool {
	for _, v := range t.AllowedVerdicts {
		if v == verdict {
			return true
		}
	}
	return false
}

// DecidedBy names who completed the task: its on-expiry outcome, the
// reviewer of its last human attempt, or "the agent".
func (t *Task) DecidedBy() string {
	if t.FinalTier != nil && *t.FinalTier == TierFallback && t.FinalVerdict != nil {
		return "its on-expiry outcome (" + *t.FinalVerdict + ") when the deadline passed"
	}
	for i := len(t.Attempts) - 1; i >= 0; i-- {
		if a := t.Attempts[i]; a.Tier == TierHuman && a.Reviewer != nil && !a.Audit {
			return *a.Reviewer
		}
	}
	return "the agent"
}

// Attempt is one verifier call or one human decision on a task. Fields that do
// not apply are null: model for a human, reviewer for the agent, error when
// the attempt succeeded, verdict and confidence when it failed.
type Attempt struct {
	Tier       string     `json:"tier"`
	Verdict    *string    `json:"verdict"`
	Confidence *float64   `json:"confidence"`
	Rationale  string     `json:"rationale"`
	Model      *string    `json:"model"`
	Reviewer   *string    `json:"reviewer"`
	Error      *string    `json:"error"`
	StartedAt  Timestamp  `json:"started_at"`
	FinishedAt *Timestamp `json:"finished_at"`
	// Audit is true on a reviewer's answer to a blind audit of a task
	// the agent completed: it leaves the task's final fields as they are.
	Audit bool `json:"audit"`
	// PersonID is the voter of a vote on a task that asks several
	// (ReviewRequirement.Multi); "" on every other attempt.
	PersonID string `json:"-"`
	// Version is the verifier version label the operator set
	// (ARBITER_AGENT_VERSION) when the agent answered; nil for a person
	// and when none was set. A new prompt or model starts a new series
	// in the calibration report.
	Version *string `json:"version"`
	// ActionDigest is the digest of the action the attempt decided on,
	// on a task with an action; nil, and absent from the JSON, without.
	ActionDigest *string `json:"action_digest,omitempty"`
	// Verifier names the verifier of the cascade an agent attempt asked;
	// nil for a person, and for attempts recorded before cascades.
	Verifier *string `json:"verifier"`
	// PassedOn is true on the agent attempt that passed the task to the
	// next verifier of its cascade: its answer was below that verifier's
	// threshold, it declined, or its calls failed or were throttled too
	// long.
	PassedOn bool `json:"passed_on"`
	// InputTokens, OutputTokens and Cost are what a model verifier's call
	// took, and what that cost at the verifiers file's price; nil for a
	// person and for a backend that calls no model.
	InputTokens  *int     `json:"input_tokens"`
	OutputTokens *int     `json:"output_tokens"`
	Cost         *float64 `json:"cost"`
}

// AuditWaiting reports whether the task waits in the reviewers' queue as a
// blind audit.
func (t *Task) AuditWaiting() bool {
	return t.Status == StatusCompleted && t.AuditState == AuditStateWaiting
}

// InReviewQueue reports whether the task is in the reviewers' queue: it
// waits for a human, or for an audit.
func (t *Task) InReviewQueue() bool { return t.Status == StatusHumanNeeded || t.AuditWaiting() }

// TaskCreate is a validated task-create request with its defaults applied.
type TaskCreate struct {
	Prompt              string
	Context             json.RawMessage // compacted; nil when omitted or null
	AllowedVerdicts     []string
	ConfidenceThreshold float64
	TaskType            string
	Touchpoint          string
	Source              string

	// DeadlineSeconds, when not zero, is how long after its creation the
	// task expires unless it is final by then. Requests allow
	// MinDeadlineSeconds to MaxDeadlineSeconds; the store takes any
	// positive value.
	DeadlineSeconds int

	// CallbackURL, when not empty, also receives the task's webhook
	// events, signed with the account's callback secret. ParseTaskCreate
	// checks its form; CheckCallbackURL, where it may lead. It takes part
	// in the Fingerprint only when set, so fingerprints of creates without
	// one stay as they were.
	CallbackURL string `json:",omitempty"`
	// AuditRate, when not nil, is the task's own audit rate, from 0 to 1,
	// instead of the account's: the share of the agent's confident
	// answers on such tasks that a person checks, blind. Left out of
	// the Fingerprint when nil, so keys stored before it existed match.
	AuditRate *float64 `json:",omitempty"`
	// OnExpiry is what happens at the deadline when nobody decided the
	// task (see DeadlineStep); the zero value expires it. Left out of
	// the Fingerprint when it is the zero value.
	OnExpiry OnExpiry `json:",omitzero"`

	// Omitted is the set of fields the request left out, which the
	// policy of the task's type fills (Policy.Apply). A create built in
	// code leaves it empty, and takes nothing from policies. It is not
	// part of the Fingerprint.
	Omitted PolicyFields `json:"-"`
	// Notify, when not empty, names where the task's question goes when
	// it needs a person, instead of the account's default channel:
	// "slack:#channel" or "slack:C0123456" (ParseNotify). Left out of the
	// Fingerprint when empty.
	Notify []string `json:",omitempty"`
	// Display, when not nil, is the hint of how reviewers see the
	// context (see ParseDisplay). Left out of the Fingerprint when nil.
	Display *Display `json:",omitempty"`
	// Review, when not nil, asks several people to vote on the task, or
	// records who asked (consensus.go); nil is today's single review. Left
	// out of the Fingerprint when nil.
	Review *ReviewRequirement `json:",omitempty"`
	// Alerts, when not zero, are the task's reminders and escalation
	// rungs (escalation.go). Left out of the Fingerprint when zero.
	Alerts Alerts `json:",omitzero"`
	// GoldVerdict, when not empty, makes the task a gold task (gold.go)
	// whose known answer it is: one of AllowedVerdicts. Left out of the
	// Fingerprint when empty.
	GoldVerdict string `json:",omitempty"`
	// Action, when not nil, is the tool call the task asks about
	// (ParseAction), its args canonical and its digest set. It takes part
	// in the Fingerprint, digest included, when set.
	Action *TaskAction `json:",omitempty"`
	// EditVerdicts are the verdicts that allow an edit of the action's
	// editable members (CheckEditVerdicts); nil without an editable
	// action. Left out of the Fingerprint when nil.
	EditVerdicts []string `json:",omitempty"`

	// IdempotencyKey, when not empty, makes the create happen at most once
	// per account and key (see idempotency.go). It is not part of the
	// request's Fingerprint.
	IdempotencyKey string
}

// taskCreateRequest is the wire form. Pointers tell omitted from zero; a
// field the document does not declare nullable refuses null (see
// DecodeJSONStrict), rather than take it for omitted.
type taskCreateRequest struct {
	Prompt              *string         `json:"prompt"`
	Context             json.RawMessage `json:"context"`
	AllowedVerdicts     []*string       `json:"allowed_verdicts"`
	ConfidenceThreshold *float64        `json:"confidence_threshold" null:"refuse"`
	TaskType            *string         `json:"task_type" null:"refuse"`
	Touchpoint          *string         `json:"touchpoint" null:"refuse"`
	Source              *string         `json:"source" null:"refuse"`
	DeadlineSeconds     *float64        `json:"deadline_seconds" null:"refuse"`
	CallbackURL         *string         `json:"callback_url" null:"refuse"`
	AuditRate           *float64        `json:"audit_rate" null:"refuse"`
	OnExpiry            *string         `json:"on_expiry" null:"refuse"`
	AgentFloor          *float64        `json:"agent_floor" null:"refuse"`
	OnExpiryFallback    *string         `json:"on_expiry_fallback" null:"refuse"`
	Notify              []*string       `json:"notify" null:"refuse"`
	Display             json.RawMessage `json:"display" null:"refuse"`
	GoldVerdict         *string         `json:"gold_verdict" null:"refuse"`
	Action              json.RawMessage `json:"action" null:"refuse"`
	EditVerdicts        []*string       `json:"edit_verdicts" null:"refuse"`
	reviewRequirementRequest
	alertsRequest
}

// fieldTypeErrors names, per request field, what a wrong JSON type gets told.
var fieldTypeErrors = map[string]string{
	"prompt":               "prompt must be a string.",
	"allowed_verdicts":     "allowed_verdicts must be a non-empty array of strings.",
	"confidence_threshold": "confidence_threshold must be a number between 0 and 1.",
	"task_type":            "task_type must be a string.",
	"touchpoint":           "touchpoint must be a string.",
	"source":               "source must be a string.",
	"deadline_seconds":     errDeadline.Message,
	"callback_url":         "callback_url must be a string: an https:// URL.",
	"audit_rate":           errAuditRate.Message,
	"on_expiry":            `on_expiry must be a string: "expire", "verdict:<v>" or "agent_verdict".`,
	"agent_floor":          "agent_floor must be a number from 0 to 1.",
	"on_expiry_fallback":   `on_expiry_fallback must be a string: "expire" or "verdict:<v>".`,
	"notify":               errNotify.Message,
	"display":              "display must be an object whose fields name members of context.",
	"reminders":            alertsTypeErrors["reminders"],
	"escalation":           alertsTypeErrors["escalation"],
	"gold_verdict":         "gold_verdict must be a string: one of allowed_verdicts.",
	"action":               "action must be an object: the tool call's name, args, and optionally schema and editable.",
	"edit_verdicts":        "edit_verdicts must be an array of allowed verdicts.",
}

// errDeadline is the EINVALID error of a deadline_seconds out of range.
var errDeadline = FieldErrorf("deadline_seconds", "deadline_seconds must be a whole number of seconds from %d to %d (30 days).", MinDeadlineSeconds, MaxDeadlineSeconds)

// ParseTaskCreate decodes and validates a task-create request body. Every
// failure is an EINVALID *Error whose message names the field at fault.
func ParseTaskCreate(body []byte) (TaskCreate, error) {
	var req taskCreateRequest
	if err := DecodeJSONStrict(body, &req, fieldTypeErrors); err != nil {
		return TaskCreate{}, err
	}
	return req.validate()
}

// validate applies the rules and defaults of a task-create request.
func (req *taskCreateRequest) validate() (TaskCreate, error) {
	in := TaskCreate{
		TaskType:            DefaultTaskType,
		Touchpoint:          DefaultTouchpoint,
		ConfidenceThreshold: DefaultConfidenceThreshold,
	}

	if req.Prompt == nil || strings.TrimSpace(*req.Prompt) == "" {
		return TaskCreate{}, FieldErrorf("prompt", "prompt is required and must be a non-empty string.")
	} else if len(*req.Prompt) > MaxPromptBytes {
		return TaskCreate{}, FieldErrorf("prompt", "prompt must be at most %d bytes.", MaxPromptBytes)
	} else if strings.IndexByte(*req.Prompt, 0) >= 0 {
		return TaskCreate{}, FieldErrorf("prompt", "prompt must not contain NUL characters.")
	}
	in.Prompt = *req.Prompt

	if len(req.AllowedVerdicts) == 0 {
		return TaskCreate{}, FieldErrorf("allowed_verdicts", "allowed_verdicts is required and must be a non-empty array of strings.")
	} else if len(req.AllowedVerdicts) > MaxVerdicts {
		return TaskCreate{}, FieldErrorf("allowed_verdicts", "allowed_verdicts must hold at most %d verdicts.", MaxVerdicts)
	}
	in.AllowedVerdicts = make([]string, len(req.AllowedVerdicts))
	for i, v := range req.AllowedVerdicts {
		switch {
		case v == nil:
			return TaskCreate{}, FieldErrorf("allowed_verdicts", "allowed_verdicts must hold strings only; entry %d is null.", i)
		case strings.TrimSpace(*v) == "":
			return TaskCreate{}, FieldErrorf("allowed_verdicts", "allowed_verdicts must not hold empty strings; entry %d is empty.", i)
		case utf8.RuneCountInString(*v) > MaxVerdictChars:
			return TaskCreate{}, FieldErrorf("allowed_verdicts", "Each allowed verdict must be at most %d characters; entry %d is longer.", MaxVerdictChars, i)
		case strings.IndexByte(*v, 0) >= 0:
			return TaskCreate{}, FieldErrorf("allowed_verdicts", "allowed_verdicts must not contain NUL characters.")
		}
		for _, prev := range in.AllowedVerdicts[:i] {
			if prev == *v {
				return TaskCreate{}, FieldErrorf("allowed_verdicts", "allowed_verdicts must not hold duplicates; %q appears twice.", *v)
			}
		}
		in.AllowedVerdicts[i] = *v
	}

	if t := req.ConfidenceThreshold; t != nil {
		if *t < 0 || *t > 1 {
			return TaskCreate{}, FieldErrorf("confidence_threshold", "confidence_threshold must be a number between 0 and 1.")
		}
		in.ConfidenceThreshold = *t
	}

	for _, f := range []struct {
		name string
		in   *string
		out  *string
	}{
		{"task_type", req.TaskType, &in.TaskType},
		{"touchpoint", req.Touchpoint, &in.Touchpoint},
		{"source", req.Source, &in.Source},
	} {
		if f.in == nil || *f.in == "" {
			continue
		} else if err := checkLabel(f.name, *f.in); err != nil {
			return TaskCreate{}, err
		}
		*f.out = *f.in
	}

	if len(req.Context) > 0 && !bytes.Equal(req.Context, []byte("null")) {
		// The decoder has checked the JSON; most contexts come compact
		// already, and are measured in one pass without a copy.
		compact := []byte(req.Context)
		depth, ok := jsonShape(compact)
		if !ok {
			var buf bytes.Buffer
			if err := json.Compact(&buf, req.Context); err != nil {
				return TaskCreate{}, FieldErrorf("context", "context must be valid JSON.")
			}
			compact = buf.Bytes() // the same depth: whitespace nests nothing
		}
		switch {
		case len(compact) > MaxContextBytes:
			return TaskCreate{}, FieldErrorf("context", "context must be at most %d bytes of JSON.", MaxContextBytes)
		case !utf8.Valid(compact):
			return TaskCreate{}, FieldErrorf("context", "context must be valid UTF-8.")
		case depth > MaxContextDepth:
			return TaskCreate{}, FieldErrorf("context", "context must nest arrays and objects at most %d levels deep.", MaxContextDepth)
		}
		in.Context = compact
	}

	display, err := ParseDisplay(req.Display, in.Context)
	if err != nil {
		return TaskCreate{}, err
	}
	in.Display = display

	if d := req.DeadlineSeconds; d != nil {
		// A JSON number is whole when it has no fraction, however it is
		// written: 60, 60.0 and 6e1 are the same number.
		if *d != math.Trunc(*d) || *d < MinDeadlineSeconds || *d > MaxDeadlineSeconds {
			return TaskCreate{}, errDeadline
		}
		in.DeadlineSeconds = int(*d)
	}

	if u := req.CallbackURL; u != nil {
		// Where the URL may lead depends on the server's settings:
		// CheckCallbackURL. An empty one is refused: leave it out.
		checked, err := ValidateWebhookURL("callback_url", *u, true)
		if err != nil {
			return TaskCreate{}, inField("callback_url", err)
		}
		in.CallbackURL = checked
	}

	if r := req.AuditRate; r != nil {
		if err := CheckAuditRate(*r); err != nil {
			return TaskCreate{}, inField("audit_rate", err)
		}
		rate := *r
		in.AuditRate = &rate
	}

	if req.OnExpiry == nil && (req.AgentFloor != nil || req.OnExpiryFallback != nil) {
		return TaskCreate{}, FieldErrorf("on_expiry", "agent_floor and on_expiry_fallback go with on_expiry agent_verdict; give on_expiry too.")
	} else if req.OnExpiry != nil {
		o := OnExpiry{Outcome: *req.OnExpiry, AgentFloor: req.AgentFloor}
		if req.OnExpiryFallback != nil {
			o.Fallback = *req.OnExpiryFallback
		}
		if err := o.Validate(); err != nil {
			return TaskCreate{}, err
		} else if err := o.CheckVerdicts(in.AllowedVerdicts); err != nil {
			return TaskCreate{}, err
		}
		if o.Outcome != OnExpiryExpire {
			in.OnExpiry = o
		}
	}

	// What the request left out, its task type's policy fills.
	for _, f := range []struct {
		given bool
		field PolicyFields
	}{
		{req.ConfidenceThreshold != nil, FieldThreshold},
		{req.DeadlineSeconds != nil, FieldDeadline},
		{req.AuditRate != nil, FieldAuditRate},
		{req.OnExpiry != nil, FieldOnExpiry},
		{req.Notify != nil, FieldNotify},
		{req.reviewRequirementRequest.given(), FieldReview},
		{req.Reminders != nil, FieldReminders},
		{req.Escalation != nil, FieldEscalation},
		{req.EditVerdicts != nil, FieldEditVerdicts},
	} {
		if !f.given {
			in.Omitted |= f.field
		}
	}
	if req.Reminders != nil {
		if in.Alerts.Reminders, err = ParseReminders(req.Reminders); err != nil {
			return TaskCreate{}, err
		}
	}
	if req.Escalation != nil {
		if in.Alerts.Escalation, err = ParseEscalation(req.Escalation); err != nil {
			return TaskCreate{}, err
		}
	}
	if req.Notify != nil {
		targets, err := ParseNotify(req.Notify)
		if err != nil {
			return TaskCreate{}, err
		}
		in.Notify = targets
	}
	review, err := req.reviewRequirementRequest.validate(in.AllowedVerdicts, false)
	if err != nil {
		return TaskCreate{}, err
	} else if !review.IsDefault() {
		in.Review = &review
	}
	if g := req.GoldVerdict; g != nil {
		switch {
		case !slices.Contains(in.AllowedVerdicts, *g):
			return TaskCreate{}, FieldErrorf("gold_verdict", "gold_verdict must be one of allowed_verdicts.")
		case review.Multi():
			return TaskCreate{}, FieldErrorf("gold_verdict", "gold_verdict makes a task that one reviewer answers; leave reviews_required at 1.")
		}
		in.GoldVerdict = *g
	}
	if len(req.Action) > 0 {
		if in.Action, err = ParseAction(req.Action); err != nil {
			return TaskCreate{}, err
		}
	}
	var editVerdicts []string
	for i, v := range req.EditVerdicts {
		if v == nil {
			return TaskCreate{}, FieldErrorf("edit_verdicts", "edit_verdicts must hold strings only; entry %d is null.", i)
		}
		editVerdicts = append(editVerdicts, *v)
	}
	if req.EditVerdicts != nil && editVerdicts == nil {
		editVerdicts = []string{}
	}
	if in.EditVerdicts, err = CheckEditVerdicts(editVerdicts, in.Action, in.AllowedVerdicts); err != nil {
		return TaskCreate{}, err
	}
	return in, nil
}

// MaxNotifyTargets bounds a task's notify list.
const MaxNotifyTargets = 5

// NotifySlackPrefix starts a Slack target of a task's notify list.
const NotifySlackPrefix = "slack:"

var errNotify = FieldErrorf("notify", "notify must be an array of up to %d targets such as \"slack:#refunds\" (a channel name in lower case, or a channel id such as slack:C0123456) or \"teams:finance/approvals\" (a Teams conversation as the Teams settings name it).", MaxNotifyTargets)

// ParseNotify checks a create's notify list: one to MaxNotifyTargets
// Slack channels, "slack:#name" or "slack:C0123456", or Teams
// conversations, "teams:" and a name ValidTeamsTarget accepts; a target
// named twice counts once. Returns errNotify (EINVALID) otherwise.
func ParseNotify(list []*string) ([]string, error) {
	if len(list) == 0 || len(list) > MaxNotifyTargets {
		return nil, errNotify
	}
	var out []string
	for _, p := range list {
		if p == nil {
			return nil, errNotify
		}
		channel, slack := strings.CutPrefix(*p, NotifySlackPrefix)
		conversation, teams := strings.CutPrefix(*p, NotifyTeamsPrefix)
		if !(slack && ValidSlackChannel(channel) || teams && ValidTeamsTarget(conversation)) {
			return nil, errNotify
		}
		if !slices.Contains(out, *p) {
			out = append(out, *p)
		}
	}
	return out, nil
}

// SlackChannels returns the Slack channels of a notify list.
func SlackChannels(notify []string) []string {
	var out []string
	for _, t := range notify {
		if c, ok := strings.CutPrefix(t, NotifySlackPrefix); ok {
			out = append(out, c)
		}
	}
	return out
}

// CheckCallbackURL returns EINVALID when the create's callback_url may not
// be called: it must be https:// and name no private, loopback or
// reserved address, unless allowPrivate (ARBITER_WEBHOOK_ALLOW_PRIVATE).
func (in TaskCreate) CheckCallbackURL(allowPrivate bool) error {
	if in.CallbackURL == "" {
		return nil
	}
	_, err := ValidateWebhookURL("callback_url", in.CallbackURL, allowPrivate)
	return inField("callback_url", err)
}

// inField returns err as an error about the request field named field when
// it is an EINVALID *Error naming none; anything else as it is.
func inField(field string, err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Code != EINVALID || e.Field != "" {
		return err
	}
	named := *e
	named.Field = field
	return &named
}

// JSONDepth returns how deeply the JSON text nests arrays and objects: 0 for
// a scalar, 1 for an array or object of scalars. It reads the bytes once,
// without recursion or allocation, so any depth is cheap to measure; for
// text that is not valid JSON the answer is meaningless but still bounded.
func JSONDepth(text []byte) int {
	depth, _ := jsonShape(text)
	return depth
}

// jsonShape returns JSONDepth(text) and whether text, valid JSON, is
// compact already (no whitespace outside strings), in one pass.
func jsonShape(text []byte) (depth int, compact bool) {
	level, inString := 0, false
	compact = true
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case inString && c == '\\':
			i++ // the escaped byte cannot end the string
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			level++
			depth = max(depth, level)
		case c == ']' || c == '}':
			level--
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			compact = false
		}
	}
	return depth, compact
}

// DecodeJSONStrict decodes one JSON object from body into v, a pointer to a
// struct, refusing trailing data and any member name that is not exactly
// one of v's (Go's decoder alone would take "PROMPT" for "prompt") or that
// appears twice. A wrong type for a field named in typeErrors gets that
// sentence; every failure is an EINVALID *Error.
func DecodeJSONStrict(body []byte, v any, typeErrors map[string]string) error {
	return decodeStrict(body, v, typeErrors, "The request body")
}

// decodeStrict is DecodeJSONStrict for the JSON named by what in its
// sentences ("The request body", "The task").
func decodeStrict(body []byte, v any, typeErrors map[string]string, what string) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return Errorf(EINVALID, "%s is empty; send a JSON object.", what)
	} else if bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		// Go decodes null into a struct as nothing at all; say so rather
		// than name the first field that is missing.
		return Errorf(EINVALID, "%s must be a JSON object, not null.", what)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, typeErrors, what)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Errorf(EINVALID, "%s must hold exactly one JSON object, with nothing after it.", what)
	}
	// The body is valid JSON now, which jsonfields.EachObjectKey relies on.
	fields := jsonfields.Of(reflect.TypeOf(v).Elem())
	var seenArr [64]bool
	seen := seenArr[:]
	if len(fields.Names) > len(seen) {
		seen = make([]bool, len(fields.Names))
	}
	return jsonfields.EachObjectKey(body, func(key, value []byte) error {
		i, ok := fields.Index[string(key)]
		if !ok {
			for _, name := range fields.Names {
				if strings.EqualFold(name, string(key)) {
					return Errorf(EINVALID, "%s has an unknown field %q; field names are case-sensitive: did you mean %q?", what, key, name)
				}
			}
			return Errorf(EINVALID, "%s has an unknown field %q.", what, key)
		} else if seen[i] {
			return Errorf(EINVALID, "%s has the field %q twice.", what, key)
		} else if fields.NotNull[i] && string(value) == "null" {
			return nullError(fields.Names[i], typeErrors)
		}
		seen[i] = true
		return nil
	})
}

// nullError is the EINVALID error of a null for the field name, which may
// not be null: its type sentence from typeErrors ("task_type must be a
// string.") with ", not null" added, or one saying only that.
func nullError(name string, typeErrors map[string]string) error {
	if msg, ok := typeErrors[name]; ok && strings.HasSuffix(msg, ".") {
		return FieldErrorf(name, "%s, not null; leave the field out instead.", strings.TrimSuffix(msg, "."))
	}
	return FieldErrorf(name, "%s must not be null; leave the field out instead.", name)
}

func decodeError(err error, typeErrors map[string]string, what string) error {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntaxErr):
		return Errorf(EINVALID, "%s is not valid JSON (error at byte %d).", what, syntaxErr.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Errorf(EINVALID, "%s is not valid JSON: it ends too early.", what)
	case errors.As(err, &typeErr):
		field, rest, _ := strings.Cut(typeErr.Field, ".")
		if _, known := typeErrors[field]; !known && rest != "" {
			// A field of an embedded struct is named after the struct
			// first: "reviewRequirementRequest.quorum".
			if inner, _, _ := strings.Cut(rest, "."); typeErrors[inner] != "" {
				field = inner
			}
		}
		if field == "" {
			return Errorf(EINVALID, "%s must be a JSON object.", what)
		} else if msg, ok := typeErrors[field]; ok {
			return FieldErrorf(field, "%s", msg)
		}
		return FieldErrorf(field, "%s has the wrong type.", field)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return Errorf(EINVALID, "%s has an unknown field %s.", what, strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return Errorf(EINVALID, "%s could not be read as JSON: %s.", what, strings.TrimPrefix(err.Error(), "json: "))
}

// TaskService creates and reads tasks on behalf of one account.
type TaskService interface {
	// CreateTask stores a new pending task for the account, counting it
	// against the account's daily cap in the same transaction.
	// Returns ERATELIMIT (with RetryAfter) when the cap is used up. A create
	// with an idempotency key is answered as by CreateTasks, except that
	// a replay is not told from a new task.
	CreateTask(ctx context.Context, accountID string, in TaskCreate) (*Task, error)

	// CreateTasks stores creates for the account, in one transaction or
	// statement, and answers each one in order. Each new task is counted
	// against the daily cap, which admits as many as fit, in order; the
	// rest are ERATELIMIT. A create whose IdempotencyKey the account has
	// used before stores nothing: when it asks for the same task (the
	// same Fingerprint) its answer is that task as it is now, Replayed;
	// when not, EMISMATCH; and ECONFLICT (retry after RetryAfter) when the
	// key's task cannot be read yet. Replays do not count against the cap.
	// The error returned is for the call as a whole, when nothing was
	// stored.
	CreateTasks(ctx context.Context, accountID string, in []TaskCreate) ([]TaskCreated, error)

	// FindTaskByID returns the account's task with its attempts.
	// Returns ENOTFOUND when the id is unknown, malformed or belongs to
	// another account; the cases are indistinguishable on purpose.
	FindTaskByID(ctx context.Context, accountID, id string) (*Task, error)

	// ListTasks returns one page of the account's tasks, newest first
	// (by created_at, then id), with their attempts but without their
	// context, continuing after f.After when it is set. Another account's
	// tasks never appear. It validates f (see TaskFilter.Validate).
	// Returns EINVALID for a filter that is not valid.
	ListTasks(ctx context.Context, accountID string, f TaskFilter) (TaskPage, error)

	// GoldService reads gold verdicts, which no read above fills in: the
	// account's own API reads and its owners' pages add them.
	GoldService
}

// TaskCreated is the answer to one create of CreateTasks: the task, or the
// error that refused the create.
type TaskCreated struct {
	Task *Task
	// Replayed is true when the task was created earlier, by a create
	// with the same idempotency key.
	Replayed bool
	// Err is why nothing was created: ERATELIMIT, EMISMATCH or ECONFLICT.
	Err error
}

// MaxBatchTasks bounds the creates of one batch request.
const MaxBatchTasks = 100

// TaskBatchItem is one item of a parsed batch: a valid create, or the
// EINVALID error that refused it.
type TaskBatchItem struct {
	Create TaskCreate
	Err    error
}

// taskBatchRequest is the wire form of a batch.
type taskBatchRequest struct {
	Tasks []json.RawMessage `json:"tasks"`
}

// taskBatchItemRequest is the wire form of a batch item: a task-create
// request that may carry its own idempotency key.
type taskBatchItemRequest struct {
	taskCreateRequest
	IdempotencyKey *string `json:"idempotency_key" null:"refuse"`
}

// batchItemTypeErrors are fieldTypeErrors and the item's key.
var batchItemTypeErrors = func() map[string]string {
	m := maps.Clone(fieldTypeErrors)
	m["idempotency_key"] = "idempotency_key must be a string."
	return m
}()

// ParseTaskBatch decodes a batch-create body: {"tasks": [TaskCreate, …]}
// with 1 to MaxBatchTasks items, each of which may carry an
// "idempotency_key" (the rules of ValidateIdempotencyKey). An envelope that
// breaks these rules is an EINVALID error. Otherwise each item is parsed on
// its own, and the answer holds one entry per item, in order.
func ParseTaskBatch(body []byte) ([]TaskBatchItem, error) {
	req, ok := splitTaskBatch(body)
	if !ok {
		if err := DecodeJSONStrict(body, &req, map[string]string{"tasks": "tasks must be an array of task objects."}); err != nil {
			return nil, err
		}
	}
	switch {
	case req.Tasks == nil:
		return nil, FieldErrorf("tasks", "tasks is required: an array of 1 to %d task objects.", MaxBatchTasks)
	case len(req.Tasks) == 0:
		return nil, FieldErrorf("tasks", "tasks must hold at least one task.")
	case len(req.Tasks) > MaxBatchTasks:
		return nil, FieldErrorf("tasks", "tasks must hold at most %d tasks; this batch has %d.", MaxBatchTasks, len(req.Tasks))
	}
	items := make([]TaskBatchItem, len(req.Tasks))
	for i, raw := range req.Tasks {
		items[i].Create, items[i].Err = parseBatchItem(raw)
	}
	return items, nil
}

// splitTaskBatch reads a batch that is valid JSON, an object whose one
// member is "tasks" and holds an array, with one pass of the scanner and
// no copies: its items are slices of body. Anything else is left to the
// strict decoder (ok false), for its answer. Decoding the envelope into
// []json.RawMessage scanned each item three times more and copied it.
func splitTaskBatch(body []byte) (req taskBatchRequest, ok bool) {
	if !json.Valid(body) {
		return req, false
	}
	// Valid JSON: {"tasks": [ … ]} and nothing else, or the slow path.
	i := jsonfields.SkipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return req, false
	}
	if i = jsonfields.SkipSpace(body, i+1); !bytes.HasPrefix(body[i:], []byte(`"tasks"`)) {
		return req, false
	}
	if i = jsonfields.SkipSpace(body, i+len(`"tasks"`)); i >= len(body) || body[i] != ':' {
		return req, false
	}
	if i = jsonfields.SkipSpace(body, i+1); i >= len(body) || body[i] != '[' {
		return req, false
	}
	end := jsonfields.ValueEnd(body, i)
	if end < 0 {
		return req, false
	}
	if k := jsonfields.SkipSpace(body, end); k >= len(body) || body[k] != '}' || jsonfields.SkipSpace(body, k+1) != len(body) {
		return req, false
	}
	arr := body[i:end]
	req.Tasks = []json.RawMessage{}
	for j := jsonfields.SkipSpace(arr, 1); j < len(arr) && arr[j] != ']'; {
		e := jsonfields.ValueEnd(arr, j)
		if e < 0 {
			return taskBatchRequest{}, false
		}
		req.Tasks = append(req.Tasks, arr[j:e:e])
		if j = jsonfields.SkipSpace(arr, e); j < len(arr) && arr[j] == ',' {
			j = jsonfields.SkipSpace(arr, j+1)
		}
	}
	return req, true
}

// parseBatchItem parses one item of a batch.
func parseBatchItem(raw []byte) (TaskCreate, error) {
	var req taskBatchItemRequest
	if err := decodeStrict(raw, &req, batchItemTypeErrors, "The task"); err != nil {
		return TaskCreate{}, err
	}
	in, err := req.validate()
	if err != nil {
		return TaskCreate{}, err
	}
	if req.IdempotencyKey != nil {
		if err := ValidateIdempotencyKey(*req.IdempotencyKey); err != nil {
			return TaskCreate{}, inField("idempotency_key", err)
		}
		in.IdempotencyKey = *req.IdempotencyKey
	}
	return in, nil
}

// ValidTaskID reports whether id has the shape of a task id: "tsk_" and 16
// lowercase hex digits, or a demo id "tsk_demo_" and a lowercase slug.
func ValidTaskID(id string) bool {
	if rest, ok := strings.CutPrefix(id, DemoTaskIDPrefix); ok {
		return validSlug(rest)
	}
	rest, ok := strings.CutPrefix(id, "tsk_")
	return ok && len(rest) == 16 && isLowerHex(rest)
}

// NewTaskID returns a fresh random task id.
func NewTaskID() string { return NewID("tsk_", 8) }

func validSlug(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

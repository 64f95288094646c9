package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Task statuses, in lifecycle order.
const (
	StatusPending      = "pending"       // accepted, waiting for the verifier
	StatusAgentRunning = "agent_running" // the verifier is answering
	StatusHumanNeeded  = "human_needed"  // waiting for a person
	StatusCompleted    = "completed"     // the Final* fields are set
	StatusExpired      = "expired"       // the deadline passed first; the Final* fields stay nil
)

// Tiers that decide a task or make an attempt on it.
const (
	TierAgent = "agent"
	TierHuman = "human"
	// TierFallback decided a task whose deadline passed: its on-expiry
	// outcome (TaskCreate.OnExpiry). Handle it as a final tier too.
	TierFallback = "fallback"
)

// TaskCreate is a task to submit. Only Prompt and AllowedVerdicts are
// required; the server applies the defaults of fields left zero.
type TaskCreate struct {
	// Prompt is the question, at most 32 KiB.
	Prompt string `json:"prompt"`
	// AllowedVerdicts are 1 to 64 distinct answers the task may get.
	AllowedVerdicts []string `json:"allowed_verdicts"`
	// ConfidenceThreshold, from 0 to 1, is the verifier confidence below
	// which a person decides. Nil means the server's default, 0.8.
	ConfidenceThreshold *float64 `json:"confidence_threshold,omitempty"`
	// TaskType labels the task (default "decide").
	TaskType string `json:"task_type,omitempty"`
	// Touchpoint labels where the question came from (default "chat").
	Touchpoint string `json:"touchpoint,omitempty"`
	// Source is a free-form label for later filtering.
	Source string `json:"source,omitempty"`
	// Context is any JSON-encodable value the verifier and the reviewer see,
	// at most 256 KiB once encoded; a json.RawMessage is sent as it is.
	Context any `json:"context,omitempty"`
	// DeadlineSeconds, when set, is how long after its creation the task
	// expires unless it is final by then: 60 to 2,592,000 (30 days).
	// Zero means no deadline.
	DeadlineSeconds int `json:"deadline_seconds,omitempty"`
	// CallbackURL, when set, also receives the task's webhook events
	// (task.human_needed, task.completed, task.expired,
	// task.audit_disagreed, task.vote_recorded, task.escalated), signed with the account's callback secret as
	// Standard Webhooks describes: an https:// URL on a public address,
	// such as the resume endpoint of a durable workflow waiting on the
	// decision.
	CallbackURL string `json:"callback_url,omitempty"`
	// AuditRate, from 0 to 1, is the share of the verifier's confident
	// answers on this task that a person also checks, blind, instead of
	// the account's audit rate (nil). The task keeps the verifier's
	// verdict; the check feeds the calibration report. Rate(0.05) makes
	// the pointer.
	AuditRate *float64 `json:"audit_rate,omitempty"`
	// OnExpiry is what happens when the deadline passes and nobody
	// decided: "expire", "verdict:<v>" (the task is decided v, FinalTier
	// TierFallback) or "agent_verdict" (the verifier's last verdict when
	// its confidence reached AgentFloor, else OnExpiryFallback, "expire"
	// or "verdict:<v>"). Empty: the policy of the task type's, or expire.
	OnExpiry         string   `json:"on_expiry,omitempty"`
	AgentFloor       *float64 `json:"agent_floor,omitempty"`
	OnExpiryFallback string   `json:"on_expiry_fallback,omitempty"`
	// Reminders, while the task waits for a person, tell the people who
	// can decide it again after each wait ("15m", "1h", or a share of the
	// time to the deadline such as "50%"). Nil: the task type's policy's.
	Reminders []string `json:"reminders,omitempty"`
	// Escalation marks the task escalated and tells each rung's target
	// when it has waited the rung's After. Nil: the policy's.
	Escalation []EscalationRung `json:"escalation,omitempty"`
	// ReviewsRequired, 1 to 5, is how many distinct people vote when the
	// task goes to a person; zero means one (today's single review).
	ReviewsRequired int `json:"reviews_required,omitempty"`
	// Consensus is how the votes decide: "unanimous" (the default for
	// several votes), "quorum" (Quorum votes agree) or "any" (one vote).
	Consensus string `json:"consensus,omitempty"`
	// Quorum is, with Consensus "quorum", how many votes must agree: more
	// than half of ReviewsRequired.
	Quorum int `json:"quorum,omitempty"`
	// Veto lists verdicts any one vote of which decides the task at once.
	Veto []string `json:"veto,omitempty"`
	// RequestedBy is the e-mail of the person who asked for the decision;
	// with ExcludeRequester they cannot vote on it.
	RequestedBy      string `json:"requested_by,omitempty"`
	ExcludeRequester bool   `json:"exclude_requester,omitempty"`
	// Tiebreak "role:admin" lets an owner or admin cast the deciding vote
	// of a split; without it a split task waits for its deadline.
	Tiebreak string `json:"tiebreak,omitempty"`
	// GoldVerdict, when set, makes the task a gold task: the answer the
	// account already knows, one of AllowedVerdicts. People decide it,
	// served on the desk at the account's gold rate and never told it is
	// gold; it completes with this verdict, and the reviewer's answer
	// counts toward their gold accuracy (Agreement). Not with
	// ReviewsRequired above 1.
	GoldVerdict string `json:"gold_verdict,omitempty"`
	// Notify names where the task's question goes in Slack, up to five
	// targets such as "slack:#refunds" or "slack:C0123456"; left out, the
	// task type's policy's, else the account's Slack default channel.
	Notify []string `json:"notify,omitempty"`
	// Action, when set, is the tool call the task asks about: the server
	// fixes its digest, every decision records the action it approved
	// (which a reviewer may have edited), and ApprovedAction returns it,
	// checked.
	Action *ActionCreate `json:"action,omitempty"`
	// EditVerdicts are the verdicts with which a reviewer may edit the
	// action's editable members; nil: the policy's, else the first
	// allowed verdict.
	EditVerdicts []string `json:"edit_verdicts,omitempty"`
	// IdempotencyKey, when set, makes the create safe to repeat: 1 to 255
	// printable ASCII characters, unique per task the account means to
	// create (an order id, a UUID). The same key with the same task
	// within the server's retention (24 hours by default) returns the task
	// made first instead of a second one; with a different task it is an
	// error for which IsUnprocessable is true.
	IdempotencyKey string `json:"-"`
}

// Final reports whether the task is in a final state, one it never leaves:
// completed, or expired when its deadline passed first.
func (t *Task) Final() bool { return t.Status == StatusCompleted || t.Status == StatusExpired }

// Threshold returns a pointer to v, for TaskCreate.ConfidenceThreshold.
func Threshold(v float64) *float64 { return &v }

// Rate returns a pointer to v, for TaskCreate.AuditRate.
func Rate(v float64) *float64 { return &v }

// Task is a task as the server reports it. The Final* fields and
// CompletedAt are nil until it is completed; an expired task keeps them nil
// and has ExpiredAt. Its JSON form is the API's, times as epoch seconds.
type Task struct {
	ID                  string     `json:"id"`
	Status              string     `json:"status"`
	TaskType            string     `json:"task_type"`
	Source              string     `json:"source"`
	Touchpoint          string     `json:"touchpoint"`
	Prompt              string     `json:"prompt"`
	AllowedVerdicts     []string   `json:"allowed_verdicts"`
	ConfidenceThreshold float64    `json:"confidence_threshold"`
	FinalVerdict        *string    `json:"final_verdict"`
	FinalTier           *string    `json:"final_tier"`
	FinalConfidence     *float64   `json:"final_confidence"`
	CreatedAt           time.Time  `json:"created_at"`
	CompletedAt         *time.Time `json:"completed_at"`
	// DeadlineAt is when the task expires unless it is final by then; nil
	// without a deadline.
	DeadlineAt *time.Time `json:"deadline_at"`
	// ExpiredAt is when the task expired; nil unless it is expired.
	ExpiredAt *time.Time `json:"expired_at"`
	Attempts  []Attempt  `json:"attempts"`
	// Review is the task's review requirement when its create asked
	// several votes or named a requester; nil otherwise.
	Review *ReviewRequirement `json:"review,omitempty"`
	// VotesCast is how many people have voted on a task that asks several
	// votes; while it is open, the votes themselves are not in Attempts.
	// nil on a task that asks one decision.
	VotesCast *int `json:"votes_cast,omitempty"`
	// GoldVerdict is a gold task's known answer, which only the account's
	// own reads (GetTask, ListTasks) carry; nil otherwise.
	GoldVerdict *string `json:"gold_verdict,omitempty"`
	// Escalation is the last escalation rung the task reached; nil until
	// one is.
	Escalation *TaskEscalation `json:"escalation,omitempty"`
	// FinalVerifier names the verifier of the agent tier's cascade that
	// decided the task; nil unless FinalTier is "agent".
	FinalVerifier *string `json:"final_verifier"`
	// Action is the proposed action with its digest; nil without one.
	Action *Action `json:"action,omitempty"`
	// EditVerdicts are the verdicts that allow an edit of the action.
	EditVerdicts []string `json:"edit_verdicts,omitempty"`
	// Approved is the action the final decision approved, as the server
	// sent it; use ApprovedAction, which checks its digest.
	Approved *ApprovedAction `json:"approved_action,omitempty"`
	// Receipt is the signed receipt of the final decision (a compact
	// JWS); "" until the task is completed.
	Receipt string `json:"receipt,omitempty"`
}

// EscalationRung is one step of a task's escalation: when the task has
// waited After for a person ("30m", "2h", or a share of the time to its
// deadline such as "90%"), it is marked escalated and To is told:
// "role:admin" (the account's admins) or "email:lead@example.com".
type EscalationRung struct {
	After string `json:"after"`
	To    string `json:"to"`
}

// TaskEscalation is the last rung a task reached: its number (from 1),
// its wait and target, and when.
type TaskEscalation struct {
	Rung        int
	After, To   string
	EscalatedAt time.Time
}

// escalationWire is TaskEscalation as the API spells it.
type escalationWire struct {
	Rung        int    `json:"rung"`
	After       string `json:"after"`
	To          string `json:"to"`
	EscalatedAt epoch  `json:"escalated_at"`
}

// UnmarshalJSON reads the API's TaskEscalation object.
func (e *TaskEscalation) UnmarshalJSON(b []byte) error {
	var w escalationWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = TaskEscalation{w.Rung, w.After, w.To, w.EscalatedAt.time()}
	return nil
}

// MarshalJSON writes the API's TaskEscalation object.
func (e TaskEscalation) MarshalJSON() ([]byte, error) {
	return json.Marshal(escalationWire{e.Rung, e.After, e.To, epoch(e.EscalatedAt)})
}

// ReviewRequirement is how many people decide a task and how their votes
// combine, as its create asked.
type ReviewRequirement struct {
	ReviewsRequired  int      `json:"reviews_required"`
	Consensus        string   `json:"consensus"`
	Quorum           int      `json:"quorum,omitempty"`
	Veto             []string `json:"veto,omitempty"`
	RequestedBy      string   `json:"requested_by,omitempty"`
	ExcludeRequester bool     `json:"exclude_requester,omitempty"`
	Tiebreak         string   `json:"tiebreak,omitempty"`
}

// taskWire is Task as the API spells it.
type taskWire struct {
	ID                  string             `json:"id"`
	Status              string             `json:"status"`
	TaskType            string             `json:"task_type"`
	Source              string             `json:"source"`
	Touchpoint          string             `json:"touchpoint"`
	Prompt              string             `json:"prompt"`
	AllowedVerdicts     []string           `json:"allowed_verdicts"`
	ConfidenceThreshold float64            `json:"confidence_threshold"`
	FinalVerdict        *string            `json:"final_verdict"`
	FinalTier           *string            `json:"final_tier"`
	FinalConfidence     *float64           `json:"final_confidence"`
	CreatedAt           epoch              `json:"created_at"`
	CompletedAt         *epoch             `json:"completed_at"`
	DeadlineAt          *epoch             `json:"deadline_at"`
	ExpiredAt           *epoch             `json:"expired_at"`
	Attempts            []Attempt          `json:"attempts"`
	Review              *ReviewRequirement `json:"review,omitempty"`
	VotesCast           *int               `json:"votes_cast,omitempty"`
	GoldVerdict         *string            `json:"gold_verdict,omitempty"`
	Escalation          *TaskEscalation    `json:"escalation,omitempty"`
	FinalVerifier       *string            `json:"final_verifier"`
	Action              *Action            `json:"action,omitempty"`
	EditVerdicts        []string           `json:"edit_verdicts,omitempty"`
	Approved            *ApprovedAction    `json:"approved_action,omitempty"`
	Receipt             string             `json:"receipt,omitempty"`
}

// UnmarshalJSON reads the API's Task object.
func (t *Task) UnmarshalJSON(b []byte) error {
	var w taskWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*t = Task{w.ID, w.Status, w.TaskType, w.Source, w.Touchpoint, w.Prompt, w.AllowedVerdicts,
		w.ConfidenceThreshold, w.FinalVerdict, w.FinalTier, w.FinalConfidence,
		w.CreatedAt.time(), w.CompletedAt.timePtr(), w.DeadlineAt.timePtr(), w.ExpiredAt.timePtr(), w.Attempts, w.Review, w.VotesCast, w.GoldVerdict, w.Escalation, w.FinalVerifier,
		w.Action, w.EditVerdicts, w.Approved, w.Receipt}
	return nil
}

// MarshalJSON writes the API's Task object.
func (t Task) MarshalJSON() ([]byte, error) {
	return json.Marshal(taskWire{t.ID, t.Status, t.TaskType, t.Source, t.Touchpoint, t.Prompt, t.AllowedVerdicts,
		t.ConfidenceThreshold, t.FinalVerdict, t.FinalTier, t.FinalConfidence,
		epoch(t.CreatedAt), epochPtr(t.CompletedAt), epochPtr(t.DeadlineAt), epochPtr(t.ExpiredAt), t.Attempts, t.Review, t.VotesCast, t.GoldVerdict, t.Escalation, t.FinalVerifier,
		t.Action, t.EditVerdicts, t.Approved, t.Receipt})
}

// Attempt is one verifier call or one person's decision on a task. Fields
// that do not apply are nil: Model for a person, Reviewer for the verifier,
// Error when the call succeeded, Verdict and Confidence when it failed.
type Attempt struct {
	Tier       string     `json:"tier"`
	Verdict    *string    `json:"verdict"`
	Confidence *float64   `json:"confidence"`
	Rationale  string     `json:"rationale"`
	Model      *string    `json:"model"`
	Reviewer   *string    `json:"reviewer"`
	Error      *string    `json:"error"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at"`
	// Audit is true on a person's answer to a blind audit of a task the
	// verifier completed; it leaves the task's final fields as they were.
	Audit bool `json:"audit"`
	// Verifier names the verifier of the cascade an agent attempt asked;
	// PassedOn is true when it passed the task to the next one.
	// InputTokens, OutputTokens and Cost are what a model call took.
	Verifier     *string  `json:"verifier"`
	PassedOn     bool     `json:"passed_on"`
	InputTokens  *int     `json:"input_tokens"`
	OutputTokens *int     `json:"output_tokens"`
	Cost         *float64 `json:"cost"`
}

// attemptWire is Attempt as the API spells it.
type attemptWire struct {
	Tier         string   `json:"tier"`
	Verdict      *string  `json:"verdict"`
	Confidence   *float64 `json:"confidence"`
	Rationale    string   `json:"rationale"`
	Model        *string  `json:"model"`
	Reviewer     *string  `json:"reviewer"`
	Error        *string  `json:"error"`
	StartedAt    epoch    `json:"started_at"`
	FinishedAt   *epoch   `json:"finished_at"`
	Audit        bool     `json:"audit"`
	Verifier     *string  `json:"verifier"`
	PassedOn     bool     `json:"passed_on"`
	InputTokens  *int     `json:"input_tokens"`
	OutputTokens *int     `json:"output_tokens"`
	Cost         *float64 `json:"cost"`
}

// UnmarshalJSON reads the API's attempt object.
func (a *Attempt) UnmarshalJSON(b []byte) error {
	var w attemptWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*a = Attempt{w.Tier, w.Verdict, w.Confidence, w.Rationale, w.Model, w.Reviewer, w.Error,
		w.StartedAt.time(), w.FinishedAt.timePtr(), w.Audit, w.Verifier, w.PassedOn, w.InputTokens, w.OutputTokens, w.Cost}
	return nil
}

// MarshalJSON writes the API's attempt object.
func (a Attempt) MarshalJSON() ([]byte, error) {
	return json.Marshal(attemptWire{a.Tier, a.Verdict, a.Confidence, a.Rationale, a.Model, a.Reviewer, a.Error,
		epoch(a.StartedAt), epochPtr(a.FinishedAt), a.Audit, a.Verifier, a.PassedOn, a.InputTokens, a.OutputTokens, a.Cost})
}

// DemoTask is a task of the curated demo queue.
type DemoTask struct {
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Prompt          string          `json:"prompt"`
	AllowedVerdicts []string        `json:"allowed_verdicts"`
	Context         json.RawMessage `json:"context"`
	CreatedAt       time.Time       `json:"created_at"`
}

// demoTaskWire is DemoTask as the API spells it.
type demoTaskWire struct {
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Prompt          string          `json:"prompt"`
	AllowedVerdicts []string        `json:"allowed_verdicts"`
	Context         json.RawMessage `json:"context"`
	CreatedAt       epoch           `json:"created_at"`
}

// UnmarshalJSON reads the API's demo task object.
func (d *DemoTask) UnmarshalJSON(b []byte) error {
	var w demoTaskWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*d = DemoTask{w.ID, w.Source, w.Prompt, w.AllowedVerdicts, w.Context, w.CreatedAt.time()}
	return nil
}

// MarshalJSON writes the API's demo task object.
func (d DemoTask) MarshalJSON() ([]byte, error) {
	return json.Marshal(demoTaskWire{d.ID, d.Source, d.Prompt, d.AllowedVerdicts, d.Context, epoch(d.CreatedAt)})
}

// DemoVerdictCreate is an anonymous verdict on a demo task.
type DemoVerdictCreate struct {
	// TaskID is a demo task's id (tsk_demo_…).
	TaskID string `json:"task_id"`
	// Verdict must be one of the demo task's allowed verdicts.
	Verdict string `json:"verdict"`
	// Rationale is an optional note, at most 4000 characters.
	Rationale string `json:"rationale,omitempty"`
	// AnonSessionID optionally groups one visitor's verdicts, at most 128
	// characters.
	AnonSessionID string `json:"anon_session_id,omitempty"`
}

// DemoVerdict is a stored demo verdict.
type DemoVerdict struct {
	ID            string    `json:"id"`
	TaskID        string    `json:"task_id"`
	Verdict       string    `json:"verdict"`
	Rationale     *string   `json:"rationale"`
	AnonSessionID *string   `json:"anon_session_id"`
	CreatedAt     time.Time `json:"created_at"`
}

// demoVerdictWire is DemoVerdict as the API spells it.
type demoVerdictWire struct {
	ID            string  `json:"id"`
	TaskID        string  `json:"task_id"`
	Verdict       string  `json:"verdict"`
	Rationale     *string `json:"rationale"`
	AnonSessionID *string `json:"anon_session_id"`
	CreatedAt     epoch   `json:"created_at"`
}

// UnmarshalJSON reads the API's demo verdict object.
func (v *DemoVerdict) UnmarshalJSON(b []byte) error {
	var w demoVerdictWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*v = DemoVerdict{w.ID, w.TaskID, w.Verdict, w.Rationale, w.AnonSessionID, w.CreatedAt.time()}
	return nil
}

// MarshalJSON writes the API's demo verdict object.
func (v DemoVerdict) MarshalJSON() ([]byte, error) {
	return json.Marshal(demoVerdictWire{v.ID, v.TaskID, v.Verdict, v.Rationale, v.AnonSessionID, epoch(v.CreatedAt)})
}

// Health is the server's health: OK, or not OK with the reason in Error.
type Health struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// epoch is a time on the wire: Unix seconds with milliseconds as a JSON
// number, such as 1795415525.173.
type epoch time.Time

func (e epoch) time() time.Time { return time.Time(e) }

func (e *epoch) timePtr() *time.Time {
	if e == nil {
		return nil
	}
	t := time.Time(*e)
	return &t
}

func epochPtr(t *time.Time) *epoch {
	if t == nil {
		return nil
	}
	e := epoch(*t)
	return &e
}

func (e epoch) MarshalJSON() ([]byte, error) {
	ms := time.Time(e).UnixMilli()
	sign := ""
	if ms < 0 {
		sign, ms = "-", -ms
	}
	return fmt.Appendf(nil, "%s%d.%03d", sign, ms/1000, ms%1000), nil
}

func (e *epoch) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(f, 0) {
		return fmt.Errorf("a time must be epoch seconds as a JSON number, not %s", b)
	}
	*e = epoch(time.UnixMilli(int64(math.Round(f * 1000))).UTC())
	return nil
}

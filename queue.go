package arbiter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxAgentFailures is how many failed verifier calls a task may have before
// it goes to a human.
const MaxAgentFailures = 3

// AgentStep is what one verifier call does to a claimed task: the attempt
// to record and the status the task moves to.
type AgentStep struct {
	Attempt Attempt
	// Next is StatusCompleted (the agent decided), StatusHumanNeeded, or
	// StatusPending (a failed or throttled call to retry at RunAfter).
	Next     string
	RunAfter Timestamp
	// Throttled is a call the provider turned away for now: the task goes
	// back to pending with no attempt recorded and no failure counted.
	Throttled bool
	// Err is the full error of a failed or throttled call, for the log;
	// the attempt records only its reason (VerifierFailureReason).
	Err error
	// ResetFailures starts the task's failures count anew: the step
	// passes it to the next verifier of its cascade, whose calls have
	// failed none yet.
	ResetFailures bool
	// Stage is the task's cascade stage after the step (Task.CascadeStage):
	// the next verifier's when it passed the task on.
	Stage int
}

// AgentRetry is how a worker spaces the calls of a task, for NextAgentStep.
type AgentRetry struct {
	// Backoff is the wait before retrying a task whose calls failed
	// failures times.
	Backoff func(failures int) time.Duration
	// CallTimeout is the limit on one call: a throttled task whose next
	// call could not end before its deadline goes to a human now.
	CallTimeout time.Duration
}

// NextAgentStep routes a verifier call on t, made from started to now. A
// confident answer with an allowed verdict completes the task; a declined or
// unconfident answer sends it to a human; an error, or a verdict outside the
// set, is a failed attempt that is retried after retry.Backoff(failures so
// far) until MaxAgentFailures, and then goes to a human. A failed attempt
// records the reason for API callers; the step keeps the full error.
//
// A throttled call (*ThrottledError) is not the verifier failing on the
// task: the task goes back to pending for the wait the error asks, rounded
// up to the millisecond, recording no attempt and counting no failure. When
// its next call could not end before its deadline (the wait plus
// retry.CallTimeout reaches it), it goes to a human instead, with a failed
// attempt saying VerifierThrottled.
func NextAgentStep(t *Task, v Verification, callErr error, started, now time.Time, retry AgentRetry) AgentStep {
	finished := TimestampOf(now)
	a := Attempt{Tier: TierAgent, StartedAt: TimestampOf(started), FinishedAt: &finished, Rationale: v.Rationale,
		ActionDigest: t.ProposedDigest()}
	if v.Model != "" {
		a.Model = &v.Model
	}
	var throttled *ThrottledError
	if errors.As(callErr, &throttled) {
		next := now.Add(max(throttled.RetryAfter, 0))
		if t.DeadlineAt != nil && !next.Add(retry.CallTimeout).Before(t.DeadlineAt.Time()) {
			reason := VerifierThrottled
			a.Error, a.Rationale = &reason, ""
			return AgentStep{Attempt: a, Next: StatusHumanNeeded, Err: callErr}
		}
		// Rounded up, so the task never comes back before it was asked.
		return AgentStep{Next: StatusPending, RunAfter: TimestampOf(next.Add(time.Millisecond - time.Nanosecond)),
			Throttled: true, Err: callErr}
	}
	if callErr == nil && v.Decided && !t.Allows(v.Verdict) {
		callErr = &VerifierError{Reason: VerifierVerdictOutsideSet,
			Err: fmt.Errorf("%q is not one of the allowed verdicts", v.Verdict)}
	}
	if callErr == nil && v.Decided && (v.Confidence < 0 || v.Confidence > 1 || math.IsNaN(v.Confidence)) {
		callErr = &VerifierError{Reason: VerifierConfidenceOutOfRange, Err: fmt.Errorf("confidence %v", v.Confidence)}
	}
	switch {
	case callErr != nil:
		reason := VerifierFailureReason(callErr)
		a.Error = &reason
		if t.Failures+1 >= MaxAgentFailures {
			return AgentStep{Attempt: a, Next: StatusHumanNeeded, Err: callErr}
		}
		return AgentStep{Attempt: a, Next: StatusPending, RunAfter: TimestampOf(now.Add(retry.Backoff(t.Failures))), Err: callErr}
	case !v.Decided:
		return AgentStep{Attempt: a, Next: StatusHumanNeeded}
	}
	verdict, confidence := v.Verdict, v.Confidence
	a.Verdict, a.Confidence = &verdict, &confidence
	if confidence >= t.ConfidenceThreshold {
		return AgentStep{Attempt: a, Next: StatusCompleted}
	}
	return AgentStep{Attempt: a, Next: StatusHumanNeeded}
}

// LostAgentStep routes a claimed task before its call. Each time a worker
// stops with a task leased (killed, or hung past the lease) after it
// started the task's call (QueueService.StartAgentCalls), the claim that
// takes the task again counts a failure (the store does, in the claim); a
// task whose failures, lost calls and failed ones together, reached
// MaxAgentFailures goes to a human without another call, recording one
// failed attempt with the reason VerifierLost. So a task that brings down
// every worker that takes it goes to a human instead of taking the agent
// tier down again and again. ok is false for any other task, which gets
// its call.
func LostAgentStep(t *Task, now time.Time) (step AgentStep, ok bool) {
	if t.Failures < MaxAgentFailures {
		return AgentStep{}, false
	}
	at, reason := TimestampOf(now), VerifierLost
	return AgentStep{
		Attempt: Attempt{Tier: TierAgent, StartedAt: at, FinishedAt: &at, Error: &reason, ActionDigest: t.ProposedDigest()},
		Next:    StatusHumanNeeded,
		Err:     fmt.Errorf("the task's calls failed or were lost with their workers %d times", t.Failures),
	}, true
}

// HumanDecision is a reviewer's verdict on a task waiting for a human.
type HumanDecision struct {
	Verdict   string
	Rationale string
	Reviewer  string // who decided: an e-mail address or another identity
	// ReviewerID is the deciding person, whose role the store checks; ""
	// for a decision made on the operator's behalf.
	ReviewerID string
	// Client is where the decision came from, for the account's audit log.
	Client Client
	// Via names the channel of a decision made outside the desk ("slack",
	// "link"), for the account's audit log; "" on the desk and the API.
	Via string
	// ActionDigest is the digest of the action the person was shown, on
	// a task with an action: the desk's form, the Slack message and the
	// decision link carry it. A decision whose copy shows another action
	// than the one now in force (a voter edited it since) is refused.
	ActionDigest string
	// EditedArgs, when not nil, are the args the person approves instead
	// of the action's (edit on approve): only its editable members may
	// differ, the schema must hold, and the verdict must be one of the
	// task's EditVerdicts.
	EditedArgs json.RawMessage
}

// BindAction returns the action the decision binds itself to on t (see
// TaskAction.Approve): the action in force, or the person's edit of it;
// nil for a task without an action. Returns ECONFLICT when the person's
// copy showed another action than the one in force, and EINVALID (field
// "args") for an edit the task does not allow: none on a task without an
// action or on a blind audit, none with a verdict that is not one of its
// EditVerdicts, and none that Approve refuses.
func (d HumanDecision) BindAction(t *Task) (*ApprovedAction, error) {
	cur, ok := t.CurrentAction()
	if !ok {
		if d.EditedArgs != nil {
			return nil, FieldErrorf("args", "This task has no action to edit.")
		}
		return nil, nil
	}
	if d.ActionDigest != cur.Digest {
		return nil, ActionChangedError(cur)
	}
	if d.EditedArgs != nil {
		switch {
		case t.AuditWaiting():
			return nil, FieldErrorf("args", "A blind audit answers the agent's decision as it was; it takes no edit.")
		case !slices.Contains(t.EditVerdicts, d.Verdict):
			return nil, FieldErrorf("args", "Only %s may come with an edit of the action; %q may not.", quoteList(t.EditVerdicts), d.Verdict)
		}
	}
	approved, err := t.Action.Approve(cur, d.EditedArgs)
	if err != nil {
		return nil, err
	}
	if approved.Edited && approved.Digest != cur.Digest && d.ReviewerID != "" {
		by := d.ReviewerID
		approved.EditedBy = &by
	}
	return &approved, nil
}

// ActionChangedError is the ECONFLICT error of a decision made on a copy
// of a task whose action is no longer cur, the one in force.
func ActionChangedError(cur ApprovedAction) *Error {
	by := ""
	if cur.Edited {
		by = " (a reviewer edited it)"
	}
	return Errorf(ECONFLICT, "The task's action changed since this copy was shown%s; nothing was recorded. Open the task again to see the action now in force, %s.", by, ShortDigest(cur.Digest))
}

// ShortDigest returns the first 12 hex digits of an action digest, enough
// for a person to tell two actions apart.
func ShortDigest(digest string) string {
	hex := strings.TrimPrefix(digest, DigestPrefix)
	if len(hex) > 12 {
		hex = hex[:12]
	}
	return hex
}

// quoteList writes verdicts as “a”, “b” or “c”.
func quoteList(verdicts []string) string {
	quoted := make([]string, len(verdicts))
	for i, v := range verdicts {
		quoted[i] = strconv.Quote(v)
	}
	switch len(quoted) {
	case 0:
		return "no verdict"
	case 1:
		return quoted[0]
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}

// Validate checks a decision before it is stored, whatever the task: a
// reviewer, a verdict no longer than any allowed verdict can be, and a
// rationale that ValidateRationale accepts. Returns EINVALID.
func (d HumanDecision) Validate() error {
	switch {
	case strings.TrimSpace(d.Reviewer) == "":
		return Errorf(EINVALID, "A decision needs the reviewer's identity.")
	case d.Verdict == "":
		return Errorf(EINVALID, "Pick a verdict.")
	case utf8.RuneCountInString(d.Verdict) > MaxVerdictChars:
		return Errorf(EINVALID, "The verdict must be one of the task's allowed verdicts.")
	}
	return ValidateRationale(d.Rationale)
}

// Limits on the text of a demo verdict or a reviewer's decision, counted
// in characters for people and in bytes of UTF-8 for storage: a rationale of
// 4000 characters outside the Latin alphabets may still pass 8 KiB.
const (
	MaxRationaleChars = 4000
	MaxRationaleBytes = 8 << 10
)

// ValidateRationale checks the rationale of a reviewer's decision or a demo
// verdict: at most MaxRationaleChars characters and MaxRationaleBytes bytes
// of UTF-8 text without NUL. Returns EINVALID.
func ValidateRationale(s string) error {
	if utf8.RuneCountInString(s) > MaxRationaleChars || len(s) > MaxRationaleBytes {
		return Errorf(EINVALID, "The rationale may be at most %d characters (%d KiB).", MaxRationaleChars, MaxRationaleBytes>>10)
	} else if !isText(s) {
		return Errorf(EINVALID, "The rationale must be text: valid UTF-8 without NUL characters.")
	}
	return nil
}

// Attempt returns the attempt the decision makes on t at now: the
// reviewer's verdict at confidence 1.0, which completes t with final_tier
// human; on a task waiting for an audit (AuditWaiting), the same attempt
// with Audit true, which leaves t's final fields as the agent set them.
// Returns EINVALID when Validate refuses the decision or its
// verdict is not one of t's, and ECONFLICT when t is not waiting for a
// human: decided already (the error says by whom), expired (ExpiredError),
// or still with the agent.
func (d HumanDecision) Attempt(t *Task, now Timestamp) (Attempt, error) {
	if err := d.Validate(); err != nil {
		return Attempt{}, err
	}
	audit := t.AuditWaiting()
	switch t.Status {
	case StatusHumanNeeded:
	case StatusCompleted:
		if audit {
			break
		}
		if t.AuditState == AuditStateDone && t.FinalTier != nil && *t.FinalTier == TierAgent {
			return Attempt{}, Errorf(ECONFLICT, "The audit of this task was already answered by %s.", t.AuditedBy())
		}
		return Attempt{}, Errorf(ECONFLICT, "The task was already decided by %s.", t.DecidedBy())
	case StatusExpired:
		return Attempt{}, ExpiredError(t.ExpiredAt)
	default:
		return Attempt{}, Errorf(ECONFLICT, "The task is not waiting for a human; it is %s.", t.Status)
	}
	if !t.Allows(d.Verdict) {
		return Attempt{}, Errorf(EINVALID, "%q is not one of the task's allowed verdicts.", d.Verdict)
	}
	approved, err := d.BindAction(t)
	if err != nil {
		return Attempt{}, err
	}
	verdict, confidence, reviewer, finished := d.Verdict, 1.0, d.Reviewer, now
	a := Attempt{Tier: TierHuman, Verdict: &verdict, Confidence: &confidence, Rationale: d.Rationale,
		Reviewer: &reviewer, StartedAt: now, FinishedAt: &finished, Audit: audit}
	if approved != nil {
		digest := approved.Digest
		a.ActionDigest = &digest
	}
	return a, nil
}

// AuditedBy names the reviewer of the task's last audit attempt, or
// "another reviewer".
func (t *Task) AuditedBy() string {
	for i := len(t.Attempts) - 1; i >= 0; i-- {
		if a := t.Attempts[i]; a.Audit && a.Reviewer != nil {
			return *a.Reviewer
		}
	}
	return "another reviewer"
}

// QueueService is the store side of the agent tier and the human queue.
type QueueService interface {
	// ClaimTasks leases up to max tasks to owner for the lease duration,
	// counted from the claim by the database's clock: first running tasks
	// whose lease expired (their worker vanished), then failed tasks whose
	// retry is due, then new pending tasks, each oldest first. They move to
	// agent_running and come with their context and failure count. A lease
	// of zero or less has run out by the time the claim returns.
	ClaimTasks(ctx context.Context, owner string, max int, lease time.Duration) ([]*Task, error)

	// ClaimTasksStarted is ClaimTasks that also marks the calls of the
	// tasks it leases started (StartAgentCalls) in the same step, for a
	// worker that calls as soon as it holds the tasks: there a claim lost
	// on the worker's side is a lost worker, and counts as a lost call.
	ClaimTasksStarted(ctx context.Context, owner string, max int, lease time.Duration) ([]*Task, error)

	// StartAgentCalls marks the calls of the tasks leased to owner as
	// started, before the worker makes them. A claim that takes a task
	// whose lease ran out counts a lost call (a failure) only when its
	// call was marked started: a lease whose worker never called (its
	// claim failed on the worker's side but committed) costs the task
	// nothing. Tasks owner no longer holds are left alone.
	StartAgentCalls(ctx context.Context, owner string, taskIDs []string) error

	// FinishAgentAttempt records a verifier call and moves the task to
	// step.Next, in one transaction (a throttled step, step.Throttled,
	// records no attempt); a task it completes is also put in
	// the review queue as a blind audit when ChosenForAudit(id, rate) for
	// the task's own audit rate, else the account's, which the task then
	// keeps as the rate it was sampled at. It acts only while owner still
	// holds the task's lease and its deadline has not passed. Returns ECONFLICT,
	// changing nothing, when the lease was lost, so no task is decided
	// twice, and ExpiredError when the deadline passed first.
	FinishAgentAttempt(ctx context.Context, owner, taskID string, step AgentStep) error

	// ExpireTasks moves up to max tasks that are not final and whose
	// deadline has passed, by the database's clock, to expired (final_*
	// and completed_at stay null, expired_at is set), and returns their
	// ids. Up to max such tasks with an on-expiry outcome get it first
	// (DeadlineStep): completed with final_tier fallback and a fallback
	// attempt, or expired; their ids are returned too. Each task changes
	// once, however many workers call it at once, a decision committed
	// first stands, and its waiters are woken.
	ExpireTasks(ctx context.Context, max int) ([]string, error)

	// ReleaseTasks returns every task still leased to owner to pending, for
	// a worker that stops before its calls finished.
	ReleaseTasks(ctx context.Context, owner string) error

	// DecideTask completes the account's human_needed task with a
	// reviewer's verdict: final_tier human, final_confidence 1.0 and a human
	// attempt, and records the decision in the account's audit log, in one
	// transaction. On a task waiting for its audit (Task.AuditWaiting) it
	// records the answer instead: a human attempt with Audit true, the
	// labelled pair, the audit log's line and the audit's end, leaving the
	// status and final fields as the agent set them; a second answer is
	// ECONFLICT. A decision on a task the agent answered with a verdict and
	// a confidence stores its labelled pair too (LabelledPairOf). Returns
	// ErrNotAllowed when the reviewer (ReviewerID) is not a member whose
	// role may review, ENOTFOUND as FindTaskByID does, EINVALID for a
	// verdict outside the task's set, and ECONFLICT when the task is not
	// waiting for a human (already decided, still with the agent, or
	// expired: ExpiredError, also when its deadline has passed and the
	// worker has not expired it yet).
	DecideTask(ctx context.Context, accountID, taskID string, d HumanDecision) (*Task, error)

	// ListHumanQueue returns the account's tasks in the review queue
	// (Task.InReviewQueue: human_needed, or waiting for an audit) that the
	// view keeps, in its order, at most limit of them, and how many it
	// keeps in all, up to QueueCountCap+1; each says who holds it
	// (Reservation). The tasks come without their contexts and attempts,
	// which a list does not show. Returns EINVALID for a view that fails
	// Validate.
	ListHumanQueue(ctx context.Context, accountID string, view QueueView, limit int) ([]*Task, int, error)

	// CountHumanQueue returns how many of the account's tasks wait for a
	// human or an audit, up to QueueCountCap+1, less those the voter (a
	// person's id, or "" for nobody) has voted on (QueueView.Voter).
	CountHumanQueue(ctx context.Context, accountID, voter string) (int, error)

	// FindQueuePlace returns where the account's task stands in the view
	// of its review queue (its filters, in its order), reading ids and
	// counts only. Its Prev and Next skip the tasks someone other than the
	// person holds (Reservation). A task that is not in the view (decided,
	// unknown, another account's, filtered out) has Position 0, and its
	// Next is the view's first task. Returns EINVALID for a view that fails
	// Validate.
	FindQueuePlace(ctx context.Context, accountID, taskID, personID string, view QueueView) (QueuePlace, error)
}

// QueueCountCap bounds the counting of a human queue: counts of it (the
// queue's length, a task's position) stop at QueueCountCap+1, so a request
// costs the same however deep the queue. A count above QueueCountCap
// means "more than QueueCountCap" (the desk shows "1000+"): a reviewer
// reads a thousand tasks as a deep queue, and each count walks the
// queue's index up to the cap, with a look at the person's votes an
// entry, on every page of the desk (at 10,000 the walks were most of the
// database's work under the desk: 2-4.5 ms a page).
const QueueCountCap = 1_000

// QueuePlace is where a task stands in its account's human queue, for the
// reviewer's previous and next links.
type QueuePlace struct {
	// Prev and Next are the ids of the waiting tasks just before and after
	// the task; "" at the ends.
	Prev, Next string
	// Position counts from 1; 0 when the task is not waiting. Like Total,
	// it stops at QueueCountCap+1.
	Position int
	// Total is how many tasks wait in all, up to QueueCountCap+1.
	Total int
}

// Orders of the review queue.
const (
	QueueOldestFirst = "oldest"   // the default: the escalated first, then the longest waiting first
	QueueByDeadline  = "deadline" // the least time left first (the nearest deadline); tasks without one last
)

// QueueView is a team's view of the review queue: filters on the task's
// labels (exact matches; "" matches any) and an order. It lives in the
// queue page's address, so a team can share it.
type QueueView struct {
	TaskType   string
	Source     string
	Touchpoint string
	Order      string // QueueOldestFirst ("" too) or QueueByDeadline
	// Escalated keeps only the tasks that reached a rung of their
	// escalation (escalation.go).
	Escalated bool
	// Voter, when set, leaves out the tasks this person has voted on: a
	// task that asks several votes then waits for the others' votes, not
	// theirs, so it leaves their queue and its count. It is the person
	// looking, never part of the address.
	Voter string
}

// Validate checks the view and fills in the default order. Every failure
// is an EINVALID *Error naming the field at fault.
func (v *QueueView) Validate() error {
	for _, l := range v.Labels() {
		if err := checkLabel(l.Name, l.Value); err != nil {
			return err
		}
	}
	switch v.Order {
	case "":
		v.Order = QueueOldestFirst
	case QueueOldestFirst, QueueByDeadline:
	default:
		return Errorf(EINVALID, "order must be %q or %q.", QueueOldestFirst, QueueByDeadline)
	}
	return nil
}

// Query returns the view as the query of an address, "?task_type=refund&order=deadline"
// say, or "" for the whole queue oldest first: the desk's links and
// redirects carry it, so a reviewer who opened a task from a view goes on
// within it.
func (v QueueView) Query() string {
	q := url.Values{}
	for _, l := range v.Labels() {
		if l.Value != "" {
			q.Set(l.Name, l.Value)
		}
	}
	if v.Order != "" && v.Order != QueueOldestFirst {
		q.Set("order", v.Order)
	}
	if v.Escalated {
		q.Set("escalated", "1")
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// QueueLabel is one of a view's label filters: the name the address and
// the store give the label, and the value it must have ("" for any).
type QueueLabel struct{ Name, Value string }

// Labels returns the view's label filters, set or not, in the order task
// type, source, touchpoint.
func (v QueueView) Labels() [3]QueueLabel {
	return [3]QueueLabel{{"task_type", v.TaskType}, {"source", v.Source}, {"touchpoint", v.Touchpoint}}
}

// QueueViewOf reads a view from an address's query (task_type, source,
// touchpoint, order, escalated=1); Validate checks it.
func QueueViewOf(q url.Values) QueueView {
	return QueueView{TaskType: q.Get("task_type"), Source: q.Get("source"), Touchpoint: q.Get("touchpoint"), Order: q.Get("order"),
		Escalated: q.Get("escalated") == "1"}
}

// Filtered reports whether the view leaves some tasks out.
func (v QueueView) Filtered() bool {
	if v.Escalated {
		return true
	}
	for _, l := range v.Labels() {
		if l.Value != "" {
			return true
		}
	}
	return false
}

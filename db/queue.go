package db

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

var _ arbiter.QueueService = (*DB)(nil)

// ClaimTasks leases up to max due tasks to owner: first running tasks whose
// lease expired, then failed calls whose retry is due, then new tasks, each
// oldest first, so a retry never waits behind a backlog. The lease runs out
// lease after the claim by the database's clock, which every process reads
// alike, so a claim that was held up cannot hand out a lease already spent.
// Postgres skips rows other workers hold locked; SQLite has one writer, so
// one UPDATE … RETURNING is already exclusive. Taking a task whose lease ran
// out counts a failure when its call had started (StartAgentCalls): its
// worker stopped without an answer, and arbiter.LostAgentStep sends a task
// lost too often to a human. A lease whose worker never started the call
// (its claim failed on the worker's side after it committed, say) costs
// the task nothing.
func (d *DB) ClaimTasks(ctx context.Context, owner string, max int, lease time.Duration) ([]*arbiter.Task, error) {
	return d.claimTasks(ctx, d.claims.tasks, owner, max, lease)
}

// ClaimTasksStarted is ClaimTasks that also marks the calls of the tasks it
// leases started, as StartAgentCalls would, in the claim's own statement:
// for a worker whose calls start as soon as it holds the tasks (a verifier
// that answers in the process), where a claim lost on the worker's side is
// a lost worker, so that a lease that runs out counts a failure without a
// second statement.
func (d *DB) ClaimTasksStarted(ctx context.Context, owner string, max int, lease time.Duration) ([]*arbiter.Task, error) {
	return d.claimTasks(ctx, d.claims.tasksStarted, owner, max, lease)
}

// claimTasks runs query, claimTasksSQL's statement, for owner.
func (d *DB) claimTasks(ctx context.Context, query, owner string, max int, lease time.Duration) (_ []*arbiter.Task, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	ctx, endSpan := d.tracedRoot(ctx, "db ClaimTasks")
	defer endSpan(&err)
	if max <= 0 {
		return nil, nil
	}
	now := int64(d.nowMS())
	claimed, err := claimRows(ctx, d, "claim tasks", query, scanClaimedTask,
		owner, lease.Milliseconds(), max, now, max, now, max, max)
	if err != nil {
		return nil, err
	}
	// RETURNING promises no order; hand the oldest out first.
	slices.SortStableFunc(claimed, func(a, b *arbiter.Task) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
	if telemetry.On() && len(claimed) > 0 {
		if err := d.readTraceParents(ctx, claimed); err != nil {
			return nil, err
		}
	}
	return claimed, nil
}

// readTraceParents sets the tasks' TraceParent, the trace context of
// their creates, and links the claim's span to each create: a claim takes
// tasks of many traces, so it is a root of its own that names them, and
// each task's agent decision is the child of its create (worker). Only
// while tracing is on: it costs a query.
func (d *DB) readTraceParents(ctx context.Context, tasks []*arbiter.Task) error {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	var rows []struct {
		ID          string `db:"id"`
		TraceParent string `db:"traceparent"`
	}
	if err := d.selectIn(ctx, d.db, &rows, `SELECT id, traceparent FROM task_states
		WHERE id IN (?) AND traceparent IS NOT NULL`, ids); err != nil {
		return fmt.Errorf("read trace contexts: %w", err)
	}
	byID := make(map[string]string, len(rows))
	for _, r := range rows {
		byID[r.ID] = r.TraceParent
	}
	span := trace.SpanFromContext(ctx)
	for _, t := range tasks {
		t.TraceParent = byID[t.ID]
		if sc := telemetry.SpanContextOf(t.TraceParent); sc.IsSampled() && span.IsRecording() {
			span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{attribute.String("arbiter.task_id", t.ID)}})
		}
	}
	return nil
}

// StartAgentCalls marks the calls of the tasks leased to owner as started,
// by the database's clock, so that a lease that runs out from now on counts
// a lost call (see ClaimTasks). Tasks owner no longer holds are left alone.
func (d *DB) StartAgentCalls(ctx context.Context, owner string, taskIDs []string) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if len(taskIDs) == 0 {
		return nil
	}
	const update = `UPDATE task_states SET call_started_at = %s WHERE status = 'agent_running' AND lease_owner = ? AND id IN (?)`
	if _, err := d.execIn(ctx, d.db, fmt.Sprintf(update, d.sqlNowMS()), owner, taskIDs); err != nil {
		return fmt.Errorf("start agent calls: %w", err)
	}
	return nil
}

// claimTasksSQL is ClaimTasks's statement, or ClaimTasksStarted's when
// started, assembled once when the store opens (DB.claims). Arguments:
// owner, lease (ms), then max, now, max, now, max, max. It is one statement, so SQLite takes its one write lock
// once per claim: each kind of due task is picked by its own index, at
// most max of each, and the first max of them by kind, then by due time,
// are leased. A task past its deadline is left to the sweep to expire.
func (d *DB) claimTasksSQL(started bool) string {
	lock := d.sqlSkipLocked()
	callStarted := "NULL"
	if started {
		callStarted = d.sqlNowMS()
	}
	due := func(prio int, where, order string) string {
		return `SELECT id, ` + strconv.Itoa(prio) + ` AS prio, ` + order + ` AS due FROM (SELECT id, ` + order + ` FROM task_states
			WHERE ` + where + ` AND ` + d.beforeDeadline() + ` ORDER BY ` + order + ` LIMIT ? ` + lock + `) k` + strconv.Itoa(prio)
	}
	return d.sqlReturningTasks(`UPDATE task_states SET status = 'agent_running', lease_owner = ?,
		lease_expires_at = ` + d.sqlNowMS() + ` + ?,
		failures = CASE WHEN status = 'agent_running' AND call_started_at IS NOT NULL THEN failures + 1 ELSE failures END,
		call_started_at = ` + callStarted + `
		WHERE id IN (SELECT id FROM (` +
		due(0, `status = 'agent_running' AND lease_expires_at < `+d.sqlNowMS(), `lease_expires_at`) + ` UNION ALL ` +
		due(1, `status = 'pending' AND failures > 0 AND run_after <= ?`, `run_after`) + ` UNION ALL ` +
		due(2, `status = 'pending' AND failures = 0 AND run_after <= ?`, `run_after`) + `
		) d ORDER BY prio, due LIMIT ?)`)
}

// scanClaimedTask reads a task a claim leased.
func scanClaimedTask(rows *sql.Rows) (*arbiter.Task, error) {
	var r taskRow
	if err := rows.Scan(r.dest()...); err != nil {
		return nil, fmt.Errorf("scan claimed task: %w", err)
	}
	return r.task()
}

// claimRows runs query, a claim statement (prepared once), with args and
// returns what it leased, each row read by scan; what names the claim in
// its errors. Tasks (ClaimTasks) and webhook messages
// (ClaimWebhookMessages) are claimed through it.
func claimRows[T any](ctx context.Context, d *DB, what, query string, scan func(*sql.Rows) (T, error), args ...any) ([]T, error) {
	stmt, err := d.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	var claimed []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		claimed = append(claimed, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return claimed, nil
}

var errLeaseLost = arbiter.Errorf(arbiter.ECONFLICT, "The worker no longer holds the task's lease.")

// FinishAgentAttempt records a verifier call and moves the task on, only
// while owner holds its lease. On Postgres concurrent calls share one
// statement and one commit (finishGroupOf); on SQLite, and for a call alone,
// it is finishOne.
func (d *DB) FinishAgentAttempt(ctx context.Context, owner, taskID string, step arbiter.AgentStep) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	ctx, endSpan := d.traced(ctx, "db FinishAgentAttempt")
	defer endSpan(&err)
	f := agentFinish{owner: owner, taskID: taskID, step: step, now: d.nowMS(), traceParent: telemetry.TraceParent(ctx)}
	if d.grouping() {
		_, err = d.finishes.Do(ctx, f)
		return err
	}
	return d.finishOne(ctx, f)
}

// agentFinish is one FinishAgentAttempt call: the step to record on the
// task, while owner holds its lease, at now.
type agentFinish struct {
	owner, taskID string
	step          arbiter.AgentStep
	now           arbiter.Timestamp
	// traceParent is the trace context of the call's span: a group of
	// finishes runs in a context of its own, and what each queues joins
	// its own call's trace.
	traceParent string
}

// finalFields returns what the finish sets in the task's final_* columns
// and completed_at: the agent's verdict when the step completes the task,
// NULL otherwise.
func (f agentFinish) finalFields() (verdict, tier, confidence, completedAt any) {
	if f.step.Next == arbiter.StatusCompleted {
		return *f.step.Attempt.Verdict, arbiter.TierAgent, *f.step.Attempt.Confidence, int64(f.now)
	}
	return nil, nil, nil, nil
}

// finalVerifier is the verifier that decided the task, when the step
// completes it; nil otherwise.
func (f agentFinish) finalVerifier() *string {
	if f.step.Next == arbiter.StatusCompleted {
		return f.step.Attempt.Verifier
	}
	return nil
}

// approvedDigest is what the finish sets in approved_digest: the digest
// of the action the agent decided on (its proposal) when the step
// completes a task with an action, NULL otherwise.
func (f agentFinish) approvedDigest() any {
	if f.step.Next == arbiter.StatusCompleted && f.step.Attempt.ActionDigest != nil {
		return *f.step.Attempt.ActionDigest
	}
	return nil
}

// failed is 1 when the finish records a failed call, for the failures
// count.
func (f agentFinish) failed() int {
	if f.step.Attempt.Error != nil {
		return 1
	}
	return 0
}

// auditDraw returns 1 and the task's audit draw (arbiter.AuditDraw) when
// the finish completes the task, and 0 and 2 otherwise. A completed task
// is chosen for audit by arbiter.ChosenForAudit: its draw below its own
// rate or else its account's (effectiveAuditRate), which the task keeps as
// the rate it was sampled at; 2 is above every rate.
func (f agentFinish) auditDraw() (completed int, draw float64) {
	if f.step.Next == arbiter.StatusCompleted {
		return 1, arbiter.AuditDraw(f.taskID)
	}
	return 0, 2
}

// finishOne records one finish in its own transaction.
func (d *DB) finishOne(ctx context.Context, f agentFinish) error {
	ctx = telemetry.WithParent(ctx, f.traceParent)
	verdict, tier, confidence, completedAt := f.finalFields()
	update, err := d.stmt(ctx, d.sqlPublishing(`UPDATE task_states SET status = ?, final_verdict = ?, final_tier = ?,
		final_confidence = ?, completed_at = ?, approved_digest = ?, failures = CASE WHEN ? THEN 0 ELSE failures + ? END, run_after = ?,
		final_verifier = ?, cascade_stage = ?,
		lease_owner = NULL, lease_expires_at = NULL,
		audit_rate = CASE WHEN ? = 1 THEN `+effectiveAuditRate+` ELSE audit_rate END,
		audit_state = CASE WHEN ? < `+effectiveAuditRate+` THEN '`+arbiter.AuditStateWaiting+`' ELSE audit_state END
		WHERE id = ? AND status = 'agent_running' AND lease_owner = ? AND `+d.beforeDeadline()+`
		RETURNING `+updatedColumns))
	if err != nil {
		return err
	}
	insert, err := d.stmt(ctx, insertAttemptSQL)
	if err != nil {
		return err
	}
	completed, draw := f.auditDraw()
	return d.transact(ctx, func(tx *Tx) error {
		rows, err := tx.StmtContext(ctx, update).QueryContext(ctx,
			f.step.Next, verdict, tier, confidence, completedAt, f.approvedDigest(), f.step.ResetFailures, f.failed(), int64(f.step.RunAfter),
			f.finalVerifier(), f.step.Stage, completed, draw, f.taskID, f.owner)
		if err != nil {
			return fmt.Errorf("finish attempt: %w", err)
		}
		updated, err := scanUpdated(rows)
		if err != nil {
			return fmt.Errorf("finish attempt: %w", err)
		} else if len(updated) == 0 {
			return d.finishRefused(ctx, tx, f.taskID)
		}
		// A throttled call records no attempt.
		if !f.step.Throttled {
			if err := insertAttempt(ctx, tx.StmtContext(ctx, insert), f.taskID, f.step.Attempt); err != nil {
				return err
			}
		}
		var decided []decision
		if f.step.Next == arbiter.StatusCompleted {
			a := f.step.Attempt
			decided = append(decided, decisionOf(updated[0].accountID, f.taskID, *a.Verdict, f.now, a, ""))
		}
		// The attempt is in and the receipt signed: the event's task
		// shows them.
		_, err = tx.publishDecided(ctx, decided, eventsOf(updated)...)
		return err
	})
}

// finishRefused says why a finish changed nothing: the task's deadline
// passed (ExpiredError), or its lease was lost (ECONFLICT).
func (d *DB) finishRefused(ctx context.Context, q sqlx.QueryerContext, taskID string) error {
	if passed, err := d.deadlinePassed(ctx, q, taskID); err != nil {
		return err
	} else if passed {
		return d.deadlineRefusal(ctx, q, taskID)
	}
	return errLeaseLost
}

// effectiveAuditRate is the SQL of the audit rate that applies to a task
// being updated: its own, or its account's.
const effectiveAuditRate = `COALESCE(audit_rate, (SELECT a.audit_rate FROM accounts a WHERE a.id = task_states.account_id))`

const insertAttemptSQL = `INSERT INTO attempts (task_id, tier, verdict, confidence,
	rationale, model, reviewer, error, started_at, finished_at, audit, person_id, version, action_digest,
	verifier, passed_on, input_tokens, output_tokens, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertAttempt records a through insert, insertAttemptSQL's statement.
func insertAttempt(ctx context.Context, insert *sql.Stmt, taskID string, a arbiter.Attempt) error {
	var finished any
	if a.FinishedAt != nil {
		finished = int64(*a.FinishedAt)
	}
	_, err := insert.ExecContext(ctx,
		taskID, a.Tier, a.Verdict, a.Confidence, a.Rationale, a.Model, a.Reviewer, a.Error, int64(a.StartedAt), finished, a.Audit, nullText(a.PersonID), a.Version,
		a.ActionDigest, a.Verifier, a.PassedOn, a.InputTokens, a.OutputTokens, a.Cost)
	if err != nil {
		return fmt.Errorf("insert attempt: %w", err)
	}
	return nil
}

// ReleaseTasks returns the tasks still leased to owner to pending.
func (d *DB) ReleaseTasks(ctx context.Context, owner string) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	_, err = d.db.ExecContext(ctx, d.rebind(`UPDATE task_states SET status = 'pending', lease_owner = NULL,
		lease_expires_at = NULL WHERE status = 'agent_running' AND lease_owner = ?`), owner)
	if err != nil {
		return fmt.Errorf("release tasks: %w", err)
	}
	return nil
}

// DecideTask completes a human_needed task with a reviewer's verdict, as
// arbiter.HumanDecision.Attempt rules, and records the decision in the
// account's audit log, in one transaction.
func (d *DB) DecideTask(ctx context.Context, accountID, taskID string, dec arbiter.HumanDecision) (_ *arbiter.Task, err error) {
	decision := ctx // the span of the request that decides
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	ctx, endSpan := d.traced(ctx, "db DecideTask")
	defer endSpan(&err)
	if err := dec.Validate(); err != nil {
		return nil, err
	}
	insert, err := d.stmt(ctx, insertAttemptSQL)
	if err != nil {
		return nil, err
	}
	endTurn, err := d.decisions.take(ctx, accountID)
	if err != nil {
		return nil, err
	}
	defer endTurn()
	var decided *arbiter.Task
	var wait personWait
	err = d.transact(ctx, func(tx *Tx) error {
		if _, err := d.authorize(ctx, tx, accountID, arbiter.Actor{PersonID: dec.ReviewerID}, arbiter.ActionReview); err != nil {
			return err
		}
		t, err := d.findTask(ctx, tx, accountID, taskID)
		if err != nil {
			return err
		}
		if wait, err = d.personWaitOf(ctx, tx, t); err != nil {
			return err
		}
		if wait.read {
			// What the decision queues joins the create's trace, or
			// none when the create was not traced.
			ctx = telemetry.WithParent(ctx, wait.traceParent)
		}
		now := d.nowMS()
		a, err := dec.Attempt(t, now)
		if err != nil {
			return err
		}
		if a.Audit {
			if err := d.answerAudit(ctx, tx, insert, t, dec, a); err != nil {
				return err
			}
			decided = t
			return nil
		}
		if t.Review != nil && t.Review.Multi() {
			decided, err = d.castVote(ctx, tx, insert, accountID, taskID, dec, a)
			return err
		}
		decided, err = d.decideOne(ctx, tx, insert, t, dec, a, now)
		return err
	})
	if err != nil {
		return nil, err
	}
	if decided.Status == arbiter.StatusCompleted && decided.CompletedAt != nil {
		wait.end(decision, decided, dec.Via)
	}
	return decided, nil
}

// personWait is what the span of a task's wait for a person needs: the
// trace context of its create and when the wait began.
type personWait struct {
	read        bool // tracing is on and the task waits for a person
	traceParent string
	since       time.Time
}

// personWaitOf reads, while tracing is on, the trace context t's create
// left on its row, and when t began to wait for a person: the end of its
// last agent attempt, or its create when the agent never answered.
func (d *DB) personWaitOf(ctx context.Context, tx *Tx, t *arbiter.Task) (personWait, error) {
	if !telemetry.On() || t.Status != arbiter.StatusHumanNeeded {
		return personWait{}, nil
	}
	var tp sql.NullString
	if err := tx.GetContext(ctx, &tp, d.rebind(`SELECT traceparent FROM task_states WHERE id = ?`), t.ID); err != nil {
		return personWait{}, fmt.Errorf("read trace context: %w", err)
	}
	since := t.CreatedAt
	for _, a := range t.Attempts {
		if a.Tier == arbiter.TierAgent && a.FinishedAt != nil && *a.FinishedAt > since {
			since = *a.FinishedAt
		}
	}
	return personWait{read: true, traceParent: tp.String, since: since.Time()}, nil
}

// end records the wait that the decision made in decision's context
// ended: a span "wait for a person" from when the task began to wait to
// its completion, a child of the create in the create's trace, so that a
// trace viewer shows the whole life of the task on one time line, and
// linked to the span of the decision (the desk's request, Slack's or
// Teams' interaction, a mail's link) when that is sampled, in a trace of
// its own. A task made with tracing off, or whose create was not sampled,
// has no trace to join: nothing is recorded.
func (w personWait) end(decision context.Context, t *arbiter.Task, via string) {
	parent := telemetry.WithParent(context.Background(), w.traceParent)
	if !telemetry.Sampled(parent) {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("arbiter.task_id", t.ID)}
	if via != "" {
		attrs = append(attrs, attribute.String("arbiter.decision.via", via)) // "" on the desk and the API
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(w.since), trace.WithAttributes(attrs...)}
	if sc := trace.SpanContextFromContext(decision); sc.IsSampled() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	_, span := telemetry.StartChild(parent, "wait for a person", opts...)
	span.End(trace.WithTimestamp(t.CompletedAt.Time()))
}

// decideOne completes t, a task that asks one review, with the reviewer's
// decision (attempt a), inside tx: the final fields, the attempt, the
// audit log's line, the labelled pair (none for a gold task, which
// completes with its gold verdict) and the task's events. It returns the
// task as it stands.
func (d *DB) decideOne(ctx context.Context, tx *Tx, insert *sql.Stmt, t *arbiter.Task, dec arbiter.HumanDecision, a arbiter.Attempt,
	now arbiter.Timestamp) (*arbiter.Task, error) {
	accountID, taskID := t.AccountID, t.ID
	// A gold task completes with its gold verdict; the reviewer's
	// answer is their attempt, and labels no calibration pair.
	gold, err := d.goldOf(ctx, tx, taskID)
	if err != nil {
		return nil, err
	}
	final := *a.Verdict
	if gold != "" {
		final = gold
	}
	// The action the decision approves, as shown or as the person edited
	// it (Attempt checked the binding already).
	approved, err := dec.BindAction(t)
	if err != nil {
		return nil, err
	}
	edit, err := editColumn(approved, dec.ReviewerID, dec.Reviewer)
	if err != nil {
		return nil, err
	}
	// A reviewer decides only a task nobody else holds: their own
	// reservation, or one that ran out and nobody took over.
	rows, err := tx.QueryContext(ctx, d.rebind(d.sqlPublishing(`UPDATE task_states SET status = ?, final_verdict = ?,
		final_tier = ?, final_confidence = ?, completed_at = ?, reserved_by = NULL, reserved_until = NULL,
		approved_digest = ?, action_edit = ?
		WHERE id = ? AND account_id = ? AND status = ? AND `+d.beforeDeadline()+`
		AND (? = '' OR reserved_by IS NULL OR reserved_by = ? OR reserved_until <= `+d.sqlNowMS()+`)
		RETURNING `+updatedColumns)),
		arbiter.StatusCompleted, final, a.Tier, *a.Confidence, int64(now), digestColumn(approved), edit,
		taskID, accountID, arbiter.StatusHumanNeeded, dec.ReviewerID, dec.ReviewerID)
	if err != nil {
		return nil, fmt.Errorf("decide task: %w", err)
	}
	updated, err := scanUpdated(rows)
	if err != nil {
		return nil, fmt.Errorf("decide task: %w", err)
	} else if len(updated) == 0 {
		return nil, d.decideRefused(ctx, tx, accountID, taskID, dec, now)
	}
	if err := insertAttempt(ctx, tx.StmtContext(ctx, insert), taskID, a); err != nil {
		return nil, err
	}
	event := arbiter.NewReviewAuditEvent(accountID, taskID, dec)
	event.Detail += editDetail(approved)
	if err := d.insertAuditEvent(ctx, tx, event); err != nil {
		return nil, err
	}
	if gold == "" {
		if err := d.insertLabelledPair(ctx, tx, t, a); err != nil {
			return nil, err
		}
	}
	receipts, err := tx.publishDecided(ctx, []decision{decisionOf(accountID, taskID, final, now, a, dec.ReviewerID)}, eventsOf(updated)...)
	if err != nil {
		return nil, err
	}
	t.Status, t.FinalVerdict, t.FinalTier, t.FinalConfidence, t.CompletedAt = arbiter.StatusCompleted, &final, &a.Tier, a.Confidence, &now
	t.Attempts = append(t.Attempts, a)
	t.ApprovedAction, t.Receipt = approved, receipts[taskID]
	if approved != nil && approved.Edited {
		t.ActionEdit = approved.Edit(dec.ReviewerID, dec.Reviewer)
	}
	return t, nil
}

// decideRefused says why a reviewer's decision changed nothing, read
// inside tx, the transaction it ran in: another decision or the expiry
// committed between the read and the update (Postgres re-checks the WHERE
// after the row lock), the deadline passed and the worker has not yet
// expired the task, or another reviewer holds it. Under read committed a
// new read sees the change, so the error can say what happened.
func (d *DB) decideRefused(ctx context.Context, tx *Tx, accountID, taskID string, dec arbiter.HumanDecision, now arbiter.Timestamp) error {
	t, err := d.findTask(ctx, tx, accountID, taskID)
	if err != nil {
		return err
	} else if _, err := dec.Attempt(t, now); err != nil {
		return err
	} else if passed, err := d.deadlinePassed(ctx, tx, taskID); err != nil {
		return err
	} else if passed {
		return arbiter.DeadlinePassedError(t)
	} else if r, err := d.findReservation(ctx, tx, accountID, taskID); err != nil {
		return err
	} else if r != nil && r.PersonID != dec.ReviewerID {
		return arbiter.ReservedByOtherError(r)
	}
	return arbiter.Errorf(arbiter.ECONFLICT, "The task was already decided by another reviewer.")
}

// answerAudit records, inside tx, a reviewer's answer a to the blind audit
// of t: the attempt, the labelled pair (flagged in the report when the
// reviewer disagrees with the agent), the audit log's line, and the end of
// the audit. The task's status and final fields stay as the agent set them.
func (d *DB) answerAudit(ctx context.Context, tx *Tx, insert *sql.Stmt, t *arbiter.Task, dec arbiter.HumanDecision, a arbiter.Attempt) error {
	// As for a decision, a reviewer answers only an audit nobody else holds.
	res, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET audit_state = ?, reserved_by = NULL, reserved_until = NULL
		WHERE id = ? AND account_id = ? AND status = ? AND audit_state = ?
		AND (? = '' OR reserved_by IS NULL OR reserved_by = ? OR reserved_until <= `+d.sqlNowMS()+`)`),
		arbiter.AuditStateDone, t.ID, t.AccountID, arbiter.StatusCompleted, arbiter.AuditStateWaiting, dec.ReviewerID, dec.ReviewerID)
	if err != nil {
		return fmt.Errorf("answer audit: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("answer audit: %w", err)
	} else if n == 0 {
		// Another reviewer answered between the read and the update.
		if t, err := d.findTask(ctx, tx, t.AccountID, t.ID); err != nil {
			return err
		} else if _, err := dec.Attempt(t, a.StartedAt); err != nil {
			return err
		} else if r, err := d.findReservation(ctx, tx, t.AccountID, t.ID); err != nil {
			return err
		} else if r != nil && r.PersonID != dec.ReviewerID {
			return arbiter.ReservedByOtherError(r)
		}
		return arbiter.Errorf(arbiter.ECONFLICT, "The audit of this task was already answered by another reviewer.")
	}
	if err := insertAttempt(ctx, tx.StmtContext(ctx, insert), t.ID, a); err != nil {
		return err
	}
	event := arbiter.NewReviewAuditEvent(t.AccountID, t.ID, dec)
	event.Detail += " (blind audit)"
	if err := d.insertAuditEvent(ctx, tx, event); err != nil {
		return err
	}
	if err := d.insertLabelledPair(ctx, tx, t, a); err != nil {
		return err
	}
	t.AuditState = arbiter.AuditStateDone
	t.Attempts = append(t.Attempts, a)
	// The audit's Slack copies show it answered; a disagreement is
	// announced.
	events := []string{arbiter.EventTaskAuditAnswered}
	if *a.Verdict != *t.FinalVerdict {
		events = append(events, arbiter.EventTaskAuditDisagreed)
	}
	if err := tx.publishTaskEvents(ctx, t.AccountID, t.ID, events...); err != nil {
		return err
	}
	return d.checkDrift(ctx, tx, t.AccountID, t.TaskType, t.ID)
}

// inReviewQueue is the SQL condition of a task in the reviewers' queue
// (arbiter.Task.InReviewQueue): waiting for a human, or for its audit.
// The partial index tasks_review_queue_escalated has this very
// condition, so the queue is walked along one index. inReviewQueueT is it
// for the alias t.
const (
	inReviewQueue  = `(status = '` + arbiter.StatusHumanNeeded + `' OR audit_state = '` + arbiter.AuditStateWaiting + `')`
	inReviewQueueT = `(t.status = '` + arbiter.StatusHumanNeeded + `' OR t.audit_state = '` + arbiter.AuditStateWaiting + `')`
)

// ListHumanQueue returns the account's tasks waiting for a human, oldest
// first, without their contexts and attempts (but with their review
// requirement and their action), and their total count.
func (d *DB) ListHumanQueue(ctx context.Context, accountID string, view arbiter.QueueView, limit int) (_ []*arbiter.Task, _ int, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if err := view.Validate(); err != nil {
		return nil, 0, err
	}
	filter, filterArgs := viewFilter(view)
	where, args := `t.account_id = ? AND `+inReviewQueueT+filter, append([]any{accountID}, filterArgs...)
	var total int
	if err := d.db.QueryRowContext(ctx, d.rebind(queueCountSQL(view)), args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count human queue: %w", err)
	}
	order := queueOrderBy(view.Order)
	rows, err := d.db.QueryContext(ctx, d.rebind(`SELECT t.id, t.account_id, t.status, t.task_type, t.source, t.touchpoint,
		t.prompt, t.allowed_verdicts, t.confidence_threshold, t.created_at, t.deadline_at, t.reserved_by, t.reserved_until, p.email, COALESCE(t.audit_state, ''),
		t.on_expiry, t.alerts, t.escalated_at, t.escalation_rung, t.review_rule, t.action, t.action_edit
		FROM tasks t LEFT JOIN people p ON p.id = t.reserved_by AND t.reserved_until > `+d.sqlNowMS()+`
		WHERE `+where+`
		ORDER BY `+order+` LIMIT ?`), append(args, limit)...)
	if err != nil {
		return nil, 0, fmt.Errorf("list human queue: %w", err)
	}
	defer rows.Close()
	tasks := []*arbiter.Task{}
	for rows.Next() {
		t := &arbiter.Task{Attempts: []arbiter.Attempt{}}
		var verdicts string
		var created int64
		var holder, holderEmail sql.NullString
		var until, deadline, escalatedAt, rung sql.NullInt64
		var onExpiry, alerts, reviewRule, action, actionEdit sql.NullString
		if err := rows.Scan(&t.ID, &t.AccountID, &t.Status, &t.TaskType, &t.Source, &t.Touchpoint,
			&t.Prompt, &verdicts, &t.ConfidenceThreshold, &created, &deadline, &holder, &until, &holderEmail, &t.AuditState,
			&onExpiry, &alerts, &escalatedAt, &rung, &reviewRule, &action, &actionEdit); err != nil {
			return nil, 0, fmt.Errorf("scan human queue: %w", err)
		}
		// The review requirement and the action in force tell which tasks
		// a person may mark to decide together (arbiter.BulkEligible).
		if reviewRule.Valid {
			review, err := arbiter.UnmarshalRequirement([]byte(reviewRule.String))
			if err != nil {
				return nil, 0, fmt.Errorf("task %s: %w", t.ID, err)
			}
			t.Review = &review
		}
		if err := readAction(t, action, actionEdit, sql.NullString{}); err != nil {
			return nil, 0, fmt.Errorf("task %s: %w", t.ID, err)
		}
		if t.OnExpiry, err = parseOnExpiry(onExpiry); err != nil {
			return nil, 0, fmt.Errorf("task %s: %w", t.ID, err)
		}
		if alerts.Valid {
			if err := json.Unmarshal([]byte(alerts.String), &t.Alerts); err != nil {
				return nil, 0, fmt.Errorf("task %s: alerts: %w", t.ID, err)
			}
			t.Escalation = arbiter.EscalationOf(t.Alerts, int(rung.Int64), arbiter.Timestamp(escalatedAt.Int64))
		}
		t.DeadlineAt = nullTimestamp(deadline)
		if holderEmail.Valid {
			t.Reservation = &arbiter.Reservation{TaskID: t.ID, PersonID: holder.String, Email: holderEmail.String, Until: arbiter.Timestamp(until.Int64)}
		}
		t.CreatedAt = arbiter.Timestamp(created)
		if err := json.Unmarshal([]byte(verdicts), &t.AllowedVerdicts); err != nil {
			return nil, 0, fmt.Errorf("task %s: allowed_verdicts: %w", t.ID, err)
		}
		tasks = append(tasks, t)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list human queue: %w", err)
	}
	return tasks, total, nil
}

// queueCountSQL counts the tasks in a view of the account's review queue,
// up to arbiter.QueueCountCap+1; its arguments are the account's id and
// the view's filter's (viewFilter). It walks the view's order's index in
// order, so that no plan reads a deep queue's rows instead, and reads the
// index alone on a vacuumed table (migration 00031).
func queueCountSQL(view arbiter.QueueView) string {
	filter, _ := viewFilter(view)
	return `SELECT count(*) FROM (SELECT 1 FROM tasks t WHERE t.account_id = ? AND ` + inReviewQueueT + filter + `
		ORDER BY ` + queueOrderBy(view.Order) + ` LIMIT ` + queueCountLimit + `) q`
}

// CountHumanQueue returns how many of the account's tasks wait for a human,
// up to arbiter.QueueCountCap+1, less those the voter has voted on.
func (d *DB) CountHumanQueue(ctx context.Context, accountID, voter string) (_ int, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var total int
	view := arbiter.QueueView{Voter: voter}
	stmt, err := d.stmt(ctx, queueCountSQL(view))
	if err != nil {
		return 0, err
	}
	_, filterArgs := viewFilter(view)
	if err := stmt.QueryRowContext(ctx, append([]any{accountID}, filterArgs...)...).Scan(&total); err != nil {
		return 0, fmt.Errorf("count human queue: %w", err)
	}
	return total, nil
}

// queuePlaceSQL finds, in one statement, the tasks of the view around a
// task (cur, when it is in the view) that the person may take (freeFor),
// its position and the view's length. With no cur, the next task is the
// view's first. The view's order is its queueKey, compared as rows so that
// each neighbour is one step of that order's index (passing over the
// tasks another reviewer holds). The position and the length come from
// one walk of the index's first arbiter.QueueCountCap+1 entries in order
// (counted), where the position is the count of those up to cur: both
// stop there, and a position past it needs no more entries than the
// length does. The walk is in the index's order, so that no plan sorts
// the view instead, and the index carries every column the walk names
// (migration 00031), so that on a vacuumed table it reads the index alone,
// not a task row an entry. queuePlaceArgs are its arguments.
func (d *DB) queuePlaceSQL(view arbiter.QueueView) string {
	filter, _ := viewFilter(view)
	key := queueKey(view.Order)
	var curKey, cur, curOrNone, desc, keyCols []string
	for i, k := range key {
		curKey = append(curKey, fmt.Sprintf("%s AS k%d", k, i))
		cur = append(cur, fmt.Sprintf("(SELECT k%d FROM cur)", i))
		none := "-1" // before every task: a key is an id, or a number from 0
		if k == "t.id" {
			none = "''"
		}
		curOrNone = append(curOrNone, fmt.Sprintf("COALESCE((SELECT k%d FROM cur), %s)", i, none))
		desc = append(desc, k+" DESC")
		keyCols = append(keyCols, fmt.Sprintf("w.k%d", i))
	}
	order := strings.Join(key, ", ")
	keyRow := "(" + order + ")"
	inView := `t.account_id = ? AND ` + inReviewQueueT + filter
	return `WITH cur AS (SELECT ` + strings.Join(curKey, ", ") + ` FROM tasks t WHERE t.id = ? AND ` + inView + `),
	counted AS (SELECT count(*) AS total,
		count(*) FILTER (WHERE (` + strings.Join(keyCols, ", ") + `) <= (` + strings.Join(cur, ", ") + `)) AS position
		FROM (SELECT ` + strings.Join(curKey, ", ") + ` FROM tasks t WHERE ` + inView + `
			ORDER BY ` + order + ` LIMIT ` + queueCountLimit + `) w)
	SELECT
		(SELECT t.id FROM tasks t WHERE ` + inView + ` AND ` + d.freeFor() + `
			AND ` + keyRow + ` < (` + strings.Join(cur, ", ") + `)
			ORDER BY ` + strings.Join(desc, ", ") + ` LIMIT 1),
		(SELECT t.id FROM tasks t WHERE ` + inView + ` AND ` + d.freeFor() + `
			AND ` + keyRow + ` > (` + strings.Join(curOrNone, ", ") + `)
			ORDER BY ` + order + ` LIMIT 1),
		counted.position, counted.total
	FROM counted`
}

// queuePlaceArgs are the arguments of queuePlaceSQL(view).
func queuePlaceArgs(accountID, taskID, personID string, view arbiter.QueueView) []any {
	_, filterArgs := viewFilter(view)
	inView := append([]any{accountID}, filterArgs...)
	var args []any
	add := func(vs ...any) { args = append(args, vs...) }
	add(taskID)
	add(inView...) // cur
	add(inView...) // counted
	add(inView...)
	add(personID) // prev
	add(inView...)
	add(personID) // next
	return args
}

// queueKey is the order of a view of the review queue (arbiter.QueueView)
// as the columns of tasks t to sort by: the escalated tasks first, then
// the oldest first; or the nearest deadline first with the tasks without
// one last (as if due at the end of time). Compared as a row, it finds a
// task's neighbours. Each order has its partial index,
// tasks_review_queue_escalated and tasks_review_queue_deadline, whose
// columns are these very expressions.
func queueKey(order string) []string {
	if order == arbiter.QueueByDeadline {
		return []string{`COALESCE(t.deadline_at, ` + noDeadline + `)`, `t.created_at`, `t.id`}
	}
	return []string{notEscalated, `t.created_at`, `t.id`}
}

// notEscalated is 0 for a task that reached a rung of its escalation, 1
// for the others: the first column of the default order, and of its index.
const notEscalated = `(CASE WHEN t.escalated_at IS NULL THEN 1 ELSE 0 END)`

// queueOrderBy is queueKey(order) as an ORDER BY list.
func queueOrderBy(order string) string {
	return strings.Join(queueKey(order), ", ")
}

// noDeadline sorts the tasks without a deadline after every other: the
// largest BIGINT, as milliseconds no deadline reaches.
const noDeadline = "9223372036854775807"

// viewFilter returns the filters of a view of the review queue as SQL
// conditions on tasks t, each starting with AND, and their arguments.
func viewFilter(view arbiter.QueueView) (string, []any) {
	var (
		where string
		args  []any
	)
	for _, l := range view.Labels() { // each label's name is its column's
		if l.Value != "" {
			where += ` AND t.` + l.Name + ` = ?`
			args = append(args, l.Value)
		}
	}
	if view.Escalated {
		// As the index has it, so that the view is a range of it.
		where += ` AND ` + notEscalated + ` = 0`
	}
	if view.Voter != "" {
		where += ` AND ` + notVotedBy
		args = append(args, view.Voter)
	}
	return where, args
}

// notVotedBy is the SQL condition that the person (the argument) has not
// voted on task t (arbiter.QueueView.Voter). It probes the votes' own
// partial index, attempts_one_vote, which holds votes alone, so a walk of
// the queue's index stays a walk of indexes.
const notVotedBy = `NOT EXISTS (SELECT 1 FROM attempts v WHERE v.task_id = t.id AND v.person_id = ?)`

// queueCountLimit is where counts of a human queue stop,
// arbiter.QueueCountCap+1.
var queueCountLimit = strconv.Itoa(arbiter.QueueCountCap + 1)

// FindQueuePlace returns where the account's task stands in its human
// queue, from ids and counts alone; its neighbours are tasks nobody but the
// person holds. The view's Voter leaves out the tasks they voted on: a task
// they voted on has no place (Position 0).
func (d *DB) FindQueuePlace(ctx context.Context, accountID, taskID, personID string, view arbiter.QueueView) (_ arbiter.QueuePlace, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var p arbiter.QueuePlace
	if err := view.Validate(); err != nil {
		return p, err
	}
	var prev, next sql.NullString
	stmt, err := d.stmt(ctx, d.queuePlaceSQL(view))
	if err != nil {
		return p, err
	}
	err = stmt.QueryRowContext(ctx, queuePlaceArgs(accountID, taskID, personID, view)...).Scan(&prev, &next, &p.Position, &p.Total)
	if err != nil {
		return p, fmt.Errorf("find queue place: %w", err)
	}
	p.Prev, p.Next = prev.String, next.String
	return p, nil
}

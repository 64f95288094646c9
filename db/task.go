package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// Ensure the store implements the service.
var _ arbiter.TaskService = (*DB)(nil)

const msPerDay = 24 * 60 * 60 * 1000

// Where a task's columns live (migration 00029, the hot/cold split). A
// task is a narrow row of task_states, its state, which every step after
// the create rewrites (status, lease, failures, run_after, deadline, final
// fields, audit and review state, and the small labels the queues filter
// on), and a row of task_bodies with the same id, its body, written once by
// the create (bodyColumns). The VIEW tasks joins them with every column, so
// reads name tasks; writes name the table they change: a create inserts
// into both (createOneSQL, insertInputTasksSQL with insertInputBodiesSQL,
// insertTaskSQL with insertBodySQL), every later change updates
// task_states alone, and a statement that locks tasks (FOR UPDATE, SKIP
// LOCKED) reads task_states, since the view's body side is an outer join.
// A new column goes to task_states unless it is large and written once,
// and the view is re-created with it in a migration.

// bodyColumns are the columns of task_bodies, besides its id.
var bodyColumns = []string{"prompt", "allowed_verdicts", "context", "display", "action"}

// taskColumns lists, in scan order, the columns scanTask reads.
const taskColumns = `t.id, t.account_id, t.status, t.task_type, t.source, t.touchpoint, t.prompt,
	t.allowed_verdicts, t.confidence_threshold, t.context, t.final_verdict, t.final_tier,
	t.final_confidence, t.created_at, t.completed_at, t.failures, t.deadline_at, t.expired_at,
	t.audit_rate, t.audit_state, t.on_expiry, t.display, t.review_rule, t.alerts, t.escalated_at, t.escalation_rung,
	t.action, t.action_edit, t.approved_digest, t.final_verifier, t.cascade_stage, t.receipt`

// attemptColumns lists, in scan order, the columns scanAttempt reads.
const attemptColumns = `a.tier, a.verdict, a.confidence, a.rationale, a.model, a.reviewer,
	a.error, a.started_at, a.finished_at, a.audit, a.person_id, a.version, a.action_digest,
	a.verifier, a.passed_on, a.input_tokens, a.output_tokens, a.cost`

// CreateTask stores a new pending task, counting it against the account's
// daily cap in the same step. Returns ERATELIMIT when the cap is used up.
// It is CreateTasks for one create.
func (d *DB) CreateTask(ctx context.Context, accountID string, in arbiter.TaskCreate) (*arbiter.Task, error) {
	created, err := d.CreateTasks(ctx, accountID, []arbiter.TaskCreate{in})
	if err != nil {
		return nil, err
	}
	return created[0].Task, created[0].Err
}

// CreateTasks stores the creates and answers each in order (see
// arbiter.TaskService). One create on Postgres shares a statement with
// concurrent ones (db/internal/group); several are one transaction (task_batch.go),
// as is every call on SQLite.
func (d *DB) CreateTasks(ctx context.Context, accountID string, in []arbiter.TaskCreate) (_ []arbiter.TaskCreated, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	// The tasks keep the trace context of the request that creates them,
	// whose children their agent decisions and deliveries become.
	traceParent := telemetry.TraceParent(ctx)
	ctx, endSpan := d.traced(ctx, "db CreateTasks")
	defer endSpan(&err)
	if len(in) == 0 {
		return nil, nil
	}
	creates := make([]newCreate, len(in))
	now := d.nowMS()
	var refused []error // by create, when a policy refused one
	for i := range in {
		policy, err := d.policyFor(ctx, accountID, in[i])
		if err != nil {
			return nil, err
		}
		applied, err := policy.Apply(in[i])
		if err == nil {
			// The create's own rungs; its policy's were checked when it was put.
			err = d.checkRungsTellMembers(ctx, d.db, accountID, in[i].Alerts.Escalation)
		}
		if err != nil && len(in) == 1 {
			return nil, err
		} else if err != nil {
			if refused == nil {
				refused = make([]error, len(in))
			}
			refused[i] = err
			continue
		}
		if creates[i], err = d.newCreate(accountID, applied, now); err != nil {
			return nil, err
		}
		// The key matches the request, not what its policy made of it.
		creates[i].fingerprint = fingerprintOf(in[i])
		creates[i].traceParent = traceParent
	}
	if refused != nil {
		return d.createAllBut(ctx, accountID, in, refused)
	}
	// A create asking for reviews, reminders, escalation, gold or an
	// action goes the batch's way, whose transaction stores them with the
	// task (storeReviews, storeAlerts, storeGold, storeActions).
	if !d.takesArrays() || len(creates) > 1 || creates[0].task.Review != nil || !creates[0].task.Alerts.IsZero() ||
		creates[0].gold != "" || creates[0].action != "" {
		out, err := d.createBatch(ctx, accountID, creates)
		if err != nil {
			return nil, accountDeleted(err)
		}
		return out, nil
	}
	var out stored
	var createErr error
	if d.grouping() {
		out, createErr = d.creates.Do(ctx, creates[0])
	} else {
		out, createErr = d.createOne(ctx, creates[0])
	}
	if createErr != nil && !refusesOneCreate(createErr) {
		return nil, accountDeleted(createErr)
	}
	if createErr == nil && !out.replayed {
		// One statement, its own commit: no transaction to announce it.
		d.announceCreated()
	}
	return []arbiter.TaskCreated{{Task: out.task, Replayed: out.replayed, Err: createErr}}, nil
}

// createAllBut answers the creates of in that a policy refused with their
// errors, and stores the others.
func (d *DB) createAllBut(ctx context.Context, accountID string, in []arbiter.TaskCreate, refused []error) ([]arbiter.TaskCreated, error) {
	var rest []arbiter.TaskCreate
	for i, err := range refused {
		if err == nil {
			rest = append(rest, in[i])
		}
	}
	out := make([]arbiter.TaskCreated, len(in))
	var created []arbiter.TaskCreated
	if len(rest) > 0 {
		var err error
		if created, err = d.CreateTasks(ctx, accountID, rest); err != nil {
			return nil, err
		}
	}
	for i, err := range refused {
		if err != nil {
			out[i].Err = err
		} else {
			out[i], created = created[0], created[1:]
		}
	}
	return out, nil
}

// fingerprintOf is the fingerprint of a create with an idempotency key,
// "" without one.
func fingerprintOf(in arbiter.TaskCreate) string {
	if in.IdempotencyKey == "" {
		return ""
	}
	return in.Fingerprint()
}

// newCreate is a create on its way to the store: the pending task, its
// allowed verdicts as JSON, and its idempotency key with the request's
// fingerprint and the key's expiry (all zero without a key).
type newCreate struct {
	task        *arbiter.Task
	verdicts    string
	key         string
	fingerprint string
	expiresAt   arbiter.Timestamp
	// callbackURL is where the task's events also go; "" for none.
	callbackURL string
	// onExpiry is the stored on-expiry outcome (onExpiryColumn); "" for
	// expire.
	onExpiry string
	// notify is the create's notify targets, comma-separated; "" for none.
	notify string
	// display is the task's display hint as JSON; "" for none.
	display string
	// gold is the create's gold verdict (gold.go); "" for none.
	gold string
	// action is the task's proposed action as stored (storedAction's
	// JSON); "" for none.
	action string
	// traceParent is the W3C trace context of the create's request; ""
	// when tracing is off.
	traceParent string
}

// stored is the outcome of a create that was not refused: its task, new or
// (replayed) made earlier with the same idempotency key.
type stored struct {
	task     *arbiter.Task
	replayed bool
}

// refusesOneCreate reports whether err refuses one create rather than
// failing the call: the cap, or an idempotency key's earlier use.
func refusesOneCreate(err error) bool {
	switch arbiter.ErrorCode(err) {
	case arbiter.ERATELIMIT, arbiter.EMISMATCH, arbiter.ECONFLICT:
		return true
	}
	return false
}

// newCreate returns the create of the pending task that in describes,
// created at now.
func (d *DB) newCreate(accountID string, in arbiter.TaskCreate, now arbiter.Timestamp) (newCreate, error) {
	verdicts, err := json.Marshal(in.AllowedVerdicts)
	if err != nil {
		return newCreate{}, err
	}
	c := newCreate{
		task: &arbiter.Task{
			ID:                  arbiter.NewTaskID(),
			AccountID:           accountID,
			Status:              arbiter.StatusPending,
			TaskType:            in.TaskType,
			Source:              in.Source,
			Touchpoint:          in.Touchpoint,
			Prompt:              in.Prompt,
			AllowedVerdicts:     in.AllowedVerdicts,
			ConfidenceThreshold: in.ConfidenceThreshold,
			Context:             in.Context,
			CreatedAt:           now,
			Attempts:            []arbiter.Attempt{},
			AuditRate:           in.AuditRate,
			Review:              in.Review,
			Alerts:              in.Alerts,
		},
		verdicts:    string(verdicts),
		callbackURL: in.CallbackURL,
		notify:      strings.Join(in.Notify, ","),
		gold:        in.GoldVerdict,
	}
	c.task.OnExpiry = in.OnExpiry
	if o, ok := onExpiryColumn(in.OnExpiry).(string); ok {
		c.onExpiry = o
	}
	if in.Display != nil {
		display, err := json.Marshal(in.Display)
		if err != nil {
			return newCreate{}, err
		}
		c.task.Display, c.display = in.Display, string(display)
	}
	if in.Action != nil {
		action, err := json.Marshal(storedAction{TaskAction: in.Action, EditVerdicts: in.EditVerdicts})
		if err != nil {
			return newCreate{}, err
		}
		c.task.Action, c.task.EditVerdicts, c.action = in.Action, in.EditVerdicts, string(action)
	}
	if in.DeadlineSeconds > 0 {
		deadline := now + arbiter.Timestamp(in.DeadlineSeconds)*1000
		c.task.DeadlineAt = &deadline
	}
	if in.IdempotencyKey != "" {
		c.key, c.fingerprint = in.IdempotencyKey, in.Fingerprint()
		c.expiresAt = now + arbiter.Timestamp(d.idempotencyTTL.Milliseconds())
	}
	return c, nil
}

// createOneSQL counts a create against the daily cap, inserts its task and
// stores its idempotency key, one statement on Postgres: each step feeds
// the next, so a used-up cap, or a key the account used before, stores
// nothing. A key that a concurrent create stores first fails the statement
// on the key's primary key (after that create commits), which undoes it
// all. Arguments: account, day, account, default cap, account, key,
// account, default cap; the task's state columns (on_expiry and notify
// last); its body's (prompt, allowed verdicts, context, display); account,
// key, fingerprint, created at, expires at, key. It returns the task's id
// when it stored it.
const createOneSQL = `WITH counted AS (
		INSERT INTO daily_usage (account_id, day, count)
		SELECT ?, ?, 1 WHERE COALESCE((SELECT daily_cap FROM accounts WHERE id = ?), ?) > 0
			AND NOT EXISTS (SELECT 1 FROM idempotency_keys WHERE account_id = ? AND idempotency_key = ?)
		ON CONFLICT (account_id, day) DO UPDATE SET count = daily_usage.count + 1
		WHERE daily_usage.count < COALESCE((SELECT daily_cap FROM accounts WHERE id = ?), ?)
		RETURNING count
	), created AS (
		INSERT INTO task_states (id, account_id, status, task_type, source, touchpoint,
			confidence_threshold, created_at, run_after, deadline_at, callback_url, audit_rate, on_expiry, notify, traceparent)
		SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?::bigint, ?::text, ?::float8, ?::text, ?::text, ?::text FROM counted
		RETURNING id
	), body AS (
		INSERT INTO task_bodies (id, prompt, allowed_verdicts, context, display)
		SELECT id, ?::text, ?::text, ?::text, ?::text FROM created
	), keyed AS (
		INSERT INTO idempotency_keys (account_id, idempotency_key, fingerprint, task_id, created_at, expires_at)
		SELECT ?, ?, ?, id, ?, ? FROM created WHERE ?::text <> ''
	)
	SELECT id FROM created`

// createOne stores one create on Postgres, on its own: one statement.
func (d *DB) createOne(ctx context.Context, c newCreate) (stored, error) {
	t := c.task
	day := int64(t.CreatedAt) / msPerDay
	stmt, err := d.stmt(ctx, createOneSQL)
	if err != nil {
		return stored{}, err
	}
	var id string
	err = stmt.QueryRowContext(ctx,
		t.AccountID, day, t.AccountID, d.cap, t.AccountID, c.key, t.AccountID, d.cap,
		t.ID, t.AccountID, t.Status, t.TaskType, t.Source, t.Touchpoint,
		t.ConfidenceThreshold, int64(t.CreatedAt), int64(t.CreatedAt), nullTime(t.DeadlineAt),
		nullText(c.callbackURL), t.AuditRate, nullText(c.onExpiry), c.notify, nullText(c.traceParent),
		t.Prompt, c.verdicts, nullJSON(t.Context), nullText(c.display),
		t.AccountID, c.key, c.fingerprint, int64(t.CreatedAt), int64(c.expiresAt), c.key,
	).Scan(&id)
	switch {
	case err == nil:
		return stored{task: t}, nil
	case keyTaken(err):
		// A concurrent create stored the key first; it has committed.
		return d.replay(ctx, nil, c, errKeyInFlight)
	case !errors.Is(err, sql.ErrNoRows):
		return stored{}, fmt.Errorf("insert task: %w", err)
	case c.key != "":
		// Nothing stored: the key was used before, or the cap is used up.
		return d.replay(ctx, nil, c, capUsedUp(t.CreatedAt))
	}
	return stored{}, capUsedUp(t.CreatedAt)
}

// capUsedUp is the ERATELIMIT error for a create at now, retryable at the
// next UTC midnight.
func capUsedUp(now arbiter.Timestamp) error {
	midnight := time.UnixMilli((int64(now)/msPerDay + 1) * msPerDay)
	return &arbiter.Error{
		Code:       arbiter.ERATELIMIT,
		Reason:     arbiter.ReasonDailyCap,
		Message:    "The account's daily task cap is used up; it resets at 00:00 UTC. Ask the operator to raise it.",
		RetryAfter: midnight.Sub(now.Time()),
	}
}

// FindTaskByID returns the account's task with its attempts. Returns
// ENOTFOUND for an unknown or malformed id and for another account's task.
// On Postgres, concurrent reads are answered in groups (db/internal/group).
func (d *DB) FindTaskByID(ctx context.Context, accountID, id string) (_ *arbiter.Task, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	ctx, endSpan := d.traced(ctx, "db FindTaskByID")
	defer endSpan(&err)
	if !arbiter.ValidTaskID(id) {
		return nil, errTaskNotFound
	}
	if d.grouping() {
		return d.reads.Do(ctx, taskRef{accountID, id})
	}
	return d.findTask(ctx, nil, accountID, id)
}

// grouping reports whether concurrent creates and reads share statements.
func (d *DB) grouping() bool { return d.takesArrays() && !d.ungrouped }

// tasksWithAttemptsSQL selects the rows scanTasksWithAttempts reads: one
// per attempt, or one with NULL attempt columns for a task without any.
// Callers add the WHERE and ORDER BY clauses.
const tasksWithAttemptsSQL = `SELECT ` + taskColumns + `, ` + attemptColumns + `
	FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id`

// findTaskSQL reads a task and its attempts, one row per attempt.
const findTaskSQL = tasksWithAttemptsSQL + `
	WHERE t.id = ? AND t.account_id = ? ORDER BY a.id`

// FindTaskStatement is the statement a read of one task runs (the get's,
// when no other read shares its group), in the store's placeholders: on
// Postgres $1 is the task's id and $2 its account. The bench runs it
// through pgbench, the raw read a get is measured against.
func (d *DB) FindTaskStatement() string { return d.rebind(findTaskSQL) }

// findTask reads the account's task and its attempts, inside tx when it is
// not nil (unprepared there, as it is off the hot path).
func (d *DB) findTask(ctx context.Context, tx *Tx, accountID, id string) (*arbiter.Task, error) {
	if !arbiter.ValidTaskID(id) {
		return nil, errTaskNotFound
	}
	var rows *sql.Rows
	var err error
	if tx != nil {
		rows, err = tx.QueryContext(ctx, d.rebind(findTaskSQL), id, accountID)
	} else {
		var stmt *sql.Stmt
		if stmt, err = d.stmt(ctx, findTaskSQL); err != nil {
			return nil, err
		}
		rows, err = stmt.QueryContext(ctx, id, accountID)
	}
	if err != nil {
		return nil, fmt.Errorf("find task: %w", err)
	}
	tasks, err := scanTasksWithAttempts(rows)
	if err != nil {
		return nil, fmt.Errorf("find task: %w", err)
	} else if len(tasks) == 0 {
		return nil, errTaskNotFound
	}
	return tasks[0], nil
}

// scanTasksWithAttempts reads rows of taskColumns and attemptColumns, one
// per attempt (or one with NULL attempt columns for a task without any),
// grouped by task in the rows' order, and closes them.
func scanTasksWithAttempts(rows *sql.Rows) ([]*arbiter.Task, error) {
	defer rows.Close()
	var tasks []*arbiter.Task
	// One row's values and their destinations serve every row: each scan
	// sets every column, and the task and attempt made of a row copy what
	// they keep.
	var tr taskRow
	var ar attemptRow
	dest := append(tr.dest(), ar.dest()...)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("scan task: %w", err)
		}
		if len(tasks) == 0 || tasks[len(tasks)-1].ID != tr.id {
			t, err := tr.task()
			if err != nil {
				return nil, err
			}
			tasks = append(tasks, t)
		}
		if ar.tier.Valid {
			t := tasks[len(tasks)-1]
			t.Attempts = append(t.Attempts, ar.attempt())
		}
	}
	return tasks, rows.Err()
}

var errTaskNotFound = arbiter.Errorf(arbiter.ENOTFOUND, "Task not found.")

// taskRow holds a scanned row of taskColumns.
type taskRow struct {
	id, accountID, status, taskType, source, touchpoint, prompt, verdicts string
	threshold                                                             float64
	context, finalVerdict, finalTier                                      sql.NullString
	finalConfidence                                                       sql.NullFloat64
	createdAt                                                             int64
	completedAt                                                           sql.NullInt64
	failures                                                              int
	deadlineAt, expiredAt                                                 sql.NullInt64
	auditRate                                                             sql.NullFloat64
	auditState, display                                                   sql.NullString
	onExpiry                                                              sql.NullString
	reviewRule                                                            sql.NullString
	alerts                                                                sql.NullString
	escalatedAt, escalationRung                                           sql.NullInt64
	action, actionEdit, approvedDigest, receipt                           sql.NullString
	finalVerifier                                                         sql.NullString
	cascadeStage                                                          int
}

func (r *taskRow) dest() []any {
	return []any{&r.id, &r.accountID, &r.status, &r.taskType, &r.source, &r.touchpoint, &r.prompt,
		&r.verdicts, &r.threshold, &r.context, &r.finalVerdict, &r.finalTier,
		&r.finalConfidence, &r.createdAt, &r.completedAt, &r.failures, &r.deadlineAt, &r.expiredAt,
		&r.auditRate, &r.auditState, &r.onExpiry, &r.display, &r.reviewRule, &r.alerts, &r.escalatedAt, &r.escalationRung,
		&r.action, &r.actionEdit, &r.approvedDigest, &r.finalVerifier, &r.cascadeStage, &r.receipt}
}

func (r *taskRow) task() (*arbiter.Task, error) {
	t := &arbiter.Task{
		ID:                  r.id,
		AccountID:           r.accountID,
		Status:              r.status,
		TaskType:            r.taskType,
		Source:              r.source,
		Touchpoint:          r.touchpoint,
		Prompt:              r.prompt,
		ConfidenceThreshold: r.threshold,
		FinalVerdict:        nullString(r.finalVerdict),
		FinalTier:           nullString(r.finalTier),
		FinalConfidence:     nullFloat(r.finalConfidence),
		FinalVerifier:       nullString(r.finalVerifier),
		CreatedAt:           arbiter.Timestamp(r.createdAt),
		CompletedAt:         nullTimestamp(r.completedAt),
		DeadlineAt:          nullTimestamp(r.deadlineAt),
		ExpiredAt:           nullTimestamp(r.expiredAt),
		Attempts:            []arbiter.Attempt{},
		Failures:            r.failures,
		CascadeStage:        r.cascadeStage,
		AuditRate:           nullFloat(r.auditRate),
		AuditState:          r.auditState.String,
		Receipt:             r.receipt.String,
	}
	if r.context.Valid {
		t.Context = json.RawMessage(r.context.String)
	}
	if r.display.Valid {
		t.Display = new(arbiter.Display)
		if err := json.Unmarshal([]byte(r.display.String), t.Display); err != nil {
			return nil, fmt.Errorf("task %s: display: %w", r.id, err)
		}
	}
	verdicts, err := decodeVerdicts(r.verdicts)
	if err != nil {
		return nil, fmt.Errorf("task %s: allowed_verdicts: %w", r.id, err)
	}
	t.AllowedVerdicts = verdicts
	o, err := parseOnExpiry(r.onExpiry)
	if err != nil {
		return nil, fmt.Errorf("task %s: %w", r.id, err)
	}
	t.OnExpiry = o
	if r.reviewRule.Valid {
		review, err := arbiter.UnmarshalRequirement([]byte(r.reviewRule.String))
		if err != nil {
			return nil, fmt.Errorf("task %s: %w", r.id, err)
		}
		t.Review = &review
	}
	if r.alerts.Valid {
		if err := json.Unmarshal([]byte(r.alerts.String), &t.Alerts); err != nil {
			return nil, fmt.Errorf("task %s: alerts: %w", r.id, err)
		}
		t.Escalation = arbiter.EscalationOf(t.Alerts, int(r.escalationRung.Int64), arbiter.Timestamp(r.escalatedAt.Int64))
	}
	if err := readAction(t, r.action, r.actionEdit, r.approvedDigest); err != nil {
		return nil, fmt.Errorf("task %s: %w", r.id, err)
	}
	return t, nil
}

// decodeVerdicts reads a stored allowed_verdicts, the JSON list of
// strings the create stored, as json.Unmarshal reads it. The list as
// json.Marshal writes verdicts of plain ASCII, ["a","b"], is split where
// it stands (its strings share its text); any other text, escapes and
// spaces included, goes to json.Unmarshal. Every read of a task decodes
// one, and json.Unmarshal was a tenth of a get's scan.
func decodeVerdicts(text string) ([]string, error) {
	if len(text) < 2 || text[0] != '[' || text[len(text)-1] != ']' {
		return unmarshalVerdicts(text)
	}
	inner := text[1 : len(text)-1]
	verdicts := make([]string, 0, strings.Count(inner, ",")+1)
	for inner != "" {
		if inner[0] != '"' {
			return unmarshalVerdicts(text)
		}
		end := strings.IndexByte(inner[1:], '"') + 1 // the closing quote
		if end < 1 {
			return unmarshalVerdicts(text)
		}
		v := inner[1:end]
		for i := 0; i < len(v); i++ {
			if c := v[i]; c < 0x20 || c > 0x7e || c == '\\' {
				return unmarshalVerdicts(text)
			}
		}
		verdicts = append(verdicts, v)
		switch rest := inner[end+1:]; {
		case rest == "":
			inner = ""
		case len(rest) > 1 && rest[0] == ',':
			inner = rest[1:]
		default:
			return unmarshalVerdicts(text)
		}
	}
	return verdicts, nil
}

func unmarshalVerdicts(text string) ([]string, error) {
	var verdicts []string
	err := json.Unmarshal([]byte(text), &verdicts)
	return verdicts, err
}

// attemptRow holds a scanned row of attemptColumns; every column may be
// NULL because attempts are LEFT JOINed.
type attemptRow struct {
	tier, verdict                    sql.NullString
	confidence                       sql.NullFloat64
	rationale, model, reviewer, errs sql.NullString
	startedAt, finishedAt            sql.NullInt64
	audit                            sql.NullBool
	personID, version, actionDigest  sql.NullString
	verifier                         sql.NullString
	passedOn                         sql.NullBool
	inputTokens, outputTokens        sql.NullInt64
	cost                             sql.NullFloat64
}

func (r *attemptRow) dest() []any {
	return []any{&r.tier, &r.verdict, &r.confidence, &r.rationale, &r.model, &r.reviewer,
		&r.errs, &r.startedAt, &r.finishedAt, &r.audit, &r.personID, &r.version, &r.actionDigest,
		&r.verifier, &r.passedOn, &r.inputTokens, &r.outputTokens, &r.cost}
}

func (r *attemptRow) attempt() arbiter.Attempt {
	return arbiter.Attempt{
		Tier:         r.tier.String,
		Verdict:      nullString(r.verdict),
		Confidence:   nullFloat(r.confidence),
		Rationale:    r.rationale.String,
		Model:        nullString(r.model),
		Reviewer:     nullString(r.reviewer),
		Error:        nullString(r.errs),
		StartedAt:    arbiter.Timestamp(r.startedAt.Int64),
		FinishedAt:   nullTimestamp(r.finishedAt),
		Audit:        r.audit.Bool,
		PersonID:     r.personID.String,
		Version:      nullString(r.version),
		ActionDigest: nullString(r.actionDigest),
		Verifier:     nullString(r.verifier),
		PassedOn:     r.passedOn.Bool,
		InputTokens:  nullInt(r.inputTokens),
		OutputTokens: nullInt(r.outputTokens),
		Cost:         nullFloat(r.cost),
	}
}

func nullInt(n sql.NullInt64) *int {
	if !n.Valid {
		return nil
	}
	i := int(n.Int64)
	return &i
}

func nullString(s sql.NullString) *string {
	if !s.Valid {
		return nil
	}
	return &s.String
}

func nullFloat(f sql.NullFloat64) *float64 {
	if !f.Valid {
		return nil
	}
	return &f.Float64
}

func nullTimestamp(n sql.NullInt64) *arbiter.Timestamp {
	if !n.Valid {
		return nil
	}
	ts := arbiter.Timestamp(n.Int64)
	return &ts
}

// nullJSON stores an absent context as SQL NULL.
func nullJSON(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	return string(raw)
}

// nullText stores an empty string as SQL NULL.
func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullTime stores an absent time as SQL NULL.
func nullTime(ts *arbiter.Timestamp) any {
	if ts == nil {
		return nil
	}
	return int64(*ts)
}

package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

// Ensure the store implements the service.
var _ arbiter.TaskService = (*DB)(nil)

const msPerDay = 24 * 60 * 60 * 1000

// taskColumns lists, in scan order, the columns scanTask reads.
const taskColumns = `t.id, t.account_id, t.status, t.task_type, t.source, t.touchpoint, t.prompt,
	t.allowed_verdicts, t.confidence_threshold, t.context, t.final_verdict, t.final_tier,
	t.final_confidence, t.created_at, t.completed_at, t.failures`

// attemptColumns lists, in scan order, the columns scanAttempt reads.
const attemptColumns = `a.tier, a.verdict, a.confidence, a.rationale, a.model, a.reviewer,
	a.error, a.started_at, a.finished_at`

// CreateTask stores a new pending task, counting it against the account's
// daily cap in the same step. Returns ERATELIMIT when the cap is used up.
// On Postgres, concurrent creates are stored in groups (group.go).
func (d *DB) CreateTask(ctx context.Context, accountID string, in arbiter.TaskCreate) (*arbiter.Task, error) {
	t, verdicts, err := d.newTask(accountID, in)
	if err != nil {
		return nil, err
	}
	if d.grouping() {
		_, err = d.creates.do(ctx, newCreate{t, verdicts})
	} else {
		err = d.createOne(ctx, t, verdicts)
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// newTask returns the pending task that in describes, created now, and its
// allowed verdicts as JSON.
func (d *DB) newTask(accountID string, in arbiter.TaskCreate) (*arbiter.Task, string, error) {
	verdicts, err := json.Marshal(in.AllowedVerdicts)
	if err != nil {
		return nil, "", err
	}
	return &arbiter.Task{
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
		CreatedAt:           d.nowMS(),
		Attempts:            []arbiter.Attempt{},
	}, string(verdicts), nil
}

// createOne stores t on its own, counting it against the daily cap in the
// same step.
func (d *DB) createOne(ctx context.Context, t *arbiter.Task, verdicts string) error {
	day := int64(t.CreatedAt) / msPerDay
	taskArgs := []any{t.ID, t.AccountID, t.Status, t.TaskType, t.Source, t.Touchpoint, t.Prompt,
		verdicts, t.ConfidenceThreshold, nullJSON(t.Context), int64(t.CreatedAt), int64(t.CreatedAt)}

	if d.dialect == Postgres {
		// One statement, one round trip: the count's upsert feeds the
		// insert, so a used-up cap inserts nothing.
		stmt, err := d.stmt(ctx, `WITH counted AS (`+countTaskSQL+`)
			INSERT INTO tasks (id, account_id, status, task_type, source, touchpoint, prompt,
				allowed_verdicts, confidence_threshold, context, created_at, run_after)
			SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM counted`)
		if err != nil {
			return err
		}
		args := append([]any{t.AccountID, day, t.AccountID, d.cap, t.AccountID, d.cap}, taskArgs...)
		res, err := stmt.ExecContext(ctx, args...)
		if err != nil {
			return fmt.Errorf("insert task: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return capUsedUp(t.CreatedAt)
		}
		return nil
	}

	count, err := d.stmt(ctx, countTaskSQL)
	if err != nil {
		return err
	}
	insert, err := d.stmt(ctx, `INSERT INTO tasks (id, account_id, status, task_type,
		source, touchpoint, prompt, allowed_verdicts, confidence_threshold, context, created_at, run_after)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	return d.transact(ctx, func(tx *sqlx.Tx) error {
		var n int
		err := tx.StmtContext(ctx, count).QueryRowContext(ctx, t.AccountID, day, t.AccountID, d.cap, t.AccountID, d.cap).Scan(&n)
		if errors.Is(err, sql.ErrNoRows) {
			return capUsedUp(t.CreatedAt)
		} else if err != nil {
			return fmt.Errorf("count task: %w", err)
		}
		if _, err := tx.StmtContext(ctx, insert).ExecContext(ctx, taskArgs...); err != nil {
			return fmt.Errorf("insert task: %w", err)
		}
		return nil
	})
}

// countTaskSQL adds one to the account's usage for a UTC day unless that
// would pass the account's cap, returning the new count; it returns no row
// when the cap is used up. The upsert's WHERE clause makes the check and the
// increment one atomic step. Arguments: account, day, account, default cap,
// account, default cap.
const countTaskSQL = `INSERT INTO daily_usage (account_id, day, count)
	SELECT ?, ?, 1 WHERE COALESCE((SELECT daily_cap FROM accounts WHERE id = ?), ?) > 0
	ON CONFLICT (account_id, day) DO UPDATE SET count = daily_usage.count + 1
	WHERE daily_usage.count < COALESCE((SELECT daily_cap FROM accounts WHERE id = ?), ?)
	RETURNING count`

// capUsedUp is the ERATELIMIT error for a create at now, retryable at the
// next UTC midnight.
func capUsedUp(now arbiter.Timestamp) error {
	midnight := time.UnixMilli((int64(now)/msPerDay + 1) * msPerDay)
	return &arbiter.Error{
		Code:       arbiter.ERATELIMIT,
		Message:    "The account's daily task cap is used up; it resets at 00:00 UTC. Ask the operator to raise it.",
		RetryAfter: midnight.Sub(now.Time()),
	}
}

// FindTaskByID returns the account's task with its attempts. Returns
// ENOTFOUND for an unknown or malformed id and for another account's task.
// On Postgres, concurrent reads are answered in groups (group.go).
func (d *DB) FindTaskByID(ctx context.Context, accountID, id string) (*arbiter.Task, error) {
	if !arbiter.ValidTaskID(id) {
		return nil, errTaskNotFound
	}
	if d.grouping() {
		return d.reads.do(ctx, taskRef{accountID, id})
	}
	return d.findTask(ctx, nil, accountID, id)
}

// grouping reports whether concurrent creates and reads share statements.
func (d *DB) grouping() bool { return d.dialect == Postgres && !d.ungrouped }

// tasksWithAttemptsSQL selects the rows scanTasksWithAttempts reads: one
// per attempt, or one with NULL attempt columns for a task without any.
// Callers add the WHERE and ORDER BY clauses.
const tasksWithAttemptsSQL = `SELECT ` + taskColumns + `, ` + attemptColumns + `
	FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id`

// findTaskSQL reads a task and its attempts, one row per attempt.
const findTaskSQL = tasksWithAttemptsSQL + `
	WHERE t.id = ? AND t.account_id = ? ORDER BY a.id`

// findTask reads the account's task and its attempts, inside tx when it is
// not nil (unprepared there, as it is off the hot path).
func (d *DB) findTask(ctx context.Context, tx *sqlx.Tx, accountID, id string) (*arbiter.Task, error) {
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
	for rows.Next() {
		var tr taskRow
		var ar attemptRow
		if err := rows.Scan(append(tr.dest(), ar.dest()...)...); err != nil {
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
}

func (r *taskRow) dest() []any {
	return []any{&r.id, &r.accountID, &r.status, &r.taskType, &r.source, &r.touchpoint, &r.prompt,
		&r.verdicts, &r.threshold, &r.context, &r.finalVerdict, &r.finalTier,
		&r.finalConfidence, &r.createdAt, &r.completedAt, &r.failures}
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
		CreatedAt:           arbiter.Timestamp(r.createdAt),
		CompletedAt:         nullTimestamp(r.completedAt),
		Attempts:            []arbiter.Attempt{},
		Failures:            r.failures,
	}
	if r.context.Valid {
		t.Context = json.RawMessage(r.context.String)
	}
	if err := json.Unmarshal([]byte(r.verdicts), &t.AllowedVerdicts); err != nil {
		return nil, fmt.Errorf("task %s: allowed_verdicts: %w", r.id, err)
	}
	return t, nil
}

// attemptRow holds a scanned row of attemptColumns; every column may be
// NULL because attempts are LEFT JOINed.
type attemptRow struct {
	tier, verdict                    sql.NullString
	confidence                       sql.NullFloat64
	rationale, model, reviewer, errs sql.NullString
	startedAt, finishedAt            sql.NullInt64
}

func (r *attemptRow) dest() []any {
	return []any{&r.tier, &r.verdict, &r.confidence, &r.rationale, &r.model, &r.reviewer,
		&r.errs, &r.startedAt, &r.finishedAt}
}

func (r *attemptRow) attempt() arbiter.Attempt {
	return arbiter.Attempt{
		Tier:       r.tier.String,
		Verdict:    nullString(r.verdict),
		Confidence: nullFloat(r.confidence),
		Rationale:  r.rationale.String,
		Model:      nullString(r.model),
		Reviewer:   nullString(r.reviewer),
		Error:      nullString(r.errs),
		StartedAt:  arbiter.Timestamp(r.startedAt.Int64),
		FinishedAt: nullTimestamp(r.finishedAt),
	}
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

package db

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

// dueOutcomesSQL selects up to ? tasks that are not final, have an
// on-expiry outcome, and whose deadline has passed by the database's
// clock, oldest deadline first. The partial index tasks_deadline_outcome
// holds exactly these tasks in deadline order, so the statement reads what
// it returns, not the table. On Postgres it locks them, skipping those
// another sweep (or a decision) holds.
func (d *DB) dueOutcomesSQL() string {
	return d.rebind(`SELECT id FROM task_states
		WHERE deadline_at IS NOT NULL AND on_expiry IS NOT NULL AND status IN ` + notFinal + `
		AND deadline_at <= ` + d.sqlNowMS() + `
		ORDER BY deadline_at LIMIT ? ` + d.sqlSkipLocked())
}

// decideDueTasks applies the on-expiry outcome (arbiter.DeadlineStep) of up
// to max tasks whose deadline has passed, in one transaction: each is
// completed with a fallback attempt, or expires. It returns the ids of the
// tasks it left final. Each task changes once however many workers sweep:
// Postgres locks the rows it decides (SKIP LOCKED), SQLite's transaction
// holds the write lock, and every update requires the task not final, so a
// decision that committed first (a person's, an agent's) stands and the
// sweep leaves the task alone.
func (d *DB) decideDueTasks(ctx context.Context, max int) (final []string, err error) {
	for max > 0 {
		n := min(max, outcomeChunk)
		decided, found, err := d.decideDueChunk(ctx, n)
		final = append(final, decided...)
		if err != nil {
			return final, err
		} else if found < n {
			break
		}
		max -= n
	}
	return final, nil
}

// outcomeChunk bounds the tasks one transaction of decideDueTasks decides:
// each costs a read and two statements, so a sweep's batch of 500 would
// hold its locks (and, on SQLite, the write lock) long enough to run into
// the store's statement limit on a loaded machine.
const outcomeChunk = 100

// decideDueChunk is one transaction of decideDueTasks: it decides up to
// max due tasks and also returns how many it found due.
func (d *DB) decideDueChunk(ctx context.Context, max int) (final []string, found int, err error) {
	insert, err := d.stmt(ctx, insertAttemptSQL)
	if err != nil {
		return nil, 0, err
	}
	err = d.transact(ctx, func(tx *Tx) error {
		final, found = nil, 0
		var ids []string
		if err := tx.SelectContext(ctx, &ids, d.dueOutcomesSQL(), max); err != nil {
			return fmt.Errorf("find due outcomes: %w", err)
		} else if len(ids) == 0 {
			return nil
		}
		found = len(ids)
		rows, err := d.queryIn(ctx, tx, tasksWithAttemptsSQL+` WHERE t.id IN (?) ORDER BY t.id, a.id`, ids)
		if err != nil {
			return fmt.Errorf("read due outcomes: %w", err)
		}
		tasks, err := scanTasksWithAttempts(rows)
		if err != nil {
			return fmt.Errorf("read due outcomes: %w", err)
		}
		now := d.nowMS()
		var expire []string
		var updated []updatedTask
		var decided []decision
		for _, t := range tasks {
			step := arbiter.DeadlineStep(t, t.OnExpiry, now)
			if step.Expire {
				expire = append(expire, t.ID)
				continue
			}
			u, err := d.completeByFallback(ctx, tx, t.ID, step.Attempt, now)
			if err != nil {
				return err
			} else if u == nil {
				continue // decided meanwhile: the row was not locked (SQLite never locks it)
			}
			if err := insertAttempt(ctx, tx.StmtContext(ctx, insert), t.ID, step.Attempt); err != nil {
				return err
			}
			decided = append(decided, decisionOf(u.accountID, t.ID, *step.Attempt.Verdict, now, step.Attempt, ""))
			updated = append(updated, *u)
		}
		if len(expire) > 0 {
			rows, err := d.queryIn(ctx, tx, d.sqlPublishing(`UPDATE task_states SET status = 'expired', expired_at = `+d.sqlNowMS()+`,
				lease_owner = NULL, lease_expires_at = NULL
				WHERE id IN (?) AND status IN `+notFinal+` RETURNING `+updatedColumns), expire)
			if err != nil {
				return fmt.Errorf("expire tasks: %w", err)
			}
			expired, err := scanUpdated(rows)
			if err != nil {
				return fmt.Errorf("expire tasks: %w", err)
			}
			updated = append(updated, expired...)
		}
		final = finalIDs(updated)
		_, err = tx.publishDecided(ctx, decided, eventsOf(updated)...)
		return err
	})
	if err != nil {
		return nil, 0, err
	}
	return final, found, nil
}

// completeByFallback completes the task, unless it is final already, as
// the fallback attempt a decides, inside tx. It returns the task as
// publishingSQL reports it, or nil when it was final.
func (d *DB) completeByFallback(ctx context.Context, tx *Tx, taskID string, a arbiter.Attempt, now arbiter.Timestamp) (*updatedTask, error) {
	rows, err := tx.QueryContext(ctx, d.rebind(d.sqlPublishing(`UPDATE task_states SET status = ?, final_verdict = ?,
		final_tier = ?, final_confidence = ?, completed_at = ?, approved_digest = ?,
		lease_owner = NULL, lease_expires_at = NULL, reserved_by = NULL, reserved_until = NULL
		WHERE id = ? AND status IN `+notFinal+` RETURNING `+updatedColumns)),
		arbiter.StatusCompleted, *a.Verdict, arbiter.TierFallback, nullFloatOf(a.Confidence), int64(now), nullOf(a.ActionDigest), taskID)
	if err != nil {
		return nil, fmt.Errorf("decide task at its deadline: %w", err)
	}
	updated, err := scanUpdated(rows)
	if err != nil {
		return nil, fmt.Errorf("decide task at its deadline: %w", err)
	} else if len(updated) == 0 {
		return nil, nil
	}
	return &updated[0], nil
}

// nullFloatOf stores a nil float as SQL NULL.
func nullFloatOf(f *float64) sql.NullFloat64 {
	if f == nil {
		return sql.NullFloat64{}
	}
	return sql.NullFloat64{Float64: *f, Valid: true}
}

// deadlineRefusal is the error of a change refused on the task because its
// deadline passed: how it ended (expired, or decided by its on-expiry
// outcome), or what will happen to it when the sweep comes. q is the
// transaction the change ran in, or the pool.
func (d *DB) deadlineRefusal(ctx context.Context, q sqlx.QueryerContext, taskID string) error {
	var (
		t                                 arbiter.Task
		finalTier, finalVerdict, onExpiry sql.NullString
		deadlineAt, expiredAt             sql.NullInt64
	)
	err := q.QueryRowxContext(ctx, d.rebind(`SELECT status, final_tier, final_verdict, on_expiry, deadline_at, expired_at
		FROM tasks WHERE id = ?`), taskID).Scan(&t.Status, &finalTier, &finalVerdict, &onExpiry, &deadlineAt, &expiredAt)
	if err != nil {
		return notFound(err, errTaskNotFound.Message)
	}
	t.FinalTier, t.FinalVerdict = nullString(finalTier), nullString(finalVerdict)
	t.DeadlineAt, t.ExpiredAt = nullTimestamp(deadlineAt), nullTimestamp(expiredAt)
	if t.OnExpiry, err = parseOnExpiry(onExpiry); err != nil {
		return fmt.Errorf("task %s: %w", taskID, err)
	}
	if t.Status == arbiter.StatusCompleted {
		return arbiter.Errorf(arbiter.ECONFLICT, "The task was already decided by %s.", t.DecidedBy())
	}
	return arbiter.DeadlinePassedError(&t)
}

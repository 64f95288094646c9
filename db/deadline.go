package db

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

// notFinal is the SQL list of the statuses a task can expire from.
const notFinal = `('` + arbiter.StatusPending + `', '` + arbiter.StatusAgentRunning + `', '` + arbiter.StatusHumanNeeded + `')`

// ExpireTasks moves up to max tasks that are not final and whose deadline
// has passed, by the database's clock, to expired, and returns their ids
// (see arbiter.QueueService); before them, up to max such tasks with an
// on-expiry outcome get it (decideDueTasks), and their ids come first.
// The expiry is one statement: each row changes
// once, so a task expires once however many workers sweep at the same
// time; on Postgres they skip each other's rows (SKIP LOCKED) instead of
// waiting, and the statement publishes each expiry with pg_notify. The
// expiries' webhook messages are written in the same transaction.
func (d *DB) ExpireTasks(ctx context.Context, max int) (_ []string, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if max <= 0 {
		return nil, nil
	}
	// The tasks with an on-expiry outcome first (deadline_outcome.go).
	decided, err := d.decideDueTasks(ctx, max)
	if err != nil {
		return nil, err
	}
	stmt, err := d.stmt(ctx, d.expireTasksSQL())
	if err != nil {
		return nil, err
	}
	var expired []string
	err = d.transact(ctx, func(tx *Tx) error {
		rows, err := tx.StmtContext(ctx, stmt).QueryContext(ctx, max)
		if err != nil {
			return fmt.Errorf("expire tasks: %w", err)
		}
		updated, err := scanUpdated(rows)
		if err != nil {
			return fmt.Errorf("expire tasks: %w", err)
		}
		expired = finalIDs(updated)
		return tx.publish(ctx, eventsOf(updated)...)
	})
	if err != nil {
		return nil, err
	}
	return append(decided, expired...), nil
}

// expireTasksSQL is ExpireTasks's statement; its argument is the most
// tasks it expires. The due tasks are found by the partial index
// tasks_deadline, so a sweep costs what it expires, not the table's size;
// those with an on-expiry outcome are left to decideDueTasks.
func (d *DB) expireTasksSQL() string {
	lock := d.sqlSkipLocked()
	return d.sqlPublishing(`UPDATE task_states SET status = 'expired', expired_at = ` + d.sqlNowMS() + `,
		lease_owner = NULL, lease_expires_at = NULL
		WHERE id IN (SELECT id FROM task_states
			WHERE deadline_at IS NOT NULL AND status IN ` + notFinal + ` AND deadline_at <= ` + d.sqlNowMS() + ` AND on_expiry IS NULL
			ORDER BY deadline_at LIMIT ? ` + lock + `)
		AND status IN ` + notFinal + `
		RETURNING ` + updatedColumns)
}

// beforeDeadline is the SQL condition that a task's deadline, if it has
// one, has not passed by the database's clock.
func (d *DB) beforeDeadline() string {
	return `(deadline_at IS NULL OR deadline_at > ` + d.sqlNowMS() + `)`
}

// deadlinePassed reports whether a change refused on the task was refused
// for its deadline: the task expired, or its deadline has passed by the
// database's clock though no sweep has expired it yet. q is the
// transaction the change ran in, or the pool.
func (d *DB) deadlinePassed(ctx context.Context, q sqlx.QueryerContext, taskID string) (bool, error) {
	var passed bool
	err := sqlx.GetContext(ctx, q, &passed, d.rebind(`SELECT status = 'expired' OR (deadline_at IS NOT NULL AND deadline_at <= `+
		d.sqlNowMS()+`) FROM tasks WHERE id = ?`), taskID)
	if err != nil {
		return false, notFound(err, "Task not found.")
	}
	return passed, nil
}

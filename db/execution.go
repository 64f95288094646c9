package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.ExecutionService = (*DB)(nil)

// ClaimExecution claims the execution of the approved action of the
// account's task id (arbiter.ExecutionService): one row per task in
// task_executions, inserted unless one is there, so that two claims at
// once on either store leave one row, the first's. The audit log records
// a new claim in the same transaction.
func (d *DB) ClaimExecution(ctx context.Context, accountID, id string, c arbiter.ExecutionClaim, by arbiter.Actor) (_ *arbiter.Execution, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	ctx, endSpan := d.traced(ctx, "db ClaimExecution")
	defer endSpan(&err)
	var out *arbiter.Execution
	err = d.transact(ctx, func(tx *Tx) error {
		t, err := d.findTask(ctx, tx, accountID, id)
		if err != nil {
			return err
		}
		if err := t.CheckExecution(c); err != nil {
			return err
		}
		e := &arbiter.Execution{TaskID: t.ID, Digest: c.Digest, ClaimID: c.ClaimID, Executor: c.Executor, ClaimedAt: tx.now}
		res, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO task_executions
			(task_id, account_id, digest, claim_id, executor, claimed_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (task_id) DO NOTHING`),
			e.TaskID, accountID, e.Digest, e.ClaimID, e.Executor, int64(e.ClaimedAt))
		if err != nil {
			return fmt.Errorf("claim execution: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("claim execution: %w", err)
		} else if n == 1 {
			out = e
			return d.insertAuditEvent(ctx, tx, arbiter.NewExecutionAuditEvent(accountID, by, e))
		}
		prior, err := d.findExecution(ctx, tx, t.ID)
		if err != nil {
			return err
		}
		if prior.ClaimID != c.ClaimID || prior.Digest != c.Digest {
			return arbiter.ErrAlreadyExecuted(prior)
		}
		out = prior
		return nil
	})
	return out, err
}

// findExecution reads the claim that holds for the task id, inside tx.
func (d *DB) findExecution(ctx context.Context, tx *Tx, id string) (*arbiter.Execution, error) {
	var e arbiter.Execution
	var at int64
	err := tx.QueryRowContext(ctx, d.rebind(`SELECT task_id, digest, claim_id, executor, claimed_at
		FROM task_executions WHERE task_id = ?`), id).Scan(&e.TaskID, &e.Digest, &e.ClaimID, &e.Executor, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("find execution: the claim of %s is gone", id)
	} else if err != nil {
		return nil, fmt.Errorf("find execution: %w", err)
	}
	e.ClaimedAt = arbiter.Timestamp(at)
	return &e, nil
}

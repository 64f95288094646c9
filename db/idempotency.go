package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter"
)

// Ensure the store implements the service.
var _ arbiter.IdempotencyKeyService = (*DB)(nil)

// errKeyMismatch answers a create whose idempotency key the account used
// for a different request.
var errKeyMismatch = arbiter.Errorf(arbiter.EMISMATCH,
	"This idempotency key was used for a different request; use a new key for a new task.")

// errKeyInFlight answers a create whose idempotency key another create
// stored while this one ran, when that create's task cannot be read yet.
var errKeyInFlight = &arbiter.Error{
	Code:       arbiter.ECONFLICT,
	Reason:     arbiter.ReasonIdempotencyInFlight,
	Message:    "A request with this idempotency key is still being processed; retry in a second.",
	RetryAfter: time.Second,
}

// replay answers a create whose idempotency key the account may have used
// before, reading inside tx when it is not nil: the earlier task as it is
// now when the two requests match, errKeyMismatch when they do not, and
// ifAbsent when the key is not stored.
func (d *DB) replay(ctx context.Context, tx *Tx, c newCreate, ifAbsent error) (stored, error) {
	query := d.rebind(`SELECT fingerprint, task_id FROM idempotency_keys WHERE account_id = ? AND idempotency_key = ?`)
	var row *sql.Row
	if tx != nil {
		row = tx.QueryRowContext(ctx, query, c.task.AccountID, c.key)
	} else {
		row = d.db.QueryRowContext(ctx, query, c.task.AccountID, c.key)
	}
	var fingerprint, taskID string
	switch err := row.Scan(&fingerprint, &taskID); {
	case errors.Is(err, sql.ErrNoRows):
		return stored{}, ifAbsent
	case err != nil:
		return stored{}, fmt.Errorf("find idempotency key: %w", err)
	case fingerprint != c.fingerprint:
		return stored{}, errKeyMismatch
	}
	t, err := d.findTask(ctx, tx, c.task.AccountID, taskID)
	if err != nil {
		return stored{}, fmt.Errorf("find the task of an idempotency key: %w", err)
	}
	return stored{task: t, replayed: true}, nil
}

// keyTaken reports whether err is a create's failure on an idempotency key
// that another create stored first.
func keyTaken(err error) bool {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return pqErr.Code == "23505" && pqErr.Constraint == "idempotency_keys_pkey"
	}
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: idempotency_keys.")
}

// PruneIdempotencyKeys deletes the idempotency keys whose retention ended
// by the store's clock, so that they may be used again.
func (d *DB) PruneIdempotencyKeys(ctx context.Context) (_ int64, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	res, err := d.db.ExecContext(ctx, d.rebind(`DELETE FROM idempotency_keys WHERE expires_at <= ?`), int64(d.nowMS()))
	if err != nil {
		return 0, fmt.Errorf("prune idempotency keys: %w", err)
	}
	return res.RowsAffected()
}

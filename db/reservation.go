package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.ReservationService = (*DB)(nil)

// freeFor is the SQL condition, on the tasks aliased t, of a task the
// person (the argument) may take: nobody holds it, they do, or its holder's
// reservation ran out by the database's clock.
func (d *DB) freeFor() string {
	return `(t.reserved_by IS NULL OR t.reserved_by = ? OR t.reserved_until <= ` + d.sqlNowMS() + `)`
}

// reservedUntil is the SQL expression of a new reservation's end: the
// database's now plus the account's (the argument) reservation length, and
// never past the task's deadline (the SQL expression deadline, NULL for
// none): a reservation does not outlive the task it holds.
func (d *DB) reservedUntil(deadline string) string {
	return d.sqlLeast(d.sqlNowMS()+` + 1000 * (SELECT reservation_seconds FROM accounts WHERE id = ?)`,
		`COALESCE(`+deadline+`, `+noDeadline+`)`)
}

// releaseOthers ends the person's reservations in the account but that of
// taskID: a reviewer holds one task at a time, so browsing does not hoard.
func (d *DB) releaseOthers(ctx context.Context, tx *Tx, accountID, personID, taskID string) error {
	if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET reserved_by = NULL, reserved_until = NULL
		WHERE reserved_by = ? AND account_id = ? AND id <> ?`), personID, accountID, taskID); err != nil {
		return fmt.Errorf("release reservations: %w", err)
	}
	if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM review_slots WHERE person_id = ? AND task_id <> ?
		AND task_id IN (SELECT id FROM tasks WHERE account_id = ?)`), personID, taskID, accountID); err != nil {
		return fmt.Errorf("release slots: %w", err)
	}
	return nil
}

// findReservation returns the task's reservation as it stands, nil when
// the task waits for nobody or nobody holds it; ENOTFOUND for a task that
// is not the account's.
func (d *DB) findReservation(ctx context.Context, q sqlx.QueryerContext, accountID, taskID string) (*arbiter.Reservation, error) {
	var (
		status      string
		holder, who sql.NullString
		until       sql.NullInt64
	)
	var audit string
	err := q.QueryRowxContext(ctx, d.rebind(`SELECT t.status, COALESCE(t.audit_state, ''), t.reserved_by, t.reserved_until, p.email
		FROM tasks t LEFT JOIN people p ON p.id = t.reserved_by WHERE t.id = ? AND t.account_id = ?`), taskID, accountID).
		Scan(&status, &audit, &holder, &until, &who)
	if err != nil {
		return nil, notFound(err, errTaskNotFound.Message)
	}
	inQueue := (&arbiter.Task{Status: status, AuditState: audit}).InReviewQueue()
	if !inQueue || !holder.Valid {
		return nil, nil
	}
	return &arbiter.Reservation{TaskID: taskID, PersonID: holder.String, Email: who.String, Until: arbiter.Timestamp(until.Int64)}, nil
}

// ReserveTask reserves the task for the person, or extends their
// reservation, unless another holds it, and returns the reservation as it
// stands.
func (d *DB) ReserveTask(ctx context.Context, accountID, taskID, personID string) (_ *arbiter.Reservation, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if !arbiter.ValidTaskID(taskID) {
		return nil, errTaskNotFound
	}
	var r *arbiter.Reservation
	err = d.transact(ctx, func(tx *Tx) error {
		if err := d.authorizeReviewer(ctx, tx, accountID, personID); err != nil {
			return err
		}
		if multi, err := d.asksVotes(ctx, tx, accountID, taskID); err != nil {
			return err
		} else if multi {
			r, err = d.reserveSlot(ctx, tx, accountID, taskID, personID)
			return err
		}
		res, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET reserved_by = ?, reserved_until = `+d.reservedUntil("deadline_at")+`
			WHERE id = ? AND account_id = ? AND `+inReviewQueue+`
			AND (reserved_by IS NULL OR reserved_by = ? OR reserved_until <= `+d.sqlNowMS()+`)`),
			personID, accountID, taskID, accountID, personID)
		if err != nil {
			return fmt.Errorf("reserve task: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("reserve task: %w", err)
		} else if n == 1 {
			if err := d.releaseOthers(ctx, tx, accountID, personID, taskID); err != nil {
				return err
			}
		}
		r, err = d.findReservation(ctx, tx, accountID, taskID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// authorizeReviewer returns nil when the person may review in the account:
// reservations are a person's, never the operator's. On Postgres it then
// locks the person's membership, so one person's reservation changes in
// several tabs take turns: each reserves one task and releases the
// others, and two of them at once would lock those rows in opposite
// orders. SQLite's single writer serializes them already.
func (d *DB) authorizeReviewer(ctx context.Context, tx *Tx, accountID, personID string) error {
	if personID == "" {
		return arbiter.ErrNotAllowed
	}
	if _, err := d.authorize(ctx, tx, accountID, arbiter.Actor{PersonID: personID}, arbiter.ActionReview); err != nil {
		return err
	}
	if !d.locksRows() {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM memberships WHERE account_id = $1 AND person_id = $2 FOR NO KEY UPDATE`,
		accountID, personID); err != nil {
		return fmt.Errorf("lock membership: %w", err)
	}
	return nil
}

// ReleaseTask ends the person's reservation of the task and, to skip it,
// puts it at the end of the session's order.
func (d *DB) ReleaseTask(ctx context.Context, accountID, taskID, personID, sessionID string, skip bool) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if !arbiter.ValidTaskID(taskID) {
		return errTaskNotFound
	}
	return d.transact(ctx, func(tx *Tx) error {
		if err := d.authorizeReviewer(ctx, tx, accountID, personID); err != nil {
			return err
		}
		if _, err := d.findReservation(ctx, tx, accountID, taskID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET reserved_by = NULL, reserved_until = NULL
			WHERE id = ? AND account_id = ? AND reserved_by = ?`), taskID, accountID, personID); err != nil {
			return fmt.Errorf("release task: %w", err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`DELETE FROM review_slots WHERE task_id = ? AND person_id = ?`), taskID, personID); err != nil {
			return fmt.Errorf("release slot: %w", err)
		}
		if !skip || sessionID == "" {
			return nil
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO session_skips (session_id, task_id, skipped_at) VALUES (?, ?, ?)
			ON CONFLICT (session_id, task_id) DO UPDATE SET skipped_at = excluded.skipped_at`),
			sessionID, taskID, int64(d.nowMS())); err != nil {
			return fmt.Errorf("skip task: %w", err)
		}
		return nil
	})
}

// NextTask reserves the next task for the person, picked and reserved in
// one statement: the view's first that nobody else holds and the session
// did not skip (one step of the order's index at a time), else the
// session's skipped ones of the view in the order they were skipped. On
// Postgres the pick skips rows another reviewer's pick has locked, so two
// reviewers asking at once get two tasks; on SQLite the single writer
// serializes the picks.
//
// A task that asks several votes is held by slots (reserveSlot), which its
// pick counts as they were when the pick's statement began: a slot taken
// by a reviewer whose pick committed meanwhile is seen only once the task
// is locked. When the person gets no slot of the task picked, the pick
// runs again without it (nextTaskTries at most), so the desk never sends a
// reviewer to a task others hold all of.
func (d *DB) NextTask(ctx context.Context, accountID, personID, sessionID string, view arbiter.QueueView) (_ *arbiter.Reservation, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if err := view.Validate(); err != nil {
		return nil, err
	}
	filter, filterArgs := viewFilter(view)
	var r *arbiter.Reservation
	err = d.transact(ctx, func(tx *Tx) error {
		if err := d.authorizeReviewer(ctx, tx, accountID, personID); err != nil {
			return err
		}
		goldFirst, err := d.goldFirst(ctx, tx, accountID)
		if err != nil {
			return err
		}
		var tried []string
		for range nextTaskTries {
			id, required, err := d.pickNext(ctx, tx, accountID, personID, sessionID, filter, filterArgs, view.Order, goldFirst, tried)
			if err != nil || id == "" {
				return err
			}
			if required <= 1 {
				if err := d.releaseOthers(ctx, tx, accountID, personID, id); err != nil {
					return err
				}
				r, err = d.findReservation(ctx, tx, accountID, id)
				return err
			}
			if r, err = d.reserveSlot(ctx, tx, accountID, id, personID); err != nil || (r != nil && r.PersonID == personID) {
				return err
			}
			r, tried = nil, append(tried, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// nextTaskTries bounds the picks of one NextTask: a pick that loses its
// task's last slot to a reviewer who asked at the same moment tries again.
const nextTaskTries = 4

// pickNext picks the person's next task inside tx, as NextTask says,
// passing over the tasks tried already, and reserves it when it asks one
// review; it returns its id ("" for none) and the reviews it asks.
func (d *DB) pickNext(ctx context.Context, tx *Tx, accountID, personID, sessionID, filter string, filterArgs []any,
	order string, goldFirst bool, tried []string) (id string, required int, err error) {
	lock := d.sqlSkipLockedOfT()
	if len(tried) > 0 {
		filter += ` AND t.id NOT IN (?` + strings.Repeat(`, ?`, len(tried)-1) + `)`
	}
	// First the view's first task the session did not skip (with the
	// whole queue oldest first, one step of the human queue's index at a
	// time), gold or not as the account's gold rate draws, then the other
	// side; then the skipped ones, in the order they were skipped (a
	// session skips few).
	args := append([]any{personID, accountID, accountID, personID, personID, personID, sessionID}, filterArgs...)
	for _, id := range tried {
		args = append(args, id)
	}
	unskipped := func(from, account, gold string) string {
		return `SELECT t.id FROM ` + from + `
			WHERE ` + account + ` = ? AND ` + inReviewQueueT + ` AND ` + d.freeFor() + ` AND ` + d.slotFreeFor() + `
			AND NOT EXISTS (SELECT 1 FROM session_skips k WHERE k.session_id = ? AND k.task_id = t.id)` + gold + filter + `
			ORDER BY ` + queueOrderBy(order) + ` LIMIT 1` + lock
	}
	// The gold pick walks the account's gold tasks, few, not the queue.
	rest := unskipped(`task_states t`, `t.account_id`, goldNormal)
	gold := unskipped(`gold_tasks g JOIN task_states t ON t.id = g.task_id AND t.account_id = g.account_id`, `g.account_id`, ``)
	first, second := rest, gold
	if goldFirst {
		first, second = gold, rest
	}
	for _, pick := range []string{
		first,
		second,
		`SELECT t.id FROM session_skips k JOIN task_states t ON t.id = k.task_id
			WHERE t.account_id = ? AND ` + inReviewQueueT + ` AND ` + d.freeFor() + ` AND ` + d.slotFreeFor() + ` AND k.session_id = ?` + filter + `
			ORDER BY k.skipped_at, t.id LIMIT 1` + lock,
	} {
		// A task that asks several votes is held by slots
		// (reserveSlot), not by the task's own reservation.
		err := tx.QueryRowContext(ctx, d.rebind(`UPDATE task_states SET reserved_by = CASE WHEN reviews_required = 1 THEN ? END,
			reserved_until = CASE WHEN reviews_required = 1 THEN `+d.reservedUntil("deadline_at")+` END
			WHERE id = (`+pick+`) RETURNING id, reviews_required`), args...).Scan(&id, &required)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		} else if err != nil {
			return "", 0, fmt.Errorf("next task: %w", err)
		}
		return id, required, nil
	}
	return "", 0, nil
}

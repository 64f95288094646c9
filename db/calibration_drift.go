package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/arbiterhq/arbiter"
)

// checkDrift applies arbiter.NextDrift, inside tx, to the account's drift
// window after the audit of taskID was answered: a crossing is stored (at
// most one open per account, by the calibration_drifts_open index, so two
// audits answered at once tell the account once) and announced to the
// account's endpoints as calibration.drifted; a window back under the
// target closes the open crossing.
func (d *DB) checkDrift(ctx context.Context, tx *Tx, accountID, taskID string) error {
	s := d.drift
	// Answers to the account's audits take turns here, so that the last of
	// several answered at once reads a window holding all of them: without
	// it, each would read the window before the others commit, and none
	// might cross. SQLite's single writer takes turns already.
	if turn := d.sqlTurnLock(); turn != "" {
		if _, err := tx.ExecContext(ctx, turn, "calibration_drift:"+accountID); err != nil {
			return fmt.Errorf("drift lock: %w", err)
		}
	}
	now := d.nowMS()
	since := int64(now) - s.Age.Milliseconds()
	var w arbiter.DriftWindow
	if err := tx.QueryRowContext(ctx, d.rebind(`SELECT count(*), COALESCE(SUM(1 - correct), 0) FROM
		(SELECT correct FROM labelled_pairs WHERE account_id = ? AND audit = 1 AND labelled_at > ?
			ORDER BY labelled_at DESC LIMIT ?) w`), accountID, since, s.Audits).Scan(&w.Audits, &w.Errors); err != nil {
		return fmt.Errorf("drift window: %w", err)
	}
	open, err := d.openDrift(ctx, tx, accountID)
	if err != nil {
		return err
	}
	drifted := open != nil
	after, crossed := arbiter.NextDrift(drifted, w, s)
	switch {
	case crossed:
		dr := arbiter.NewDrift(accountID, taskID, w, s, now)
		res, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO calibration_drifts (account_id, task_id, audits, errors, error_rate,
			error_lower, target, confidence, drifted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (account_id) WHERE cleared_at IS NULL DO NOTHING`),
			accountID, taskID, dr.Audits, dr.Errors, dr.ErrorRate, dr.ErrorLower, dr.Target, dr.Confidence, int64(now))
		if err != nil {
			return fmt.Errorf("store drift: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store drift: %w", err)
		} else if n == 0 {
			return nil // another transaction stored this crossing
		}
		return d.enqueueAccountEvent(ctx, tx, accountID, taskID, arbiter.EventCalibrationDrifted, dr)
	case drifted && !after:
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE calibration_drifts SET cleared_at = ?
			WHERE account_id = ? AND cleared_at IS NULL`), int64(now), accountID); err != nil {
			return fmt.Errorf("clear drift: %w", err)
		}
	}
	return nil
}

// enqueueAccountEvent writes, in tx, a message of an event about the
// account (not one task's change) for each of its endpoints that wants it,
// held for a disabled one, the payload holding data; taskID is the task
// that caused it. Callback URLs belong to tasks and get none.
func (d *DB) enqueueAccountEvent(ctx context.Context, tx *Tx, accountID, taskID, eventType string, data any) error {
	var endpoints []endpointTarget
	if err := tx.SelectContext(ctx, &endpoints, d.rebind(`SELECT id, account_id, event_types, disabled FROM webhook_endpoints
		WHERE account_id = ? ORDER BY id`), accountID); err != nil {
		return fmt.Errorf("find endpoints: %w", err)
	}
	now := d.now()
	payload, err := arbiter.NewWebhookPayload(eventType, now, data)
	if err != nil {
		return fmt.Errorf("webhook payload: %w", err)
	}
	var msgs []*arbiter.WebhookMessage
	for _, e := range endpoints {
		status, ok := e.statusFor(eventType)
		if !ok {
			continue
		}
		msgs = append(msgs, &arbiter.WebhookMessage{ID: arbiter.NewWebhookMessageID(), AccountID: accountID, EndpointID: e.ID,
			EventType: eventType, TaskID: taskID, Payload: payload, Status: status,
			NextAttemptAt: arbiter.TimestampOf(now), CreatedAt: arbiter.TimestampOf(now)})
	}
	return d.insertMessages(ctx, tx, msgs)
}

// driftColumns are the columns of a crossing, in arbiter.Drift's order.
const driftColumns = `account_id, task_id, audits, errors, error_rate, error_lower, target, confidence, drifted_at, cleared_at`

func scanDrift(row interface{ Scan(...any) error }) (arbiter.Drift, error) {
	var dr arbiter.Drift
	var cleared sql.NullInt64
	err := row.Scan(&dr.AccountID, &dr.TaskID, &dr.Audits, &dr.Errors, &dr.ErrorRate, &dr.ErrorLower, &dr.Target, &dr.Confidence,
		&dr.DriftedAt, &cleared)
	if cleared.Valid {
		c := arbiter.Timestamp(cleared.Int64)
		dr.ClearedAt = &c
	}
	return dr, err
}

// CalibrationDrift returns the account's open crossing, or nil when its
// audited error rate has not drifted.
func (d *DB) CalibrationDrift(ctx context.Context, accountID string) (_ *arbiter.Drift, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.openDrift(ctx, d.db, accountID)
}

// openDrift reads, with q (the pool or a transaction), the account's open
// crossing (calibration_drifts_open holds one at most), or nil.
func (d *DB) openDrift(ctx context.Context, q interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, accountID string) (*arbiter.Drift, error) {
	dr, err := scanDrift(q.QueryRowContext(ctx, d.rebind(`SELECT `+driftColumns+` FROM calibration_drifts
		WHERE account_id = ? AND cleared_at IS NULL`), accountID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("find drift: %w", err)
	}
	return &dr, nil
}

// ClaimDriftMails claims the crossings not yet mailed, at most max, and
// returns a mail for each owner and admin of their accounts. A crossing is
// claimed once however many workers ask at once.
func (d *DB) ClaimDriftMails(ctx context.Context, max int) (_ []arbiter.DriftMail, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var mails []arbiter.DriftMail
	err = d.transact(ctx, func(tx *Tx) error {
		mails = nil
		rows, err := tx.QueryContext(ctx, d.rebind(`SELECT `+driftColumns+` FROM calibration_drifts
			WHERE mailed = 0 ORDER BY drifted_at, account_id LIMIT ?`), max)
		if err != nil {
			return fmt.Errorf("find drifts to mail: %w", err)
		}
		var due []arbiter.Drift
		for rows.Next() {
			dr, err := scanDrift(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("find drifts to mail: %w", err)
			}
			due = append(due, dr)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find drifts to mail: %w", err)
		}
		for _, dr := range due {
			res, err := tx.ExecContext(ctx, d.rebind(`UPDATE calibration_drifts SET mailed = 1
				WHERE account_id = ? AND drifted_at = ? AND mailed = 0`), dr.AccountID, int64(dr.DriftedAt))
			if err != nil {
				return fmt.Errorf("claim drift mail: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("claim drift mail: %w", err)
			} else if n == 0 {
				continue // another worker claimed it
			}
			var name string
			if err := tx.GetContext(ctx, &name, d.rebind(`SELECT email FROM accounts WHERE id = ?`), dr.AccountID); err != nil {
				return fmt.Errorf("drift mail account: %w", err)
			}
			members, err := d.membersOf(ctx, tx, dr.AccountID)
			if err != nil {
				return err
			}
			for _, m := range members {
				if arbiter.Can(m.Role, arbiter.ActionManageSettings) {
					mails = append(mails, arbiter.DriftMail{Drift: dr, AccountName: name, Email: m.Email})
				}
			}
		}
		return nil
	})
	return mails, err
}

// CountDriftedAccounts counts the accounts whose audited error rate has
// drifted, for the metrics' gauge, along the calibration_drifts_open index.
func (d *DB) CountDriftedAccounts(ctx context.Context) (_ int, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var n int
	if err := d.db.GetContext(ctx, &n, `SELECT count(*) FROM calibration_drifts WHERE cleared_at IS NULL`); err != nil {
		return 0, fmt.Errorf("count drifts: %w", err)
	}
	return n, nil
}

// driftSettingsOf fills the zero fields of s with the defaults.
func driftSettingsOf(s arbiter.DriftSettings) arbiter.DriftSettings {
	def := arbiter.DefaultDriftSettings
	if s.Audits <= 0 {
		s.Audits = def.Audits
	}
	if s.Age <= 0 {
		s.Age = def.Age
	}
	if s.Target <= 0 || s.Target >= 1 {
		s.Target = def.Target
	}
	if s.Confidence <= 0 || s.Confidence >= 1 {
		s.Confidence = def.Confidence
	}
	return s
}

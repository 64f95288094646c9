package db

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

// checkDrift applies arbiter.NextDrift, inside tx, to the drift window of
// the policy that governs taskType after the audit of taskID was answered:
// the task type's own policy, or the default policy for a type without
// one. The window is the latest audits of the task types the policy
// governs; the target is the policy's (Policy.Target), else the default
// policy's, else the store's (Options.Drift). A crossing is stored (at most
// one open per policy, by the policy_drifts_open index, so two audits
// answered at once tell the account once) and announced to the account's
// endpoints as calibration.drifted; a window back under the target closes
// the open crossing.
func (d *DB) checkDrift(ctx context.Context, tx *Tx, accountID, taskType, taskID string) error {
	scope, target, err := d.driftScope(ctx, tx, accountID, taskType)
	if err != nil {
		return err
	}
	s := d.drift.Targeting(target)
	// Answers to the audits of a policy take turns here, so that the last
	// of several answered at once reads a window holding all of them:
	// without it, each would read the window before the others commit,
	// and none might cross. SQLite's single writer takes turns already.
	if turn := d.sqlTurnLock(); turn != "" {
		if _, err := tx.ExecContext(ctx, turn, "calibration_drift:"+accountID+":"+scope); err != nil {
			return fmt.Errorf("drift lock: %w", err)
		}
	}
	now := d.nowMS()
	since := int64(now) - s.Age.Milliseconds()
	types, args := driftTypes(accountID, scope)
	var w arbiter.DriftWindow
	if err := tx.QueryRowContext(ctx, d.rebind(`SELECT count(*), COALESCE(SUM(1 - correct), 0) FROM
		(SELECT correct FROM labelled_pairs WHERE account_id = ? AND audit = 1 AND labelled_at > ? AND `+types+`
			ORDER BY labelled_at DESC LIMIT ?) w`), append(append([]any{accountID, since}, args...), s.Audits)...).Scan(&w.Audits, &w.Errors); err != nil {
		return fmt.Errorf("drift window: %w", err)
	}
	open, err := d.openDrifts(ctx, tx, accountID, scope)
	if err != nil {
		return err
	}
	drifted := len(open) > 0
	after, crossed := arbiter.NextDrift(drifted, w, s)
	switch {
	case crossed:
		dr := arbiter.NewDrift(accountID, scope, taskID, w, s, now)
		res, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO policy_drifts (account_id, task_type, task_id, audits, errors,
			error_rate, error_lower, target, confidence, drifted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (account_id, task_type) WHERE cleared_at IS NULL DO NOTHING`),
			accountID, scope, taskID, dr.Audits, dr.Errors, dr.ErrorRate, dr.ErrorLower, dr.Target, dr.Confidence, int64(now))
		if err != nil {
			return fmt.Errorf("store drift: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store drift: %w", err)
		} else if n == 0 {
			return nil // another transaction stored this crossing
		}
		return tx.publish(ctx, arbiter.TaskEvent{Type: arbiter.EventCalibrationDrifted, AccountID: accountID, TaskID: taskID, Drift: &dr})
	case drifted && !after:
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE policy_drifts SET cleared_at = ?
			WHERE account_id = ? AND task_type = ? AND cleared_at IS NULL`), int64(now), accountID, scope); err != nil {
			return fmt.Errorf("clear drift: %w", err)
		}
	}
	return nil
}

// driftScope returns, inside tx, the policy that governs the account's
// tasks of taskType for drift (the type's own, or DefaultPolicyName) and
// the target drift is watched against: that policy's (its target, else
// the target it is certified at), else the default policy's, nil when
// neither sets one.
func (d *DB) driftScope(ctx context.Context, tx *Tx, accountID, taskType string) (scope string, target *arbiter.ErrorTarget, err error) {
	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT `+policyColumns+` FROM policies
		WHERE account_id = ? AND task_type IN (?, ?)`), accountID, taskType, arbiter.DefaultPolicyName)
	if err != nil {
		return "", nil, fmt.Errorf("drift policy: %w", err)
	}
	defer rows.Close()
	scope = arbiter.DefaultPolicyName
	var own, fallback *arbiter.ErrorTarget
	for rows.Next() {
		p, err := scanPolicy(rows)
		if err != nil {
			return "", nil, fmt.Errorf("drift policy: %w", err)
		}
		t := cmp.Or(p.Target, p.Agent.Certified)
		if p.TaskType == taskType && taskType != arbiter.DefaultPolicyName {
			scope, own = p.TaskType, t
		} else {
			fallback = t
		}
	}
	if err := rows.Err(); err != nil {
		return "", nil, fmt.Errorf("drift policy: %w", err)
	}
	return scope, cmp.Or(own, fallback), nil
}

// targetOf reads a policy's stored target: nil when it sets none.
func targetOf(rate, confidence sql.NullFloat64) *arbiter.ErrorTarget {
	if !rate.Valid {
		return nil
	}
	t := &arbiter.ErrorTarget{ErrorRate: rate.Float64, Confidence: arbiter.DefaultCertificationConfidence}
	if confidence.Valid {
		t.Confidence = confidence.Float64
	}
	return t
}

// driftTypes returns the condition on labelled_pairs.task_type of the
// tasks the policy scope governs, and its arguments: the task type
// itself, or for the default policy every type without a policy of its
// own.
func driftTypes(accountID, scope string) (string, []any) {
	if scope != arbiter.DefaultPolicyName {
		return "task_type = ?", []any{scope}
	}
	return `task_type NOT IN (SELECT task_type FROM policies WHERE account_id = ? AND task_type <> ?)`,
		[]any{accountID, arbiter.DefaultPolicyName}
}

// driftColumns are the columns of a crossing, in arbiter.Drift's order.
const driftColumns = `account_id, task_type, task_id, audits, errors, error_rate, error_lower, target, confidence, drifted_at, cleared_at`

func scanDrift(row interface{ Scan(...any) error }) (arbiter.Drift, error) {
	var dr arbiter.Drift
	var cleared sql.NullInt64
	err := row.Scan(&dr.AccountID, &dr.TaskType, &dr.TaskID, &dr.Audits, &dr.Errors, &dr.ErrorRate, &dr.ErrorLower, &dr.Target,
		&dr.Confidence, &dr.DriftedAt, &cleared)
	if cleared.Valid {
		c := arbiter.Timestamp(cleared.Int64)
		dr.ClearedAt = &c
	}
	return dr, err
}

// CalibrationDrifts returns the account's open crossings, by policy; none
// when no audited error rate has drifted.
func (d *DB) CalibrationDrifts(ctx context.Context, accountID string) (_ []arbiter.Drift, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	return d.openDrifts(ctx, d.db, accountID, "")
}

// openDrifts reads, with q (the pool or a transaction), the account's open
// crossings (policy_drifts_open holds one at most per policy) by
// policy: every policy's, or scope's alone when it is not "".
func (d *DB) openDrifts(ctx context.Context, q sqlx.QueryerContext, accountID, scope string) ([]arbiter.Drift, error) {
	where, args := "account_id = ? AND cleared_at IS NULL", []any{accountID}
	if scope != "" {
		where, args = where+" AND task_type = ?", append(args, scope)
	}
	rows, err := q.QueryContext(ctx, d.rebind(`SELECT `+driftColumns+` FROM policy_drifts WHERE `+where+` ORDER BY task_type`), args...)
	if err != nil {
		return nil, fmt.Errorf("find drifts: %w", err)
	}
	defer rows.Close()
	out := []arbiter.Drift{}
	for rows.Next() {
		dr, err := scanDrift(rows)
		if err != nil {
			return nil, fmt.Errorf("find drifts: %w", err)
		}
		out = append(out, dr)
	}
	return out, rows.Err()
}

// ClaimDriftMails claims the crossings not yet mailed, at most max, and
// queues a mail for each owner and admin of their accounts in the mail
// outbox, in one transaction. A crossing is claimed once however many
// workers ask at once.
func (d *DB) ClaimDriftMails(ctx context.Context, max int) (_ int, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	var queued int
	err = d.transact(ctx, func(tx *Tx) error {
		queued = 0
		due, err := d.driftsToMail(ctx, tx, max)
		if err != nil {
			return err
		}
		var msgs []*arbiter.MailMessage
		for _, dr := range due {
			res, err := tx.ExecContext(ctx, d.rebind(`UPDATE policy_drifts SET mailed = 1
				WHERE account_id = ? AND task_type = ? AND drifted_at = ? AND mailed = 0`), dr.AccountID, dr.TaskType, int64(dr.DriftedAt))
			if err != nil {
				return fmt.Errorf("claim drift mail: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("claim drift mail: %w", err)
			} else if n == 0 {
				continue // another worker claimed it
			}
			mails, err := d.driftMails(ctx, tx, dr)
			if err != nil {
				return err
			}
			msgs = append(msgs, mails...)
		}
		queued = len(msgs)
		return outboxOf[*mailOutbox](d).write(ctx, tx, msgs)
	})
	if err != nil {
		return 0, err
	}
	return queued, nil
}

// driftsToMail returns, inside tx, up to max crossings not yet mailed,
// oldest first.
func (d *DB) driftsToMail(ctx context.Context, tx *Tx, max int) ([]arbiter.Drift, error) {
	rows, err := tx.QueryContext(ctx, d.rebind(`SELECT `+driftColumns+` FROM policy_drifts
		WHERE mailed = 0 ORDER BY drifted_at, account_id, task_type LIMIT ?`), max)
	if err != nil {
		return nil, fmt.Errorf("find drifts to mail: %w", err)
	}
	defer rows.Close()
	var due []arbiter.Drift
	for rows.Next() {
		dr, err := scanDrift(rows)
		if err != nil {
			return nil, fmt.Errorf("find drifts to mail: %w", err)
		}
		due = append(due, dr)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find drifts to mail: %w", err)
	}
	return due, nil
}

// driftMails returns the mails of a crossing, one to each owner and admin
// of its account.
func (d *DB) driftMails(ctx context.Context, tx *Tx, dr arbiter.Drift) ([]*arbiter.MailMessage, error) {
	var name string
	if err := tx.GetContext(ctx, &name, d.rebind(`SELECT email FROM accounts WHERE id = ?`), dr.AccountID); err != nil {
		return nil, fmt.Errorf("drift mail account: %w", err)
	}
	members, err := d.membersOf(ctx, tx, dr.AccountID)
	if err != nil {
		return nil, err
	}
	var msgs []*arbiter.MailMessage
	for _, m := range members {
		if !arbiter.Can(m.Role, arbiter.ActionManageSettings) {
			continue
		}
		msg, err := arbiter.NewMail(arbiter.MailDrift, dr.AccountID, m.Email, "",
			arbiter.DriftMail{Drift: dr, AccountName: name, Email: m.Email})
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// CountDriftedAccounts counts the accounts whose audited error rate has
// drifted, for the metrics' gauge, along the policy_drifts_open index.
func (d *DB) CountDriftedAccounts(ctx context.Context) (_ int, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var n int
	if err := d.db.GetContext(ctx, &n, `SELECT count(DISTINCT account_id) FROM policy_drifts WHERE cleared_at IS NULL`); err != nil {
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

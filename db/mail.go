package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.MailDeliveryService = (*DB)(nil)

// Mail: the delivery side of the mail outbox (outbox_mail.go). Deliverers
// claim due rows under a lease, as for webhook and Slack messages (SKIP
// LOCKED on Postgres; the one writer on SQLite), and record each attempt,
// which moves the mail on (arbiter.NextDelivery, arbiter.MailRetry).

var errMailLeaseLost = arbiter.Errorf(arbiter.ECONFLICT, "The mail deliverer no longer holds the mail's lease.")

// mailRow is a claimed row of mail_messages.
type mailRow struct {
	ID        string `db:"id"`
	AccountID string `db:"account_id"`
	Kind      string `db:"kind"`
	Recipient string `db:"recipient"`
	TaskID    string `db:"task_id"`
	Data      string `db:"data"`
	Attempts  int    `db:"attempts"`
	// TraceParent is the trace context of the span that queued the mail.
	TraceParent string `db:"traceparent"`
}

// ClaimMail leases up to max due mails to owner, oldest due first, in one
// statement, and returns them with their content opened.
func (d *DB) ClaimMail(ctx context.Context, owner string, max int, lease time.Duration) (_ []*arbiter.MailMessage, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if max <= 0 {
		return nil, nil
	}
	var rows []mailRow
	if err := d.db.SelectContext(ctx, &rows, d.leaseDueSQL("mail_messages",
		"id, account_id, kind, recipient, task_id, data, attempts, COALESCE(traceparent, '') AS traceparent"),
		owner, lease.Milliseconds(), int64(d.nowMS()), max); err != nil {
		return nil, fmt.Errorf("claim mail: %w", err)
	}
	out := make([]*arbiter.MailMessage, len(rows))
	for i, r := range rows {
		content, err := d.secrets.Open(r.Data, r.ID)
		if err != nil {
			return nil, fmt.Errorf("open mail %s: %w", r.ID, err)
		}
		out[i] = &arbiter.MailMessage{ID: r.ID, AccountID: r.AccountID, Kind: r.Kind, To: r.Recipient, TaskID: r.TaskID,
			Content: []byte(content), Attempts: r.Attempts, TraceParent: r.TraceParent}
	}
	return out, nil
}

// RecordMailAttempts records the attempts in one transaction, each mail
// sent (its content dropped), pending again after its step's Delay, or
// failed, and its lease ended; a mail whose lease owner lost gets
// errMailLeaseLost.
func (d *DB) RecordMailAttempts(ctx context.Context, owner string, records []arbiter.MailRecord) (_ []error, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	update, err := d.stmt(ctx, recordMailSQL)
	if err != nil {
		return nil, err
	}
	out := make([]error, len(records))
	err = d.transact(ctx, func(tx *Tx) error {
		update := tx.StmtContext(ctx, update)
		now := int64(d.nowMS())
		for i, r := range records {
			status, next := arbiter.MailFailed, now
			var sentAt sql.NullInt64
			switch r.Step.State {
			case arbiter.DeliveryDone:
				status, sentAt = arbiter.MailSent, sql.NullInt64{Int64: now, Valid: true}
			case arbiter.DeliveryRetry:
				status, next = arbiter.MailPending, now+r.Step.Delay.Milliseconds()
			}
			var got string
			err := update.QueryRowContext(ctx, status, r.Step.Attempts, next, truncate(r.LastError, 500), sentAt, status, r.MailID, owner).Scan(&got)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				out[i] = errMailLeaseLost
			case err != nil:
				return fmt.Errorf("record mail attempt: %w", err)
			default:
				out[i] = nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// recordMailSQL moves a mail its owner holds on and ends the lease.
const recordMailSQL = `UPDATE mail_messages SET status = ?, attempts = ?, next_attempt_at = ?,
	lease_owner = NULL, lease_expires_at = NULL, last_error = ?, sent_at = ?,
	data = CASE WHEN ? = '` + arbiter.MailSent + `' THEN '' ELSE data END
	WHERE id = ? AND lease_owner = ? AND status = '` + arbiter.MailPending + `' RETURNING id`

// ReleaseMail ends the leases owner still holds.
func (d *DB) ReleaseMail(ctx context.Context, owner string) (err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if _, err := d.db.ExecContext(ctx, d.releaseLeasesSQL("mail_messages"), owner); err != nil {
		return fmt.Errorf("release mail: %w", err)
	}
	return nil
}

// PruneMail deletes up to max sent or failed mails created before before.
func (d *DB) PruneMail(ctx context.Context, before arbiter.Timestamp, max int) (_ int, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	res, err := d.db.ExecContext(ctx, d.rebind(`DELETE FROM mail_messages WHERE id IN (SELECT id FROM mail_messages
		WHERE status <> '`+arbiter.MailPending+`' AND created_at < ? ORDER BY created_at LIMIT ?)`), int64(before), max)
	if err != nil {
		return 0, fmt.Errorf("prune mail: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

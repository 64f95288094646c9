package db

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// The mail outbox: a task's reminder mails each member of its account who
// may review it, and an escalation rung the members it names (by role, or
// one member's address); the digest round and the drift round write their
// mails here too (notify.go, calibration_drift.go). Every mail is a row,
// one per recipient, written in the transaction that makes it due; mails
// that quote a task's text count against the account's daily bound, and
// those past it are not written. The deliverer (worker.MailDeliverer)
// claims them (mail.go).

// mailOutbox writes mail.
type mailOutbox struct {
	db   *DB
	wake wakeup
	// perDay is the daily bound of mails that quote an account's callers.
	perDay int
}

// newMailOutbox returns the mail outbox of d, for Open to register.
func newMailOutbox(d *DB, perDay int) *mailOutbox {
	if perDay <= 0 {
		perDay = arbiter.DefaultQuotingMailsPerDay
	}
	return &mailOutbox{db: d, wake: newWakeup(), perDay: perDay}
}

// MailQueued returns a channel that receives when this process queued
// mail, so that an in-process deliverer sends it at once.
func (d *DB) MailQueued() <-chan struct{} { return outboxOf[*mailOutbox](d).wake }

// alertMailTask is what the mail outbox reads of a reminded or escalated
// task.
type alertMailTask struct {
	ID             string         `db:"id"`
	AccountID      string         `db:"account_id"`
	AccountName    string         `db:"account_name"`
	Alerts         string         `db:"alerts"`
	EscalationRung sql.NullInt64  `db:"escalation_rung"`
	EscalatedAt    sql.NullInt64  `db:"escalated_at"`
	DeadlineAt     sql.NullInt64  `db:"deadline_at"`
	HumanAt        int64          `db:"human_at"`
	Prompt         string         `db:"prompt"`
	OnExpiry       sql.NullString `db:"on_expiry"`
}

// plan makes the mails of the reminders and rungs among the events; its
// write counts them against the daily bound and inserts them.
func (o *mailOutbox) plan(ctx context.Context, tx *Tx, events []arbiter.TaskEvent) (outboxWrite, error) {
	var ids []string
	kinds, traceParents := map[string]string{}, map[string]string{}
	for _, ev := range events {
		traceParents[ev.TaskID] = ev.TraceParent
		switch ev.Type {
		case arbiter.EventTaskReminded:
			kinds[ev.TaskID] = arbiter.MailReminder
		case arbiter.EventTaskEscalated:
			kinds[ev.TaskID] = arbiter.MailEscalation
		default:
			continue
		}
		ids = append(ids, ev.TaskID)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	var tasks []alertMailTask
	if err := o.db.selectIn(ctx, tx, &tasks, `SELECT t.id, t.account_id, acc.email AS account_name, t.alerts, t.escalation_rung,
		t.escalated_at, t.deadline_at, `+wentToHuman+` AS human_at, t.prompt, t.on_expiry
		FROM tasks t JOIN accounts acc ON acc.id = t.account_id WHERE t.id IN (?) ORDER BY t.id`, ids); err != nil {
		return nil, fmt.Errorf("read reminded tasks: %w", err)
	}
	members := map[string][]*arbiter.Membership{}
	var msgs []*arbiter.MailMessage
	for _, t := range tasks {
		if _, ok := members[t.AccountID]; !ok {
			var err error
			if members[t.AccountID], err = o.db.membersOf(ctx, tx, t.AccountID); err != nil {
				return nil, err
			}
		}
		mails, err := o.alertMails(ctx, tx, t, kinds[t.ID], members[t.AccountID])
		if err != nil {
			return nil, err
		}
		// A step's mail joins the task's trace, not the sweep's.
		for _, m := range mails {
			m.TraceParent = traceParents[t.ID]
		}
		msgs = append(msgs, mails...)
	}
	return writeOf(msgs, o.write), nil
}

// alertMails returns the mails of a reminder (kind MailReminder) or of the
// rung the task reached (MailEscalation), one to each member it tells
// (arbiter.AlertTargets): an "email:" rung's address is told only while
// it is a member's.
func (o *mailOutbox) alertMails(ctx context.Context, tx *Tx, t alertMailTask, kind string, members []*arbiter.Membership) ([]*arbiter.MailMessage, error) {
	var alerts arbiter.Alerts
	if err := json.Unmarshal([]byte(t.Alerts), &alerts); err != nil {
		return nil, fmt.Errorf("task %s: alerts: %w", t.ID, err)
	}
	deadline := nullTimestamp(t.DeadlineAt)
	mail := arbiter.AlertMail{Kind: kind, AccountID: t.AccountID, AccountName: t.AccountName, TaskID: t.ID, Prompt: t.Prompt,
		Waited: time.Duration(int64(tx.now)-t.HumanAt) * time.Millisecond}
	if o, err := parseOnExpiry(t.OnExpiry); err == nil {
		mail.Outcome = (&arbiter.Task{DeadlineAt: deadline, OnExpiry: o}).ExpiryOutcome()
	}
	var rung *arbiter.Rung
	memberAddress := false
	if kind == arbiter.MailEscalation {
		if mail.Escalation = arbiter.EscalationOf(alerts, int(t.EscalationRung.Int64), arbiter.Timestamp(t.EscalatedAt.Int64)); mail.Escalation == nil {
			return nil, nil
		}
		rung = &alerts.Escalation[t.EscalationRung.Int64-1]
		if email, ok := rung.Email(); ok {
			_, err := o.db.memberByEmail(ctx, tx, t.AccountID, email)
			if err != nil && arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
				return nil, err
			}
			memberAddress = err == nil
		}
	}
	var msgs []*arbiter.MailMessage
	for _, to := range arbiter.AlertTargets(rung, members, memberAddress) {
		m := mail
		m.To = to
		msg, err := arbiter.NewMail(kind, t.AccountID, to, t.ID, m)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// write stores new mails in tx, due at once, their content sealed, and has
// the deliverer woken after the commit. Mails that quote an account's
// callers count against its bound of the day; those past it are left out
// and logged.
func (o *mailOutbox) write(ctx context.Context, tx *Tx, msgs []*arbiter.MailMessage) error {
	msgs, err := o.bound(ctx, tx, msgs)
	if err != nil || len(msgs) == 0 {
		return err
	}
	tx.queue(o.wake)
	now := int64(tx.now)
	// The delivery joins the trace of the span that queued it.
	traceParent := telemetry.TraceParent(ctx)
	for start := 0; start < len(msgs); start += 100 {
		chunk := msgs[start:min(start+100, len(msgs))]
		var b strings.Builder
		b.WriteString(`INSERT INTO mail_messages (id, account_id, kind, recipient, task_id, data, status, next_attempt_at, created_at,
			traceparent) VALUES `)
		args := make([]any, 0, 10*len(chunk))
		for i, m := range chunk {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
			data, err := o.db.seal(string(m.Content), m.ID)
			if err != nil {
				return err
			}
			args = append(args, m.ID, m.AccountID, m.Kind, m.To, m.TaskID, data, arbiter.MailPending, now, now,
				nullText(cmp.Or(m.TraceParent, traceParent)))
		}
		if _, err := tx.ExecContext(ctx, o.db.rebind(b.String()), args...); err != nil {
			return fmt.Errorf("insert mail: %w", err)
		}
	}
	return nil
}

// addMailUsageSQL counts mails against an account's usage of a day and
// returns the count. Arguments: account, day, the number of mails.
const addMailUsageSQL = `INSERT INTO mail_usage (account_id, day, count) VALUES (?, ?, ?)
	ON CONFLICT (account_id, day) DO UPDATE SET count = mail_usage.count + excluded.count RETURNING count`

// bound returns msgs without the mails that quote an account's callers
// past its bound of the day, counting those it keeps: the counter's row
// is locked until tx ends, so transactions that mail at once take turns.
func (o *mailOutbox) bound(ctx context.Context, tx *Tx, msgs []*arbiter.MailMessage) ([]*arbiter.MailMessage, error) {
	wanted := map[string]int{}
	for _, m := range msgs {
		if arbiter.QuotesCaller(m.Kind) {
			wanted[m.AccountID]++
		}
	}
	if len(wanted) == 0 {
		return msgs, nil
	}
	day := int64(tx.now) / msPerDay
	room := make(map[string]int, len(wanted))
	// In one order, so that two transactions never wait on each other.
	for _, accountID := range slices.Sorted(maps.Keys(wanted)) {
		var count int
		if err := tx.QueryRowContext(ctx, o.db.rebind(addMailUsageSQL), accountID, day, wanted[accountID]).Scan(&count); err != nil {
			return nil, fmt.Errorf("count mail: %w", err)
		}
		room[accountID] = max(0, min(wanted[accountID], o.perDay-(count-wanted[accountID])))
	}
	kept := msgs[:0:0]
	dropped := map[string]int{}
	for _, m := range msgs {
		if arbiter.QuotesCaller(m.Kind) {
			if room[m.AccountID] == 0 {
				dropped[m.AccountID]++
				continue
			}
			room[m.AccountID]--
		}
		kept = append(kept, m)
	}
	for accountID, n := range dropped {
		o.db.log.Warn("an account's mails that quote its tasks are past today's bound; not written", "account", accountID,
			"dropped", n, "bound", o.perDay)
	}
	return kept, nil
}

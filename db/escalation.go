package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.AlertService = (*DB)(nil)

// Reminders and escalation: the sweep that fires each task's steps
// (arbiter.NextAlert). A task with a schedule holds in alert_at the
// earliest its next step may come due and in alert_step how many fired;
// the sweep reads the tasks waiting for a person whose alert_at passed,
// along the partial index tasks_alert_due, and claims each step by moving
// alert_step on from the value it read, with the task still waiting: two
// workers that read the same task both try, one wins, and a task decided
// meanwhile is left alone.

// dueAlertsSQL selects up to ? tasks waiting for a person whose next step
// may be due by now (an SQL expression: ? for the store's clock),
// earliest first. The partial index tasks_alert_due holds exactly these
// tasks in alert_at order, so the statement reads what it returns. On Postgres it locks them, skipping
// those another sweep holds.
func (d *DB) dueAlertsSQL(now string) string {
	return d.rebind(`SELECT id FROM task_states
		WHERE alert_at IS NOT NULL AND status = '` + arbiter.StatusHumanNeeded + `' AND alert_at <= ` + now + `
		ORDER BY alert_at LIMIT ? ` + d.sqlSkipLocked())
}

// alertTask is what the sweep reads of a task with a due step.
type alertTask struct {
	ID          string         `db:"id"`
	AccountID   string         `db:"account_id"`
	AccountName string         `db:"account_name"`
	Alerts      string         `db:"alerts"`
	Step        int            `db:"alert_step"`
	DeadlineAt  sql.NullInt64  `db:"deadline_at"`
	HumanAt     int64          `db:"human_at"`
	Prompt      string         `db:"prompt"`
	OnExpiry    sql.NullString `db:"on_expiry"`
	CallbackURL sql.NullString `db:"callback_url"`
	Notify      string         `db:"notify"`
}

// FireDueAlerts fires the steps due of up to max tasks, in one
// transaction (see arbiter.AlertService).
func (d *DB) FireDueAlerts(ctx context.Context, max int) (_ int, _ []arbiter.AlertMail, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if max <= 0 {
		return 0, nil, nil
	}
	now := d.nowMS()
	var (
		taken int
		mails []arbiter.AlertMail
	)
	err = d.transact(ctx, func(tx *Tx) error {
		taken, mails = 0, nil
		var ids []string
		if err := tx.SelectContext(ctx, &ids, d.dueAlertsSQL("?"), int64(now), max); err != nil {
			return fmt.Errorf("find due alerts: %w", err)
		} else if len(ids) == 0 {
			return nil
		}
		taken = len(ids)
		query, args, err := sqlx.In(`SELECT t.id, t.account_id, acc.email AS account_name, t.alerts, t.alert_step, t.deadline_at,
			`+wentToHuman+` AS human_at, t.prompt, t.on_expiry, t.callback_url, t.notify
			FROM tasks t JOIN accounts acc ON acc.id = t.account_id WHERE t.id IN (?) ORDER BY t.alert_at, t.id`, ids)
		if err != nil {
			return err
		}
		var tasks []alertTask
		if err := tx.SelectContext(ctx, &tasks, d.rebind(query), args...); err != nil {
			return fmt.Errorf("read due alerts: %w", err)
		}
		var (
			events  []arbiter.TaskEvent
			members = map[string][]*arbiter.Membership{}
		)
		for _, t := range tasks {
			var alerts arbiter.Alerts
			if err := json.Unmarshal([]byte(t.Alerts), &alerts); err != nil {
				return fmt.Errorf("task %s: alerts: %w", t.ID, err)
			}
			deadline := nullTimestamp(t.DeadlineAt)
			fire, next := arbiter.NextAlert(alerts, arbiter.Timestamp(t.HumanAt), deadline, t.Step, now)
			var nextAt sql.NullInt64
			if next != nil {
				nextAt = sql.NullInt64{Int64: int64(*next), Valid: true}
			}
			if fire == nil {
				// Not due yet (the first guess was early), or nothing left.
				if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET alert_at = ? WHERE id = ? AND alert_step = ?`),
					nextAt, t.ID, t.Step); err != nil {
					return fmt.Errorf("reschedule alerts: %w", err)
				}
				continue
			}
			// The claim: the step moves on from the value read, once.
			set, args := `alert_step = ?, alert_at = ?`, []any{t.Step + 1, nextAt}
			if fire.Rung > 0 {
				set, args = set+`, escalated_at = ?, escalation_rung = ?`, append(args, int64(now), fire.Rung)
			}
			res, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET `+set+`
				WHERE id = ? AND alert_step = ? AND status = '`+arbiter.StatusHumanNeeded+`'`), append(args, t.ID, t.Step)...)
			if err != nil {
				return fmt.Errorf("claim alert: %w", err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("claim alert: %w", err)
			} else if n == 0 {
				continue // another sweep fired it, or the task was decided
			}
			if _, ok := members[t.AccountID]; !ok {
				if members[t.AccountID], err = d.membersOf(ctx, tx, t.AccountID); err != nil {
					return err
				}
			}
			mail := arbiter.AlertMail{Kind: arbiter.AlertReminder, AccountID: t.AccountID, AccountName: t.AccountName,
				TaskID: t.ID, Prompt: t.Prompt, Waited: time.Duration(int64(now)-t.HumanAt) * time.Millisecond}
			if o, err := parseOnExpiry(t.OnExpiry); err == nil {
				mail.Outcome = (&arbiter.Task{DeadlineAt: deadline, OnExpiry: o}).ExpiryOutcome()
			}
			// Each step, reminder or rung, is published: Slack asks again.
			ev := arbiter.TaskEvent{TaskID: t.ID, AccountID: t.AccountID, Type: arbiter.EventTaskReminded, CallbackURL: t.CallbackURL.String}
			var to []string
			if fire.Rung == 0 {
				for _, m := range members[t.AccountID] {
					if arbiter.Can(m.Role, arbiter.ActionReview) {
						to = append(to, m.Email)
					}
				}
			} else {
				mail.Kind, mail.Escalation = arbiter.AlertEscalation, arbiter.EscalationOf(alerts, fire.Rung, now)
				ev.Type = arbiter.EventTaskEscalated
				rung := alerts.Escalation[fire.Rung-1]
				if role, ok := rung.Role(); ok {
					for _, m := range members[t.AccountID] {
						if m.Role == role {
							to = append(to, m.Email)
						}
					}
				} else if email, ok := rung.Email(); ok {
					to = append(to, email)
				}
			}
			events = append(events, ev)
			for _, addr := range to {
				m := mail
				m.To = addr
				mails = append(mails, m)
			}
		}
		return tx.publish(ctx, events...)
	})
	if err != nil {
		return 0, nil, err
	}
	return taken, mails, nil
}

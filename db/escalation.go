package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

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
	Alerts      string         `db:"alerts"`
	Step        int            `db:"alert_step"`
	DeadlineAt  sql.NullInt64  `db:"deadline_at"`
	HumanAt     int64          `db:"human_at"`
	CallbackURL sql.NullString `db:"callback_url"`
	// TraceParent is the create's trace context: what the step queues
	// joins the task's trace.
	TraceParent sql.NullString `db:"traceparent"`
}

// FireDueAlerts fires the steps due of up to max tasks, in one
// transaction (see arbiter.AlertService): each step is published, and the
// outboxes ask again in Slack and queue its mail.
func (d *DB) FireDueAlerts(ctx context.Context, max int) (_ int, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	if max <= 0 {
		return 0, nil
	}
	var taken int
	err = d.transact(ctx, func(tx *Tx) error {
		taken = 0
		var ids []string
		if err := tx.SelectContext(ctx, &ids, d.dueAlertsSQL("?"), int64(tx.now), max); err != nil {
			return fmt.Errorf("find due alerts: %w", err)
		} else if len(ids) == 0 {
			return nil
		}
		taken = len(ids)
		var tasks []alertTask
		if err := d.selectIn(ctx, tx, &tasks, `SELECT t.id, t.account_id, t.alerts, t.alert_step, t.deadline_at,
			`+wentToHuman+` AS human_at, t.callback_url,
			(SELECT s.traceparent FROM task_states s WHERE s.id = t.id) AS traceparent
			FROM tasks t WHERE t.id IN (?) ORDER BY t.alert_at, t.id`, ids); err != nil {
			return fmt.Errorf("read due alerts: %w", err)
		}
		var events []arbiter.TaskEvent
		for _, t := range tasks {
			ev, err := d.fireAlert(ctx, tx, t)
			if err != nil {
				return err
			} else if ev != nil {
				events = append(events, *ev)
			}
		}
		return tx.publish(ctx, events...)
	})
	if err != nil {
		return 0, err
	}
	return taken, nil
}

// fireAlert fires the task's step due at tx.now, if one is, and returns
// its event: task.reminded, or task.escalated for a rung, which marks the
// task escalated. The step is claimed by moving alert_step on from the
// value read, with the task still waiting, so it fires once however many
// sweeps read it; a task with no step due gets its next time instead.
func (d *DB) fireAlert(ctx context.Context, tx *Tx, t alertTask) (*arbiter.TaskEvent, error) {
	var alerts arbiter.Alerts
	if err := json.Unmarshal([]byte(t.Alerts), &alerts); err != nil {
		return nil, fmt.Errorf("task %s: alerts: %w", t.ID, err)
	}
	fire, next := arbiter.NextAlert(alerts, arbiter.Timestamp(t.HumanAt), nullTimestamp(t.DeadlineAt), t.Step, tx.now)
	var nextAt sql.NullInt64
	if next != nil {
		nextAt = sql.NullInt64{Int64: int64(*next), Valid: true}
	}
	if fire == nil {
		// Not due yet (the first guess was early), or nothing left.
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET alert_at = ? WHERE id = ? AND alert_step = ?`),
			nextAt, t.ID, t.Step); err != nil {
			return nil, fmt.Errorf("reschedule alerts: %w", err)
		}
		return nil, nil
	}
	set, args := `alert_step = ?, alert_at = ?`, []any{t.Step + 1, nextAt}
	ev := &arbiter.TaskEvent{TaskID: t.ID, AccountID: t.AccountID, Type: arbiter.EventTaskReminded, CallbackURL: t.CallbackURL.String,
		TraceParent: t.TraceParent.String}
	if fire.Rung > 0 {
		set, args = set+`, escalated_at = ?, escalation_rung = ?`, append(args, int64(tx.now), fire.Rung)
		ev.Type = arbiter.EventTaskEscalated
	}
	res, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET `+set+`
		WHERE id = ? AND alert_step = ? AND status = '`+arbiter.StatusHumanNeeded+`'`), append(args, t.ID, t.Step)...)
	if err != nil {
		return nil, fmt.Errorf("claim alert: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, fmt.Errorf("claim alert: %w", err)
	} else if n == 0 {
		return nil, nil // another sweep fired it, or the task was decided
	}
	return ev, nil
}

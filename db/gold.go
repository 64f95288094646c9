package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/arbiterhq/arbiter"
)

// Gold tasks (arbiter's gold.go) keep their verdict in gold_tasks, a side
// table written in the create's transaction only when a create carries
// one: the task row and every read of it stay as they were, so the
// verdict cannot reach a reader that did not ask for it (the desk, Slack,
// webhooks), and creates without gold pay nothing.

var _ arbiter.GoldService = (*DB)(nil)

// goldNormal is the SQL condition, on the tasks aliased t, of a task that
// is not gold: the desk's next task takes the rest of the queue or the
// gold tasks first, at the account's gold rate.
const goldNormal = ` AND NOT EXISTS (SELECT 1 FROM gold_tasks g WHERE g.task_id = t.id)`

// storeGold records, inside tx, the gold verdict of each new task that
// has one, and hands the task to people at once (the agent never decides
// a gold task): human_needed, with the task.human_needed event and Slack
// question any task gets there.
func (d *DB) storeGold(ctx context.Context, tx *Tx, creates []newCreate) error {
	var events []arbiter.TaskEvent
	for _, c := range creates {
		if c.gold == "" {
			continue
		}
		t := c.task
		if _, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO gold_tasks (task_id, account_id, verdict) VALUES (?, ?, ?)`),
			t.ID, t.AccountID, c.gold); err != nil {
			return fmt.Errorf("store gold verdict: %w", err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET status = ? WHERE id = ?`), arbiter.StatusHumanNeeded, t.ID); err != nil {
			return fmt.Errorf("hand gold task to people: %w", err)
		}
		t.Status = arbiter.StatusHumanNeeded
		events = append(events, arbiter.TaskEvent{TaskID: t.ID, AccountID: t.AccountID, Type: arbiter.EventTaskHumanNeeded, CallbackURL: c.callbackURL})
	}
	return tx.publish(ctx, events...)
}

// goldOf returns, inside tx, the task's gold verdict, "" when it has none.
func (d *DB) goldOf(ctx context.Context, tx *Tx, taskID string) (string, error) {
	var verdict string
	err := tx.GetContext(ctx, &verdict, d.rebind(`SELECT verdict FROM gold_tasks WHERE task_id = ?`), taskID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("find gold verdict: %w", err)
	}
	return verdict, nil
}

// goldFirst draws, inside tx, whether the person's ask for the next task
// looks for a gold task first, at the account's gold rate.
func (d *DB) goldFirst(ctx context.Context, tx *Tx, accountID string) (bool, error) {
	var rate float64
	if err := tx.GetContext(ctx, &rate, d.rebind(`SELECT gold_rate FROM accounts WHERE id = ?`), accountID); err != nil {
		return false, notFound(err, "No such account.")
	}
	return arbiter.GoldFirst(rate, d.goldDraw()), nil
}

// GoldVerdicts returns, by task id, the gold verdicts of the account's
// tasks among ids that carry one.
func (d *DB) GoldVerdicts(ctx context.Context, accountID string, ids []string) (_ map[string]string, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := d.queryIn(ctx, d.db, `SELECT task_id, verdict FROM gold_tasks WHERE account_id = ? AND task_id IN (?)`, accountID, ids)
	if err != nil {
		return nil, fmt.Errorf("find gold verdicts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, verdict string
		if err := rows.Scan(&id, &verdict); err != nil {
			return nil, fmt.Errorf("find gold verdicts: %w", err)
		}
		out[id] = verdict
	}
	return out, rows.Err()
}

// ListGoldAnswers returns the reviewers' answers to the account's gold
// tasks completed at or after since, the latest maxAgreementTasks of them.
func (d *DB) ListGoldAnswers(ctx context.Context, accountID string, since arbiter.Timestamp) (_ []arbiter.GoldAnswer, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	rows, err := d.db.QueryContext(ctx, d.rebind(`SELECT g.task_id, a.reviewer, a.verdict, g.verdict
		FROM gold_tasks g JOIN tasks t ON t.id = g.task_id JOIN attempts a ON a.task_id = g.task_id
		WHERE g.account_id = ? AND t.status = ? AND t.completed_at >= ?
		AND a.tier = ? AND a.verdict IS NOT NULL AND a.reviewer IS NOT NULL
		ORDER BY t.completed_at DESC, a.id LIMIT `+fmt.Sprint(maxAgreementTasks)),
		accountID, arbiter.StatusCompleted, int64(since), arbiter.TierHuman)
	if err != nil {
		return nil, fmt.Errorf("list gold answers: %w", err)
	}
	defer rows.Close()
	var out []arbiter.GoldAnswer
	for rows.Next() {
		var a arbiter.GoldAnswer
		if err := rows.Scan(&a.TaskID, &a.Email, &a.Verdict, &a.Gold); err != nil {
			return nil, fmt.Errorf("list gold answers: %w", err)
		}
		a.Email = strings.ToLower(a.Email)
		out = append(out, a)
	}
	return out, rows.Err()
}

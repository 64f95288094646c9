package db

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.StatsService = (*DB)(nil)

// wentToHuman is the SQL expression, on the tasks aliased t, of when the
// task went to a human: its last agent attempt's end, else its creation.
const wentToHuman = `COALESCE((SELECT max(a.finished_at) FROM attempts a WHERE a.task_id = t.id AND a.tier = 'agent'), t.created_at)`

// ListDecisions returns the account's human decisions since the instant,
// newest first, with the agent's last verdict on each task, from the read
// pool (readPool).
func (d *DB) ListDecisions(ctx context.Context, accountID string, since arbiter.Timestamp) (_ []arbiter.DecisionRecord, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	rows, err := d.readPool().QueryContext(ctx, d.rebind(`SELECT h.reviewer, h.verdict, h.finished_at, `+wentToHuman+`,
		(SELECT a.verdict FROM attempts a WHERE a.task_id = t.id AND a.tier = 'agent' ORDER BY a.id DESC LIMIT 1)
		FROM attempts h JOIN tasks t ON t.id = h.task_id
		WHERE t.account_id = ? AND h.tier = 'human' AND h.finished_at >= ? AND h.reviewer IS NOT NULL AND h.verdict IS NOT NULL
		ORDER BY h.finished_at DESC LIMIT ?`), accountID, int64(since), arbiter.MaxStatsRows+1)
	if err != nil {
		return nil, fmt.Errorf("list decisions: %w", err)
	}
	defer rows.Close()
	list := []arbiter.DecisionRecord{}
	for rows.Next() {
		var r arbiter.DecisionRecord
		var agent sql.NullString
		if err := rows.Scan(&r.Reviewer, &r.Verdict, &r.Decided, &r.Waiting, &agent); err != nil {
			return nil, fmt.Errorf("scan decision: %w", err)
		}
		if agent.Valid {
			r.Agent = &agent.String
		}
		list = append(list, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list decisions: %w", err)
	}
	return list, nil
}

// ListWaiting returns when each of the account's waiting tasks went to a
// human, and now by the store's clock, which stamped those times, from the
// read pool (readPool).
func (d *DB) ListWaiting(ctx context.Context, accountID string) (_ []arbiter.WaitingTask, _ arbiter.Timestamp, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	rows, err := d.readPool().QueryContext(ctx, d.rebind(`SELECT `+wentToHuman+`
		FROM tasks t WHERE t.account_id = ? AND t.status = 'human_needed'
		ORDER BY t.created_at LIMIT ?`), accountID, arbiter.MaxStatsRows+1)
	if err != nil {
		return nil, 0, fmt.Errorf("list waiting: %w", err)
	}
	defer rows.Close()
	list := []arbiter.WaitingTask{}
	for rows.Next() {
		var w arbiter.WaitingTask
		if err := rows.Scan(&w.Since); err != nil {
			return nil, 0, fmt.Errorf("scan waiting: %w", err)
		}
		list = append(list, w)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list waiting: %w", err)
	}
	return list, d.nowMS(), nil
}

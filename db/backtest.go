package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.BacktestService = (*DB)(nil)

// backtestCasesSQL reads the account's newest labels of the agent tier's
// answers (labelled_pairs) along labelled_pairs_account; callers add the
// task type's condition and the order.
const backtestCasesSQL = `SELECT task_id, task_type, source, model, version, confidence, agent_verdict, human_verdict,
	audit, weight, created_at, labelled_at FROM labelled_pairs WHERE account_id = ? AND created_at > ?`

// BacktestCases returns the account's labelled tasks f selects, the newest
// first, with their attempts, read in one snapshot. Returns EINVALID for a
// filter arbiter.BacktestFilter.Validate refuses.
func (d *DB) BacktestCases(ctx context.Context, accountID string, f arbiter.BacktestFilter) (_ []arbiter.BacktestCase, err error) {
	if err := f.Validate(); err != nil {
		return nil, err
	}
	ctx, end := d.begin(ctx)
	defer end(&err)
	since := arbiter.TimestampOf(d.now().Add(-f.Since))
	query, args := backtestCasesSQL, []any{accountID, int64(since)}
	if f.TaskType != "" {
		query += ` AND task_type = ?`
		args = append(args, f.TaskType)
	}
	query += ` ORDER BY created_at DESC, task_id DESC LIMIT ?`
	args = append(args, f.Limit)
	var out []arbiter.BacktestCase
	err = d.transactRead(ctx, func(tx *Tx) error {
		rows, err := tx.QueryContext(ctx, d.rebind(query), args...)
		if err != nil {
			return fmt.Errorf("read backtest cases: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			p := arbiter.LabelledPair{AccountID: accountID}
			var audit int
			if err := rows.Scan(&p.TaskID, &p.TaskType, &p.Source, &p.Model, &p.Version, &p.Confidence, &p.AgentVerdict,
				&p.HumanVerdict, &audit, &p.Weight, &p.CreatedAt, &p.LabelledAt); err != nil {
				return fmt.Errorf("read backtest cases: %w", err)
			}
			p.Audit = audit == 1
			out = append(out, arbiter.BacktestCase{Pair: p})
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read backtest cases: %w", err)
		}
		rows.Close()
		for i := range out {
			t, err := d.findTask(ctx, tx, accountID, out[i].Pair.TaskID)
			if err != nil {
				return err
			}
			out[i].Task = t
		}
		return nil
	})
	return out, err
}

// SaveBacktestRun stores a finished run and its calls in one transaction
// and returns its new id. It touches no task.
func (d *DB) SaveBacktestRun(ctx context.Context, run *arbiter.BacktestRun) (_ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	report, err := json.Marshal(run.Report)
	if err != nil {
		return "", fmt.Errorf("save backtest run: %w", err)
	}
	id := arbiter.NewID("btr_", 8)
	f := run.Filter
	err = d.transact(ctx, func(tx *Tx) error {
		_, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO backtest_runs (id, account_id, verifier, model, version, task_type,
			since_ms, task_limit, started_at, finished_at, report) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			id, run.AccountID, f.Verifier, run.Report.Model, run.Report.Version, f.TaskType, f.Since.Milliseconds(), f.Limit,
			int64(run.StartedAt), int64(run.FinishedAt), string(report))
		if err != nil {
			return fmt.Errorf("save backtest run: %w", err)
		}
		for i, c := range run.Calls {
			_, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO backtest_calls (run_id, position, task_id, verdict, confidence,
				input_tokens, output_tokens, cost, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
				id, i, c.TaskID, c.Verdict, c.Confidence, c.InputTokens, c.OutputTokens, c.Cost, c.Error)
			if err != nil {
				return fmt.Errorf("save backtest call: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

var errBacktestNotFound = arbiter.Errorf(arbiter.ENOTFOUND, "Backtest run not found.")

// FindBacktestRun returns the account's run with its calls in their
// order. Returns ENOTFOUND for an unknown id or another account's run.
func (d *DB) FindBacktestRun(ctx context.Context, accountID, id string) (_ *arbiter.BacktestRun, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	run := &arbiter.BacktestRun{ID: id, AccountID: accountID, Calls: []arbiter.BacktestCall{}}
	err = d.transactRead(ctx, func(tx *Tx) error {
		var report string
		var sinceMS int64
		err := tx.QueryRowContext(ctx, d.rebind(`SELECT verifier, task_type, since_ms, task_limit, started_at, finished_at, report
			FROM backtest_runs WHERE id = ? AND account_id = ?`), id, accountID).Scan(&run.Filter.Verifier, &run.Filter.TaskType,
			&sinceMS, &run.Filter.Limit, &run.StartedAt, &run.FinishedAt, &report)
		if errors.Is(err, sql.ErrNoRows) {
			return errBacktestNotFound
		} else if err != nil {
			return fmt.Errorf("find backtest run: %w", err)
		}
		run.Filter.Since = time.Duration(sinceMS) * time.Millisecond
		if err := json.Unmarshal([]byte(report), &run.Report); err != nil {
			return fmt.Errorf("find backtest run: %w", err)
		}
		rows, err := tx.QueryContext(ctx, d.rebind(`SELECT task_id, verdict, confidence, input_tokens, output_tokens, cost, error
			FROM backtest_calls WHERE run_id = ? ORDER BY position`), id)
		if err != nil {
			return fmt.Errorf("find backtest calls: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var c arbiter.BacktestCall
			if err := rows.Scan(&c.TaskID, &c.Verdict, &c.Confidence, &c.InputTokens, &c.OutputTokens, &c.Cost, &c.Error); err != nil {
				return fmt.Errorf("find backtest calls: %w", err)
			}
			run.Calls = append(run.Calls, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return run, nil
}

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
		return d.insertBacktestCalls(ctx, tx, id, run.Calls)
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// insertBacktestCalls stores the calls of the run id in their order.
func (d *DB) insertBacktestCalls(ctx context.Context, tx *Tx, id string, calls []arbiter.BacktestCall) error {
	for i, c := range calls {
		_, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO backtest_calls (run_id, position, task_id, verdict, confidence,
			input_tokens, output_tokens, cost, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
			id, i, c.TaskID, c.Verdict, c.Confidence, c.InputTokens, c.OutputTokens, c.Cost, c.Error)
		if err != nil {
			return fmt.Errorf("save backtest call: %w", err)
		}
	}
	return nil
}

// StartBacktestRun stores run as running and returns its new id, unless
// the account has a run running that started within
// arbiter.MaxBacktestRunTime (arbiter.ErrBacktestRunning). On Postgres
// the account's row is locked, so that two starts at once in two
// processes are one run.
func (d *DB) StartBacktestRun(ctx context.Context, run *arbiter.BacktestRun) (_ string, err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	id := arbiter.NewID("btr_", 8)
	f := run.Filter
	err = d.transact(ctx, func(tx *Tx) error {
		if d.locksRows() {
			if _, err := tx.ExecContext(ctx, `SELECT id FROM accounts WHERE id = $1 FOR UPDATE`, run.AccountID); err != nil {
				return fmt.Errorf("lock account: %w", err)
			}
		}
		after := arbiter.TimestampOf(d.now().Add(-arbiter.MaxBacktestRunTime))
		var running int
		if err := tx.QueryRowContext(ctx, d.rebind(`SELECT COUNT(*) FROM backtest_runs WHERE account_id = ? AND status = ? AND started_at > ?`),
			run.AccountID, arbiter.BacktestRunning, int64(after)).Scan(&running); err != nil {
			return fmt.Errorf("start backtest run: %w", err)
		}
		if running > 0 {
			return arbiter.ErrBacktestRunning
		}
		_, err := tx.ExecContext(ctx, d.rebind(`INSERT INTO backtest_runs (id, account_id, verifier, model, version, task_type,
			since_ms, task_limit, started_at, finished_at, report, status) VALUES (?, ?, ?, '', '', ?, ?, ?, ?, 0, '{}', ?)`),
			id, run.AccountID, f.Verifier, f.TaskType, f.Since.Milliseconds(), f.Limit, int64(run.StartedAt), arbiter.BacktestRunning)
		if err != nil {
			return fmt.Errorf("start backtest run: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// FinishBacktestRun stores the running run's calls, report and finish in
// one transaction and marks it done. Returns ENOTFOUND for a run that is
// not the account's or not running.
func (d *DB) FinishBacktestRun(ctx context.Context, run *arbiter.BacktestRun) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	report, err := json.Marshal(run.Report)
	if err != nil {
		return fmt.Errorf("finish backtest run: %w", err)
	}
	return d.transact(ctx, func(tx *Tx) error {
		res, err := tx.ExecContext(ctx, d.rebind(`UPDATE backtest_runs SET status = ?, model = ?, version = ?, finished_at = ?, report = ?
			WHERE id = ? AND account_id = ? AND status = ?`), arbiter.BacktestDone, run.Report.Model, run.Report.Version,
			int64(run.FinishedAt), string(report), run.ID, run.AccountID, arbiter.BacktestRunning)
		if err != nil {
			return fmt.Errorf("finish backtest run: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("finish backtest run: %w", err)
		} else if n == 0 {
			return errBacktestNotFound
		}
		return d.insertBacktestCalls(ctx, tx, run.ID, run.Calls)
	})
}

// ListBacktestRuns returns the account's newest limit runs, the newest
// first, without their calls.
func (d *DB) ListBacktestRuns(ctx context.Context, accountID string, limit int) (_ []arbiter.BacktestRun, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	var out []arbiter.BacktestRun
	err = d.transactRead(ctx, func(tx *Tx) error {
		rows, err := tx.QueryContext(ctx, d.rebind(`SELECT id, status, verifier, task_type, since_ms, task_limit, started_at, finished_at, report
			FROM backtest_runs WHERE account_id = ? ORDER BY started_at DESC, id DESC LIMIT ?`), accountID, limit)
		if err != nil {
			return fmt.Errorf("list backtest runs: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			run := arbiter.BacktestRun{AccountID: accountID}
			if err := scanBacktestRun(rows, &run); err != nil {
				return fmt.Errorf("list backtest runs: %w", err)
			}
			out = append(out, run)
		}
		return rows.Err()
	})
	return out, err
}

// scanBacktestRun reads a run's row: id, status, verifier, task_type,
// since_ms, task_limit, started_at, finished_at, report.
func scanBacktestRun(row interface{ Scan(...any) error }, run *arbiter.BacktestRun) error {
	var report string
	var sinceMS int64
	if err := row.Scan(&run.ID, &run.Status, &run.Filter.Verifier, &run.Filter.TaskType, &sinceMS, &run.Filter.Limit,
		&run.StartedAt, &run.FinishedAt, &report); err != nil {
		return err
	}
	run.Filter.Since = time.Duration(sinceMS) * time.Millisecond
	return json.Unmarshal([]byte(report), &run.Report)
}

var errBacktestNotFound = arbiter.Errorf(arbiter.ENOTFOUND, "Backtest run not found.")

// FindBacktestRun returns the account's run with its calls in their
// order. Returns ENOTFOUND for an unknown id or another account's run.
func (d *DB) FindBacktestRun(ctx context.Context, accountID, id string) (_ *arbiter.BacktestRun, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	run := &arbiter.BacktestRun{ID: id, AccountID: accountID, Calls: []arbiter.BacktestCall{}}
	err = d.transactRead(ctx, func(tx *Tx) error {
		err := scanBacktestRun(tx.QueryRowContext(ctx, d.rebind(`SELECT id, status, verifier, task_type, since_ms, task_limit,
			started_at, finished_at, report FROM backtest_runs WHERE id = ? AND account_id = ?`), id, accountID), run)
		if errors.Is(err, sql.ErrNoRows) {
			return errBacktestNotFound
		} else if err != nil {
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

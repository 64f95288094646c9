package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/arbiterhq/arbiter"
)

// maxBatchAttempts bounds how often a batch is tried again after a create
// of another transaction stored one of its idempotency keys first.
const maxBatchAttempts = 3

// createBatch stores creates of one account in one transaction and
// answers each in order: the cap admits as many new tasks as fit, in
// order; a create whose idempotency key the account used before, or an
// earlier create of the batch carries, is a replay of that create or a
// mismatch.
func (d *DB) createBatch(ctx context.Context, accountID string, creates []newCreate) ([]arbiter.TaskCreated, error) {
	for attempt := 1; ; attempt++ {
		out, err := d.tryBatch(ctx, accountID, creates)
		if keyTaken(err) && attempt < maxBatchAttempts {
			continue // the key is stored now: the next try replays it
		}
		return out, err
	}
}

// earlierKey is an idempotency key the account used before.
type earlierKey struct{ fingerprint, taskID string }

// addUsageSQL counts tasks against the account's usage of a day.
// Arguments: account, day, the number of tasks.
const addUsageSQL = `INSERT INTO daily_usage (account_id, day, count) VALUES (?, ?, ?)
	ON CONFLICT (account_id, day) DO UPDATE SET count = daily_usage.count + excluded.count`

// batchStmts are the prepared statements of a batch, by query text.
type batchStmts map[string]*sql.Stmt

// batchStmts prepares (or finds prepared) the batch's statements before
// its transaction begins, as stmt asks.
func (d *DB) batchStmts(ctx context.Context) (batchStmts, error) {
	queries := []string{d.sqlUsage(), addUsageSQL, insertTaskSQL, insertBodySQL, insertKeySQL}
	if d.takesArrays() {
		queries = []string{d.sqlUsage(), addUsageSQL, insertBatchSQL}
	}
	stmts := make(batchStmts, len(queries))
	for _, q := range queries {
		s, err := d.stmt(ctx, q)
		if err != nil {
			return nil, err
		}
		stmts[q] = s
	}
	return stmts, nil
}

// in returns the prepared statement of query bound to tx.
func (s batchStmts) in(ctx context.Context, tx *Tx, query string) *sql.Stmt {
	return tx.StmtContext(ctx, s[query])
}

// tryBatch is one try of createBatch: one transaction.
func (d *DB) tryBatch(ctx context.Context, accountID string, creates []newCreate) ([]arbiter.TaskCreated, error) {
	now := creates[0].task.CreatedAt
	day := int64(now) / msPerDay
	out := make([]arbiter.TaskCreated, len(creates))
	stmts, err := d.batchStmts(ctx)
	if err != nil {
		return nil, err
	}
	err = d.transact(ctx, func(tx *Tx) error {
		// The account's usage of the day first: its other creates wait
		// here, so the keys read next include all they stored.
		var used, capacity int
		if err := stmts.in(ctx, tx, d.sqlUsage()).QueryRowContext(ctx, accountID, day, accountID, d.cap).
			Scan(&used, &capacity); err != nil {
			return fmt.Errorf("read usage: %w", err)
		}
		earlier, err := d.earlierKeys(ctx, tx, accountID, creates)
		if err != nil {
			return err
		}
		admitted, replays := admitBatch(creates, earlier, used, capacity, out)
		if len(admitted) > 0 {
			if err := d.insertBatch(ctx, tx, stmts, admitted); err != nil {
				return err
			}
			if _, err := stmts.in(ctx, tx, addUsageSQL).ExecContext(ctx, accountID, day, len(admitted)); err != nil {
				return fmt.Errorf("count tasks: %w", err)
			}
			if err := d.storeActions(ctx, tx, admitted); err != nil {
				return err
			}
			if err := d.storeReviews(ctx, tx, admitted); err != nil {
				return err
			}
			if err := d.storeAlerts(ctx, tx, admitted); err != nil {
				return err
			}
			if err := d.storeGold(ctx, tx, admitted); err != nil {
				return err
			}
			tx.announceCreated()
		}
		return d.readReplays(ctx, tx, accountID, replays, out)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// admitBatch sorts out, in order, which creates of a batch are stored: a
// create whose idempotency key the account used before is replayed, or
// refused when its request differs; a key used twice in the batch replays
// its first use; the rest are admitted while the day's usage leaves room
// under capacity. It fills out's refusals and the admitted creates' tasks,
// and returns the admitted creates and, by task id, the creates that
// replay it.
func admitBatch(creates []newCreate, earlier map[string]earlierKey, used, capacity int, out []arbiter.TaskCreated) ([]newCreate, map[string][]int) {
	var admitted []newCreate
	replays := map[string][]int{} // task id → the creates that replay it
	firstUse := map[string]int{}  // key → the create of the batch that used it first
	for i, c := range creates {
		if c.key != "" {
			if k, ok := earlier[c.key]; ok {
				if k.fingerprint != c.fingerprint {
					out[i].Err = errKeyMismatch
				} else {
					replays[k.taskID] = append(replays[k.taskID], i)
				}
				continue
			}
			if first, ok := firstUse[c.key]; ok {
				switch {
				case creates[first].fingerprint != c.fingerprint:
					out[i].Err = errKeyMismatch
				case out[first].Err != nil:
					out[i].Err = out[first].Err
				default:
					t := *out[first].Task
					out[i] = arbiter.TaskCreated{Task: &t, Replayed: true}
				}
				continue
			}
			firstUse[c.key] = i
		}
		if used+len(admitted) >= capacity {
			out[i].Err = capUsedUp(creates[0].task.CreatedAt)
			continue
		}
		admitted = append(admitted, c)
		out[i].Task = c.task
	}
	return admitted, replays
}

// earlierKeys returns the idempotency keys of creates that the account
// has used before.
func (d *DB) earlierKeys(ctx context.Context, tx *Tx, accountID string, creates []newCreate) (map[string]earlierKey, error) {
	var keys []string
	for _, c := range creates {
		if c.key != "" {
			keys = append(keys, c.key)
		}
	}
	earlier := map[string]earlierKey{}
	if len(keys) == 0 {
		return earlier, nil
	}
	rows, err := d.queryIn(ctx, tx, `SELECT idempotency_key, fingerprint, task_id FROM idempotency_keys
		WHERE account_id = ? AND idempotency_key IN (?)`, accountID, keys)
	if err != nil {
		return nil, fmt.Errorf("find idempotency keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var k earlierKey
		if err := rows.Scan(&key, &k.fingerprint, &k.taskID); err != nil {
			return nil, fmt.Errorf("find idempotency keys: %w", err)
		}
		earlier[key] = k
	}
	return earlier, rows.Err()
}

// insertBatchSQL inserts a batch's tasks and stores their idempotency
// keys, one statement on Postgres. Arguments: the arrays of createArrays,
// then the pending status.
const insertBatchSQL = `WITH ` + createInputSQL + `, created AS (
		` + insertInputTasksSQL + `input i
		RETURNING id
	), ` + insertInputBodiesSQL + `
	INSERT INTO idempotency_keys (account_id, idempotency_key, fingerprint, task_id, created_at, expires_at)
	SELECT i.account_id, i.idempotency_key, i.fingerprint, i.id, i.created_at, i.expires_at
	FROM input i JOIN created c ON c.id = i.id WHERE i.idempotency_key <> ''`

// insertTaskSQL, insertBodySQL and insertKeySQL insert one task's state,
// its body and one idempotency key.
const (
	insertTaskSQL = `INSERT INTO task_states (id, account_id, status, task_type, source, touchpoint,
		confidence_threshold, created_at, run_after, deadline_at, callback_url, audit_rate, on_expiry, notify, traceparent)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertBodySQL = `INSERT INTO task_bodies (id, prompt, allowed_verdicts, context, display) VALUES (?, ?, ?, ?, ?)`
	insertKeySQL  = `INSERT INTO idempotency_keys (account_id, idempotency_key, fingerprint, task_id,
		created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`
)

// insertBatch inserts the tasks of creates and stores their idempotency
// keys, inside tx: one statement on Postgres, one insert per row on
// SQLite, where a statement costs no round trip.
func (d *DB) insertBatch(ctx context.Context, tx *Tx, stmts batchStmts, creates []newCreate) error {
	if d.takesArrays() {
		args := append(createArrays(creates), arbiter.StatusPending)
		if _, err := stmts.in(ctx, tx, insertBatchSQL).ExecContext(ctx, args...); err != nil {
			return fmt.Errorf("insert tasks: %w", err)
		}
		return nil
	}
	insertTask, insertBody, insertKey := stmts.in(ctx, tx, insertTaskSQL), stmts.in(ctx, tx, insertBodySQL), stmts.in(ctx, tx, insertKeySQL)
	for _, c := range creates {
		t := c.task
		if _, err := insertTask.ExecContext(ctx, t.ID, t.AccountID, t.Status, t.TaskType, t.Source, t.Touchpoint,
			t.ConfidenceThreshold, int64(t.CreatedAt), int64(t.CreatedAt),
			nullTime(t.DeadlineAt), nullText(c.callbackURL), t.AuditRate, nullText(c.onExpiry), c.notify,
			nullText(c.traceParent)); err != nil {
			return fmt.Errorf("insert task: %w", err)
		}
		if _, err := insertBody.ExecContext(ctx, t.ID, t.Prompt, c.verdicts, nullJSON(t.Context), nullText(c.display)); err != nil {
			return fmt.Errorf("insert task body: %w", err)
		}
		if c.key == "" {
			continue
		}
		if _, err := insertKey.ExecContext(ctx, t.AccountID, c.key, c.fingerprint, t.ID,
			int64(t.CreatedAt), int64(c.expiresAt)); err != nil {
			return fmt.Errorf("insert idempotency key: %w", err)
		}
	}
	return nil
}

// readReplays sets the answers of the creates that replay an earlier task
// to that task as it is now, read inside tx.
func (d *DB) readReplays(ctx context.Context, tx *Tx, accountID string, replays map[string][]int, out []arbiter.TaskCreated) error {
	if len(replays) == 0 {
		return nil
	}
	ids := make([]string, 0, len(replays))
	for id := range replays {
		ids = append(ids, id)
	}
	rows, err := d.queryIn(ctx, tx, tasksWithAttemptsSQL+` WHERE t.account_id = ? AND t.id IN (?) ORDER BY t.id, a.id`, accountID, ids)
	if err != nil {
		return fmt.Errorf("find replayed tasks: %w", err)
	}
	tasks, err := scanTasksWithAttempts(rows)
	if err != nil {
		return fmt.Errorf("find replayed tasks: %w", err)
	}
	for _, t := range tasks {
		for n, i := range replays[t.ID] {
			task := t
			if n > 0 {
				cp := *t
				task = &cp
			}
			out[i] = arbiter.TaskCreated{Task: task, Replayed: true}
		}
		delete(replays, t.ID)
	}
	for _, creates := range replays {
		for _, i := range creates {
			out[i].Err = errKeyInFlight // a key without its task: never, with the foreign key
		}
	}
	return nil
}

// storeAlerts records, inside tx, the reminders and escalation of each
// new task that has them, and the earliest its first step may come due
// (arbiter.Alerts.Earliest): as for reviews, the inserts stay as they
// were, and these tasks get one more statement each.
func (d *DB) storeAlerts(ctx context.Context, tx *Tx, creates []newCreate) error {
	for _, c := range creates {
		a := c.task.Alerts
		if a.IsZero() {
			continue
		}
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET alerts = ?, alert_at = ? WHERE id = ?`),
			string(b), int64(a.Earliest(c.task.CreatedAt)), c.task.ID); err != nil {
			return fmt.Errorf("store reminders and escalation: %w", err)
		}
	}
	return nil
}

// storeReviews records, inside tx, the review requirement of each new
// task that has one: a few creates ask for it, so the inserts stay as
// they were and these tasks get one more statement each.
func (d *DB) storeReviews(ctx context.Context, tx *Tx, creates []newCreate) error {
	for _, c := range creates {
		r := c.task.Review
		if r == nil {
			continue
		}
		if _, err := tx.ExecContext(ctx, d.rebind(`UPDATE task_states SET review_rule = ?, reviews_required = ?, votes_open = ?
			WHERE id = ?`), string(arbiter.MarshalRequirement(*r)), r.ReviewsRequired, r.ReviewsRequired, c.task.ID); err != nil {
			return fmt.Errorf("store review requirement: %w", err)
		}
	}
	return nil
}

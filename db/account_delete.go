package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter"
)

// accountDeletes empties an account, children before their parents so that
// every foreign key holds at each step, whether or not it cascades. Each
// statement takes the account's id once. The skips of the account's tasks
// go too, in whichever session they were made.
var accountDeletes = []struct{ what, query string }{
	{"webhook attempts", `DELETE FROM webhook_attempts WHERE message_id IN (SELECT id FROM webhook_messages WHERE account_id = ?)`},
	{"webhook messages", `DELETE FROM webhook_messages WHERE account_id = ?`},
	{"webhook endpoints", `DELETE FROM webhook_endpoints WHERE account_id = ?`},
	{"callback secret", `DELETE FROM webhook_callback_secrets WHERE account_id = ?`},
	{"Slack messages", `DELETE FROM slack_messages WHERE account_id = ?`},
	{"Slack channels", `DELETE FROM slack_channels WHERE account_id = ?`},
	{"chat link offers", `DELETE FROM chat_link_offers WHERE account_id = ?`},
	{"mail", `DELETE FROM mail_messages WHERE account_id = ?`},
	{"mail usage", `DELETE FROM mail_usage WHERE account_id = ?`},
	{"Teams messages", `DELETE FROM teams_messages WHERE account_id = ?`},
	{"Teams turns", `DELETE FROM teams_turns WHERE account_id = ?`},
	{"Teams conversations", `DELETE FROM teams_conversations WHERE account_id = ?`},
	{"Teams connection", `DELETE FROM teams_connections WHERE account_id = ?`},
	{"Slack connection", `DELETE FROM slack_connections WHERE account_id = ?`},
	{"decision links", `DELETE FROM decision_links WHERE account_id = ?`},
	{"idempotency keys", `DELETE FROM idempotency_keys WHERE account_id = ?`},
	{"labelled pairs", `DELETE FROM labelled_pairs WHERE account_id = ?`},
	{"verifier pairs", `DELETE FROM verifier_pairs WHERE account_id = ?`},
	{"backtest calls", `DELETE FROM backtest_calls WHERE run_id IN (SELECT id FROM backtest_runs WHERE account_id = ?)`},
	{"backtest runs", `DELETE FROM backtest_runs WHERE account_id = ?`},
	{"calibration drifts", `DELETE FROM calibration_drifts WHERE account_id = ?`},
	{"policy drifts", `DELETE FROM policy_drifts WHERE account_id = ?`},
	{"attempts", `DELETE FROM attempts WHERE task_id IN (SELECT id FROM tasks WHERE account_id = ?)`},
	{"demo verdicts", `DELETE FROM demo_verdicts WHERE task_id IN (SELECT id FROM tasks WHERE account_id = ?)`},
	{"gold tasks", `DELETE FROM gold_tasks WHERE account_id = ?`},
	{"review slots", `DELETE FROM review_slots WHERE task_id IN (SELECT id FROM tasks WHERE account_id = ?)`},
	{"skips", `DELETE FROM session_skips WHERE task_id IN (SELECT id FROM tasks WHERE account_id = ?)`},
	{"receipts", `DELETE FROM receipts WHERE account_id = ?`},
	{"receipt chain", `DELETE FROM receipt_chains WHERE account_id = ?`},
	{"executions", `DELETE FROM task_executions WHERE account_id = ?`},
	{"task bodies", `DELETE FROM task_bodies WHERE id IN (SELECT id FROM task_states WHERE account_id = ?)`},
	{"tasks", `DELETE FROM task_states WHERE account_id = ?`},
	{"usage", `DELETE FROM daily_usage WHERE account_id = ?`},
	{"policies", `DELETE FROM policies WHERE account_id = ?`},
	{"API keys", `DELETE FROM api_keys WHERE account_id = ?`},
	{"audit log", `DELETE FROM audit_events WHERE account_id = ?`},
	{"invitations", `DELETE FROM invitations WHERE account_id = ?`},
	{"digests", `DELETE FROM digests WHERE account_id = ?`},
	{"memberships", `DELETE FROM memberships WHERE account_id = ?`},
	// A member's session falls back to their other accounts, or to none.
	{"sessions", `UPDATE sessions SET account_id = NULL WHERE account_id = ?`},
	{"account", `DELETE FROM accounts WHERE id = ?`},
}

// DeleteAccount deletes the account and all it holds in one transaction,
// when by's role may and confirm names it (arbiter.CheckAccountDeletion).
// On Postgres the account's row is locked first: a create with one of its
// keys waits for the deletion and then fails its foreign key
// (errAccountDeleted). Its tasks are locked next (lockAccountTasks), so no
// attempt can be written for one between the deletion of their attempts
// and their own. The people who were its members remain; each signs in
// to their other accounts, or to a fresh one of their own.
func (d *DB) DeleteAccount(ctx context.Context, accountID, confirm string, by arbiter.Actor) (err error) {
	ctx, end := d.beginWrite(ctx)
	defer end(&err)
	for range maxDeletionTries - 1 {
		if err = d.deleteAccount(ctx, accountID, confirm, by); !deadlocked(err) && !foreignKeyViolated(err) {
			return err
		}
	}
	return d.deleteAccount(ctx, accountID, confirm, by)
}

// maxDeletionTries bounds how often a deletion that deadlocked is tried.
const maxDeletionTries = 3

// deadlocked reports whether err is Postgres's deadlock_detected. A
// deletion holds its account and then deletes its tasks, while a decision
// or a verifier's answer in flight holds a task and then writes a row that
// refers to the account (an event, an audit line): Postgres aborts one of
// the two, and the deletion starts over.
func deadlocked(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "40P01"
}

// foreignKeyViolated reports whether err is Postgres's
// foreign_key_violation: a row that refers to one of the account's rows was
// written while the deletion ran, by a path that takes no lock the deletion
// takes. The deletion starts over and deletes it too.
func foreignKeyViolated(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "23503"
}

// lockAccountTasks locks the account's tasks on Postgres, after its row.
// Every write of an attempt (a verifier's answer, a decision, an audit's
// answer) updates its task in the same transaction first, so it either
// commits before the lock is granted, and its attempt is deleted with the
// others, or waits for the deletion and then finds no task. Without the
// lock, an attempt committed between the deletion of the attempts and of
// the tasks failed the deletion on attempts_task_id_fkey (2 of 4 tries
// with a worker running). SQLite's single writer serializes them already.
func (d *DB) lockAccountTasks(ctx context.Context, tx *Tx, accountID string) error {
	if !d.locksRows() {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT id FROM task_states WHERE account_id = $1 ORDER BY id FOR UPDATE`, accountID); err != nil {
		return fmt.Errorf("lock the account's tasks: %w", err)
	}
	return nil
}

// deleteAccount is one try of DeleteAccount, in one transaction.
func (d *DB) deleteAccount(ctx context.Context, accountID, confirm string, by arbiter.Actor) error {
	return d.transact(ctx, func(tx *Tx) error {
		if err := d.lockAccount(ctx, tx, accountID); err != nil {
			return err
		}
		a, err := d.findAccount(ctx, tx, "id", accountID)
		if err != nil {
			return err
		}
		if _, err := d.authorize(ctx, tx, accountID, by, arbiter.ActionDeleteAccount); err != nil {
			return err
		}
		if err := arbiter.CheckAccountDeletion(a, confirm); err != nil {
			return err
		}
		if err := d.lockAccountTasks(ctx, tx, accountID); err != nil {
			return err
		}
		for _, s := range accountDeletes {
			if _, err := tx.ExecContext(ctx, d.rebind(s.query), accountID); err != nil {
				return fmt.Errorf("delete the account's %s: %w", s.what, err)
			}
		}
		return nil
	})
}

// errAccountDeleted answers a create with a key of an account deleted
// within the last web.KeyCacheTTL, while a process still trusted the key.
var errAccountDeleted = arbiter.Errorf(arbiter.EUNAUTHORIZED, "The API key's account has been deleted.")

// accountDeleted returns errAccountDeleted for a create's failure on a
// foreign key, which only a deleted account causes (every row a create
// writes refers to its account, or to its own task), and err otherwise.
func accountDeleted(err error) error {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) && pqErr.Code == "23503" || sqliteCode(err) == sqliteConstraintForeignKey {
		return errAccountDeleted
	}
	return err
}

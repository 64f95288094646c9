package db

import (
	"database/sql"
	"strings"

	"github.com/arbiterhq/arbiter"
)

// The two stores, and every piece of SQL that differs between them.
//
// The store runs on Postgres or on SQLite, and the rest of db/ writes SQL
// both understand. Where they differ, the difference is named here, once:
// an expression or clause (sqlNowMS, sqlLeast, sqlSkipLocked, sqlSkipLockedOfT), a
// statement's RETURNING of whole tasks (sqlReturningTasks), a
// lock (sqlTurnLock), a
// statement with one text per store (sqlUsage), a statement one store
// wraps (sqlPublishing), a transaction option (snapshotIsolation), or a
// question that chooses a shape (takesArrays, locksRows, notifies). A file
// by topic asks these; no other file tests the dialect.
//
// Why one create takes four shapes. On Postgres every statement is a round
// trip, and every commit waits for its WAL flush, so the store sends as few
// statements as it can: a create alone is one statement (createOneSQL,
// task.go) that counts the cap, inserts the task and stores its key;
// concurrent creates share one statement over arrays (createGroupSQL,
// task_group.go, grouped by db/internal/group); the creates of one call
// are a transaction that locks the day's usage row (sqlUsage) and inserts
// them with one statement over the same arrays (insertBatchSQL,
// task_batch.go; both read createInputSQL). SQLite has no arrays, a
// statement there is a function call in the process, and its single writer
// already serializes every write: every call is that same transaction,
// reading the usage (sqlUsage), then inserting row by row (insertTaskSQL, insertBodySQL,
// insertKeySQL). Agent finishes (finishManySQL) and webhook attempts
// (recordManySQL) take arrays on Postgres for the same reason. The array
// statements are Postgres's alone and stand beside their topic; the
// row-by-row path beside them is SQLite's, and the answers are the same.

// takesArrays reports whether the store writes many rows with one statement
// over arrays (unnest) and groups concurrent calls into such statements:
// Postgres, where a statement costs a round trip. On SQLite a statement
// costs none, and rows go one by one in one transaction.
func (d *DB) takesArrays() bool { return d.dialect == Postgres }

// locksRows reports whether concurrent writers must lock rows to take
// turns (SELECT … FOR UPDATE, SKIP LOCKED): Postgres. SQLite's single
// writer serializes them already.
func (d *DB) locksRows() bool { return d.dialect == Postgres }

// notifies reports whether the store tells other processes of changes
// with NOTIFY and hears them on a LISTEN connection (db/internal/pglisten):
// Postgres. On SQLite every writer shares one process.
func (d *DB) notifies() bool { return d.dialect == Postgres }

// sqlTurnLock is a statement that has the transaction wait its turn for
// the key $1 (any text) and hold it until the transaction ends: a
// transaction-level advisory lock on Postgres; "" on SQLite, whose single
// writer takes turns already.
func (d *DB) sqlTurnLock() string {
	if d.dialect == Postgres {
		return `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`
	}
	return ""
}

// sqlNowMS is the SQL expression of the database's clock in milliseconds
// since the Unix epoch, for times that several processes compare.
func (d *DB) sqlNowMS() string {
	if d.dialect == Postgres {
		return `(floor(extract(epoch FROM now()) * 1000)::bigint)`
	}
	return `(CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))`
}

// sqlLeast is the SQL expression of the smaller of a and b, neither NULL:
// LEAST on Postgres, the two-argument MIN on SQLite.
func (d *DB) sqlLeast(a, b string) string {
	if d.dialect == Postgres {
		return `LEAST(` + a + `, ` + b + `)`
	}
	return `MIN(` + a + `, ` + b + `)`
}

// sqlSkipLocked ends a claim's sub-select: on Postgres it locks the rows
// it picks and skips those other workers hold locked; on SQLite it is
// empty, the one writer making the claim's UPDATE … RETURNING exclusive.
func (d *DB) sqlSkipLocked() string {
	if d.dialect == Postgres {
		return "FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// sqlSkipLockedOfT is sqlSkipLocked for a pick from task_states aliased t that
// joins other tables, with its leading space.
func (d *DB) sqlSkipLockedOfT() string {
	if d.dialect == Postgres {
		return ` FOR UPDATE OF t SKIP LOCKED`
	}
	return ""
}

// sqlPublishing returns update, an UPDATE of task_states ending in RETURNING
// id, status, account_id, callback_url (updatedColumns), as the dialect
// runs it: on Postgres, wrapped so that the same statement notifies
// taskChannel of every task it left in a final status; the notifications
// go out when the transaction commits. scanUpdated reads its rows.
func (d *DB) sqlPublishing(update string) string {
	if d.dialect != Postgres {
		return update
	}
	// A volatile call in the select list runs once per row returned.
	return `WITH u AS (` + update + `)
		SELECT u.id, u.status, u.account_id, u.callback_url,
			CASE WHEN u.status IN ('` + arbiter.StatusCompleted + `', '` + arbiter.StatusExpired + `')
			THEN pg_notify('` + taskChannel + `', u.id) END FROM u`
}

// sqlReturningTasks returns update, an UPDATE of task_states with no
// RETURNING, as a statement that returns each task it changed whole, in
// taskColumns' order: its state as the update left it, and its body. On
// Postgres the update is a common table expression joined to task_bodies
// (the statement's main query would see the view as it was before the
// update); SQLite, whose RETURNING names only the updated table, reads
// each body column with a subquery. The receipt (receipts) is read with a
// subquery on both.
func (d *DB) sqlReturningTasks(update string) string {
	body := make(map[string]bool, len(bodyColumns))
	for _, c := range bodyColumns {
		body[c] = true
	}
	var state, out []string
	for _, c := range strings.Split(taskColumns, ",") {
		c = strings.TrimPrefix(strings.TrimSpace(c), "t.")
		switch {
		case c == "receipt" && d.dialect == Postgres:
			out = append(out, "(SELECT r.receipt FROM receipts r WHERE r.task_id = u.id)")
		case c == "receipt":
			out = append(out, "(SELECT r.receipt FROM receipts r WHERE r.task_id = task_states.id)")
		case d.dialect == Postgres && body[c]:
			out = append(out, "b."+c)
		case d.dialect == Postgres:
			state, out = append(state, c), append(out, "u."+c)
		case body[c]:
			out = append(out, "(SELECT b."+c+" FROM task_bodies b WHERE b.id = task_states.id)")
		default:
			out = append(out, c)
		}
	}
	if d.dialect != Postgres {
		return update + ` RETURNING ` + strings.Join(out, ", ")
	}
	return `WITH u AS (` + update + ` RETURNING ` + strings.Join(state, ", ") + `)
		SELECT ` + strings.Join(out, ", ") + ` FROM u JOIN task_bodies b ON b.id = u.id`
}

// sqlUsage reads the account's usage of a day and its cap. On Postgres it
// locks the usage row first, making it if need be, so that the account's
// other creates wait for the batch; on SQLite the transaction holds the
// store's write lock already. Arguments: account, day, account, default
// cap.
func (d *DB) sqlUsage() string {
	if d.dialect == Postgres {
		return `INSERT INTO daily_usage (account_id, day, count) VALUES (?, ?, 0)
		ON CONFLICT (account_id, day) DO UPDATE SET count = daily_usage.count
		RETURNING count, COALESCE((SELECT daily_cap FROM accounts WHERE id = ?), ?)`
	}
	return `SELECT COALESCE((SELECT count FROM daily_usage WHERE account_id = ? AND day = ?), 0),
		COALESCE((SELECT daily_cap FROM accounts WHERE id = ?), ?)`
}

// snapshotIsolation is the isolation level under which a transaction's
// reads share one snapshot: repeatable read on Postgres; SQLite's default
// already does.
func (d *DB) snapshotIsolation() sql.IsolationLevel {
	if d.dialect == Postgres {
		return sql.LevelRepeatableRead
	}
	return sql.LevelDefault
}

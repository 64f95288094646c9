package db

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"

	"github.com/arbiterhq/arbiter"
)

// Tx is one transaction of the store, as benbjohnson/wtf's sqlite.Tx: the
// database transaction, the store's clock read once when it began, and
// what the transaction published. A transition publishes its events
// (publish) and marks what it created; transact, which made the Tx,
// commits it and then does what follows the commit itself: it wakes the
// requests waiting for the tasks that reached a final state, wakes the
// deliverer of each outbox that queued messages, and tells other
// processes' workers of new tasks. No transition runs that work by hand,
// so none can forget it, and a transaction that rolls back wakes nobody.
type Tx struct {
	*sqlx.Tx
	db *DB
	// now is the store's clock when the transaction began.
	now arbiter.Timestamp
	// published are the events the transaction published, in order.
	published []arbiter.TaskEvent
	// queued are the wakeups of the outboxes that queued messages.
	queued []wakeup
	// receipts are the receipts the transaction signed, by task id.
	receipts map[string]string
	// created is set when the transaction created tasks.
	created bool
	// unprepared are the queries stmt prepared on the transaction's own
	// connection, which the store prepares once the transaction ends.
	unprepared []string
}

// transact runs fn in a transaction, committing when fn returns nil and
// rolling back on an error or a panic; after a commit it runs what the
// transaction's publishing asks (Tx).
func (d *DB) transact(ctx context.Context, fn func(tx *Tx) error) (err error) {
	sqltx, err := d.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	tx := &Tx{Tx: sqltx, db: d, now: d.nowMS()}
	defer func() {
		if p := recover(); p != nil {
			_ = sqltx.Rollback()
			panic(p)
		} else if err != nil {
			_ = sqltx.Rollback()
		}
	}()
	if err = fn(tx); err != nil {
		return err
	}
	if err = sqltx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	tx.committed()
	for _, q := range tx.unprepared {
		// A failure leaves the next transaction to prepare it again.
		_, _ = d.stmt(ctx, q)
	}
	return nil
}

// stmt returns query's statement, prepared, for use in tx: the store's
// (DB.stmt) once it has one, else one prepared on the transaction's own
// connection for it alone, and the store's prepared after the commit.
// Preparing the store's inside the transaction would wait for a second
// connection of the pool, which a pool full of transactions doing the
// same never frees.
func (tx *Tx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s, ok := tx.db.stmts.Load(query); ok {
		return tx.StmtContext(ctx, s.(*sql.Stmt)), nil
	}
	s, err := tx.PrepareContext(ctx, tx.db.rebind(query))
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if !slices.Contains(tx.unprepared, query) {
		tx.unprepared = append(tx.unprepared, query)
	}
	return s, nil
}

// transactRead runs fn in a read-only transaction, so that its reads see
// one snapshot: deferred on SQLite, where it takes no write lock, and
// READ ONLY, REPEATABLE READ on Postgres.
func (d *DB) transactRead(ctx context.Context, fn func(tx *Tx) error) error {
	return d.transactReadOn(ctx, d.db, fn)
}

// transactReadStale is transactRead on the read pool (readPool): its
// snapshot may lag the primary's by the replica's replication lag.
func (d *DB) transactReadStale(ctx context.Context, fn func(tx *Tx) error) error {
	return d.transactReadOn(ctx, d.readPool(), fn)
}

// transactReadOn is transactRead on pool.
func (d *DB) transactReadOn(ctx context.Context, pool *sqlx.DB, fn func(tx *Tx) error) error {
	sqltx, err := pool.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: d.snapshotIsolation()})
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer sqltx.Rollback()
	return fn(&Tx{Tx: sqltx, db: d, now: d.nowMS()})
}

// publish writes the events' messages to every outbox in the transaction
// (the task as it is in tx at this point), and has their effects follow
// the commit: the waiters of a task an event ends are woken, and each
// outbox that queued a message is woken. It, or publishDecided for events
// that make decisions final, is the one way a task event leaves a
// transition.
func (tx *Tx) publish(ctx context.Context, events ...arbiter.TaskEvent) error {
	_, err := tx.publishDecided(ctx, nil, events...)
	return err
}

// publishDecided is publish of events that make the decisions final: it
// signs the decisions' receipts (signReceipts) after every outbox has read
// what its messages need and before any writes them, so that the
// accounts' receipt chains, locked from the signing to the commit, are
// held over the receipts' statement, the outboxes' inserts and the commit
// alone, and the messages carry the receipts. It returns the receipts by
// task id.
func (tx *Tx) publishDecided(ctx context.Context, decisions []decision, events ...arbiter.TaskEvent) (map[string]string, error) {
	var writes []outboxWrite
	if len(events) > 0 {
		var err error
		if writes, err = tx.db.planOutboxes(ctx, tx, events); err != nil {
			return nil, err
		}
	}
	receipts, err := tx.signReceipts(ctx, decisions...)
	if err != nil {
		return nil, err
	}
	for _, write := range writes {
		if err := write(ctx, tx); err != nil {
			return nil, err
		}
	}
	tx.published = append(tx.published, events...)
	return receipts, nil
}

// queue has the outbox whose wakeup is w woken after the commit: it queued
// messages in the transaction.
func (tx *Tx) queue(w wakeup) {
	if !slices.Contains(tx.queued, w) {
		tx.queued = append(tx.queued, w)
	}
}

// announceCreated has other processes' workers told, after the commit,
// that the transaction created tasks (announce.go).
func (tx *Tx) announceCreated() { tx.created = true }

// committed runs what follows the commit of tx.
func (tx *Tx) committed() {
	d := tx.db
	var final []string
	for _, ev := range tx.published {
		if arbiter.FinalEvent(ev.Type) {
			final = append(final, ev.TaskID)
		}
	}
	if len(final) > 0 {
		d.watchers.wake(final...)
	}
	for _, w := range tx.queued {
		w.signal()
	}
	if tx.created {
		d.announceCreated()
	}
}

// publishTaskEvents publishes, in tx, events of the types about the
// account's task, with the task's callback URL: how a change elsewhere in
// the store emits a new event type.
func (tx *Tx) publishTaskEvents(ctx context.Context, accountID, taskID string, eventTypes ...string) error {
	var callback sql.NullString
	if err := tx.GetContext(ctx, &callback, tx.db.rebind(`SELECT callback_url FROM tasks WHERE id = ? AND account_id = ?`),
		taskID, accountID); err != nil {
		return notFound(err, errTaskNotFound.Message)
	}
	events := make([]arbiter.TaskEvent, len(eventTypes))
	for i, t := range eventTypes {
		events[i] = arbiter.TaskEvent{TaskID: taskID, AccountID: accountID, Type: t, CallbackURL: callback.String}
	}
	return tx.publish(ctx, events...)
}

// eventsOf returns the events that the tasks' new statuses announce.
func eventsOf(changed []updatedTask) []arbiter.TaskEvent {
	var events []arbiter.TaskEvent
	for _, u := range changed {
		if t := arbiter.TaskEventOf(u.status); t != "" {
			events = append(events, arbiter.TaskEvent{TaskID: u.id, AccountID: u.accountID, Type: t, CallbackURL: u.callbackURL})
		}
	}
	return events
}

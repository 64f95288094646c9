package db

import (
	"context"
	"fmt"

	"github.com/arbiterhq/arbiter"
)

// Outboxes: every outbound channel (webhooks, Slack, mail) writes its
// messages in the transaction that changes the task, and one claimer per
// channel delivers them (worker.Claimer). A transition publishes its events
// with tx.publish, the one way an event leaves it; publish hands them to
// each registered outbox in turn, in the transaction, so either every
// channel's messages commit with the change or none do. Each channel is
// its own outbox_<name>.go; a new one is registered by one line in Open.

// outbox is one outbound channel's side of a transition.
type outbox interface {
	// enqueue writes, in tx, the channel's messages of the events (none
	// for the events it does not carry), reading the tasks as they are in
	// tx, and marks its wakeup queued (tx.queue) when it wrote any.
	enqueue(ctx context.Context, tx *Tx, events []arbiter.TaskEvent) error
}

// register adds an outbox to those every publish reaches, in Open.
func (d *DB) register(o outbox) { d.outboxes = append(d.outboxes, o) }

// outboxOf returns the registered outbox of type T.
func outboxOf[T outbox](d *DB) T {
	for _, o := range d.outboxes {
		if t, ok := o.(T); ok {
			return t
		}
	}
	panic(fmt.Sprintf("db: no %T outbox is registered", *new(T)))
}

// fanOut hands the events to every registered outbox, in order of
// registration, and stops at the first that fails: the transaction then
// rolls back, and no channel's message of them is kept.
func (d *DB) fanOut(ctx context.Context, tx *Tx, events []arbiter.TaskEvent) error {
	for _, o := range d.outboxes {
		if err := o.enqueue(ctx, tx, events); err != nil {
			return err
		}
	}
	return nil
}

// leaseDueSQL is the statement that leases up to ? due pending rows of an
// outbox's table to an owner, oldest due first, skipping rows whose lease
// has not run out (SKIP LOCKED on Postgres; the one writer on SQLite), and
// returns the columns named. Arguments: owner, lease (ms), now, max.
func (d *DB) leaseDueSQL(table, returning string) string {
	return d.rebind(`UPDATE ` + table + ` SET lease_owner = ?, lease_expires_at = ` + d.sqlNowMS() + ` + ?
		WHERE id IN (SELECT m.id FROM ` + table + ` m
			WHERE m.status = 'pending' AND m.next_attempt_at <= ?
			AND (m.lease_expires_at IS NULL OR m.lease_expires_at < ` + d.sqlNowMS() + `)
			ORDER BY m.next_attempt_at, m.created_at, m.id LIMIT ? ` + d.sqlSkipLocked() + `)
		RETURNING ` + returning)
}

// releaseLeasesSQL is the statement that ends the leases an owner (its
// one argument) holds on an outbox's pending rows, for a deliverer that
// stops with messages unsent.
func (d *DB) releaseLeasesSQL(table string) string {
	return d.rebind(`UPDATE ` + table + ` SET lease_owner = NULL, lease_expires_at = NULL
		WHERE lease_owner = ? AND status = 'pending'`)
}

// wakeup tells an outbox's deliverer in this process that messages were
// queued. Signals never block, and those sent before the deliverer looks
// make one: it claims every due message anyway.
type wakeup chan struct{}

// newWakeup returns a wakeup that holds one signal.
func newWakeup() wakeup { return make(wakeup, 1) }

// signal wakes the deliverer, or leaves the signal waiting for it.
func (w wakeup) signal() {
	select {
	case w <- struct{}{}:
	default:
	}
}

package db

import (
	"context"
	"fmt"

	"github.com/arbiterhq/arbiter"
)

// Outboxes: every outbound channel (webhooks, Slack, mail) writes its
// messages in the transaction that changes the task, and one claimer per
// channel delivers them (worker.Claimer). A transition publishes its events
// with tx.publish (tx.publishDecided when they make decisions final), the
// one way an event leaves it; publish hands them to each registered outbox
// in turn, in the transaction, so either every channel's messages commit
// with the change or none do. Each channel is its own outbox_<name>.go; a
// new one is registered by one line in Open.
//
// An outbox works in two steps: plan reads what its messages need (the
// accounts' endpoints and connections, the tasks), then the write it
// returns inserts them. publishDecided signs the decisions' receipts
// between the two, so that the account's receipt chain, whose lock is held
// from the signing to the commit, waits on no outbox's read.

// outbox is one outbound channel's side of a transition.
type outbox interface {
	// plan reads, in tx, what the channel needs to write its messages of
	// the events (none for the events it does not carry), the tasks as
	// they are in tx, and returns the write of them: nil when it has none
	// to write. It takes no lock a decision of the events' accounts waits
	// on.
	plan(ctx context.Context, tx *Tx, events []arbiter.TaskEvent) (outboxWrite, error)
}

// outboxWrite writes, in tx, the messages its outbox's plan found, the
// receipts the transaction signed since in (tx.receipts), and marks the
// outbox's wakeup queued (tx.queue) when it wrote any.
type outboxWrite func(ctx context.Context, tx *Tx) error

// writeOf returns the write of a plan that inserts msgs with insert, or
// nil when there are none: a plan with nothing to write adds no step to
// the transaction.
func writeOf[M any](msgs []M, insert func(ctx context.Context, tx *Tx, msgs []M) error) outboxWrite {
	if len(msgs) == 0 {
		return nil
	}
	return func(ctx context.Context, tx *Tx) error { return insert(ctx, tx, msgs) }
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

// planOutboxes asks every registered outbox, in order of registration,
// for its write of the events, and stops at the first that fails: the
// transaction then rolls back, and no channel's message of them is kept.
func (d *DB) planOutboxes(ctx context.Context, tx *Tx, events []arbiter.TaskEvent) ([]outboxWrite, error) {
	var writes []outboxWrite
	for _, o := range d.outboxes {
		w, err := o.plan(ctx, tx, events)
		if err != nil {
			return nil, err
		}
		if w != nil {
			writes = append(writes, w)
		}
	}
	return writes, nil
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

package db

import (
	"context"
	"time"
)

// Waking workers in other processes when tasks are created.
//
// A worker in the process that creates a task is woken through the
// server's TaskCreated hook; one in another process (`arbiter worker`)
// hears of new tasks on the task channel, with createdPayload. The
// notification is not sent by the create's own statement: a transaction
// that notifies takes Postgres's notification lock before its commit and
// holds it through the commit's flush, so creates that notified would
// commit one at a time (pgbench on this project's 2-core VM: 24,000–28,000
// single-row inserts/s at 32 clients, 6,200–6,800 with a pg_notify in
// each). Instead, once a create has committed, this process sends
// `SELECT pg_notify(…)` on its own, a statement without a transaction id
// (no commit record, ~70 µs), at most one at a time and at most one per
// createdGap: the creates in between share it (pglisten.Sender).

// createdPayload is the taskChannel payload that says tasks were created;
// the other payloads are task ids, which never equal it.
const createdPayload = "created"

// createdGap is the least time between two created notifications of a
// process, so that a stream of creates costs at most 1/createdGap
// notifications a second; a worker's claims are ClaimCooldown (2 ms)
// apart anyway.
const createdGap = 2 * time.Millisecond

// announceCreated tells other processes' workers, on Postgres, that tasks
// were created; call it after the commit. It never blocks.
func (d *DB) announceCreated() {
	if !d.notifies() {
		return
	}
	d.announcer.Kick()
}

// notifyCreated sends one created notification.
func (d *DB) notifyCreated(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	stmt, err := d.stmt(ctx, `SELECT pg_notify(?, ?)`)
	if err != nil {
		return err
	}
	_, err = stmt.ExecContext(ctx, taskChannel, createdPayload)
	return err
}

// TasksCreated returns a channel that receives when another process (or
// this one) created tasks, on Postgres, for a worker to claim at once
// rather than at its next poll. The first call opens the process's
// listener connection (watch.go); the channel also receives when the
// listener starts and after it reconnects, since notifications sent
// meanwhile are lost. On SQLite it is nil: a worker there shares the
// creating process, whose TaskCreated hook wakes it.
func (d *DB) TasksCreated() <-chan struct{} {
	if !d.notifies() {
		return nil
	}
	d.listener.Start()
	return d.watchers.created
}

package db

import (
	"context"
	"sync"
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
// createdGap: the creates in between share it.

// createdPayload is the taskChannel payload that says tasks were created;
// the other payloads are task ids, which never equal it.
const createdPayload = "created"

// createdGap is the least time between two created notifications of a
// process, so that a stream of creates costs at most 1/createdGap
// notifications a second; a worker's claims are ClaimCooldown (2 ms)
// apart anyway.
const createdGap = 2 * time.Millisecond

// announcer sends the created notifications of a process.
type announcer struct {
	once sync.Once
	kick chan struct{}

	mu   sync.Mutex
	stop context.CancelFunc // nil until the sender starts
	done chan struct{}
}

// announceCreated tells other processes' workers, on Postgres, that tasks
// were created; call it after the commit. It never blocks.
func (d *DB) announceCreated() {
	if d.dialect != Postgres {
		return
	}
	a := &d.announcer
	a.once.Do(d.startAnnouncer)
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// startAnnouncer starts the sender of created notifications; it runs until
// the store closes.
func (d *DB) startAnnouncer() {
	a := &d.announcer
	ctx, cancel := context.WithCancel(context.Background())
	a.mu.Lock()
	a.kick, a.stop, a.done = make(chan struct{}, 1), cancel, make(chan struct{})
	a.mu.Unlock()
	go func() {
		defer close(a.done)
		gap := time.NewTimer(0)
		defer gap.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-a.kick:
			}
			if err := d.notifyCreated(ctx); err != nil && ctx.Err() == nil {
				d.log.Warn("notify other workers of new tasks", "error", err.Error())
			}
			gap.Reset(createdGap)
			select {
			case <-ctx.Done():
				return
			case <-gap.C:
			}
		}
	}()
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

// stopAnnouncer stops the sender, if it started, and waits for it.
func (a *announcer) stopAnnouncer() {
	a.once.Do(func() {}) // no sender starts after this
	a.mu.Lock()
	stop, done := a.stop, a.done
	a.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// TasksCreated returns a channel that receives when another process (or
// this one) created tasks, on Postgres, for a worker to claim at once
// rather than at its next poll. The first call opens the process's
// listener connection (watch.go); the channel also receives when the
// listener starts and after it reconnects, since notifications sent
// meanwhile are lost. On SQLite it is nil: a worker there shares the
// creating process, whose TaskCreated hook wakes it.
func (d *DB) TasksCreated() <-chan struct{} {
	if d.dialect != Postgres {
		return nil
	}
	d.watchers.listenOnce.Do(d.startListener)
	return d.watchers.created
}

package db

import (
	"context"

	"github.com/arbiterhq/arbiter"
)

// StoreGroup stores one create per account of accountIDs as one group, the
// way concurrent creates are stored, and returns the tasks and each one's
// outcome.
func (d *DB) StoreGroup(ctx context.Context, accountIDs []string, in arbiter.TaskCreate) ([]*arbiter.Task, []error) {
	group := make([]*call[newCreate, struct{}], len(accountIDs))
	for i, accountID := range accountIDs {
		t, verdicts, err := d.newTask(accountID, in)
		if err != nil {
			panic(err)
		}
		group[i] = &call[newCreate, struct{}]{in: newCreate{t, verdicts}}
	}
	d.storeGroup(ctx, group)
	tasks, errs := make([]*arbiter.Task, len(group)), make([]error, len(group))
	for i, c := range group {
		tasks[i], errs[i] = c.in.task, c.err
	}
	return tasks, errs
}

// Grouped returns how many creates group statements have stored.
func (d *DB) Grouped() int64 {
	d.creates.mu.Lock()
	defer d.creates.mu.Unlock()
	return d.creates.grouped
}

// ReadGroup reads the tasks of refs (account and id pairs) as one group,
// the way concurrent reads are answered.
func (d *DB) ReadGroup(ctx context.Context, refs [][2]string) ([]*arbiter.Task, []error) {
	group := make([]*call[taskRef, *arbiter.Task], len(refs))
	for i, r := range refs {
		group[i] = &call[taskRef, *arbiter.Task]{in: taskRef{r[0], r[1]}}
	}
	d.readGroupOf(ctx, group)
	tasks, errs := make([]*arbiter.Task, len(group)), make([]error, len(group))
	for i, c := range group {
		tasks[i], errs[i] = c.out, c.err
	}
	return tasks, errs
}

// GroupedReads returns how many reads group queries have answered.
func (d *DB) GroupedReads() int64 {
	d.reads.mu.Lock()
	defer d.reads.mu.Unlock()
	return d.reads.grouped
}

// HoldGroups keeps new creates and reads queued, as if every group slot
// were busy, until the returned function is called.
func (d *DB) HoldGroups() (release func()) {
	releaseCreates, releaseReads := hold(&d.creates), hold(&d.reads)
	return func() {
		releaseCreates()
		releaseReads()
	}
}

func hold[In, Out any](g *grouper[In, Out]) (release func()) {
	g.mu.Lock()
	held := groupsInFlight - g.running
	g.running += held
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.running -= held
		queued := len(g.queue) > 0
		if queued {
			g.running++
		}
		g.mu.Unlock()
		if queued {
			go g.loop()
		}
	}
}

// Queued returns how many creates and reads wait for a group.
func (d *DB) Queued() int {
	d.creates.mu.Lock()
	n := len(d.creates.queue)
	d.creates.mu.Unlock()
	d.reads.mu.Lock()
	defer d.reads.mu.Unlock()
	return n + len(d.reads.queue)
}

// MigrateUpTo applies the migrations up to version and no further, as an
// older release of Arbiter left the database.
func (d *DB) MigrateUpTo(ctx context.Context, version int64) error {
	p, err := d.migrations()
	if err != nil {
		return err
	}
	_, err = p.UpTo(ctx, version)
	return err
}

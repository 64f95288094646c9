package db

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter"
)

// Group commit of creates on Postgres. Creates that arrive while an earlier
// group is in flight queue up and go together in the next group: one
// statement, one round trip and one commit for all of them instead of one
// each. Under load this is what bounds a create's latency; alone, a create
// is a group of one and costs what it always did.
const (
	// maxGroup bounds the creates in one statement.
	maxGroup = 128
	// groupsInFlight is how many group statements may run at once. One
	// commit waits on the disk while the next group executes.
	groupsInFlight = 2
	// groupTimeout bounds one group statement. It runs detached from the
	// callers' contexts: a caller that gives up must not cancel the others.
	groupTimeout = 30 * time.Second
)

// pendingCreate is one create waiting for its group.
type pendingCreate struct {
	task     *arbiter.Task
	verdicts string     // the allowed verdicts as JSON
	done     chan error // receives the outcome once
	taken    bool       // in a group already; guarded by creates.mu
	_        [0]func()  // not comparable
}

// createGroups queues creates and runs them in groups.
type createGroups struct {
	mu      sync.Mutex
	queue   []*pendingCreate
	running int   // group loops running
	grouped int64 // creates stored by a group statement
}

// createGrouped stores t with the creates queued beside it. A caller whose
// context ends while its create is still queued withdraws it; once the
// create is in a running statement the caller waits for the outcome, so
// that an error never hides a stored task.
func (d *DB) createGrouped(ctx context.Context, t *arbiter.Task, verdicts string) error {
	p := &pendingCreate{task: t, verdicts: verdicts, done: make(chan error, 1)}
	g := &d.creates
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.running < groupsInFlight {
		g.running++
		go d.runGroups()
	}
	g.mu.Unlock()

	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		g.mu.Lock()
		if !p.taken {
			for i, q := range g.queue {
				if q == p {
					g.queue = append(g.queue[:i], g.queue[i+1:]...)
					break
				}
			}
			g.mu.Unlock()
			return ctx.Err()
		}
		g.mu.Unlock()
		return <-p.done
	}
}

// runGroups takes groups off the queue and stores them until the queue is
// empty.
func (d *DB) runGroups() {
	g := &d.creates
	for {
		g.mu.Lock()
		n := min(len(g.queue), maxGroup)
		if n == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		group := make([]*pendingCreate, n)
		copy(group, g.queue)
		for _, p := range group {
			p.taken = true
		}
		g.queue = append(g.queue[:0], g.queue[n:]...)
		g.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
		d.storeGroup(ctx, group)
		cancel()
	}
}

// storeGroup stores a group and tells each create its outcome. A group of
// one, the creates of an account whose cap the whole group would pass, and
// every create of a group whose statement fails are stored one by one, so
// each gets its own answer: the cap admits exactly as many as it has room
// for, and one bad create fails alone.
func (d *DB) storeGroup(ctx context.Context, group []*pendingCreate) {
	var stored map[string]bool
	if len(group) > 1 {
		var err error
		if stored, err = d.insertGroup(ctx, group); err != nil {
			stored = nil
		}
	}
	d.creates.mu.Lock()
	d.creates.grouped += int64(len(stored))
	d.creates.mu.Unlock()
	for _, p := range group {
		if stored[p.task.ID] {
			p.done <- nil
		} else {
			p.done <- d.createOne(ctx, p.task, p.verdicts)
		}
	}
}

// createGroupSQL counts a group against the daily caps and inserts it, one
// statement. The creates of one account and day are admitted together when
// all of them fit under the cap and not at all otherwise; the usage rows
// are locked in account order, so two groups never deadlock. Arguments are
// arrays, one element per create (id, account, day, task type, source,
// touchpoint, prompt, allowed verdicts, threshold, context or "" for none,
// created at), then the default cap twice and the pending status. It
// returns the ids stored.
const createGroupSQL = `WITH input AS (
		SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[],
			?::text[], ?::text[], ?::float8[], ?::text[], ?::bigint[])
		AS i (id, account_id, day, task_type, source, touchpoint,
			prompt, allowed_verdicts, confidence_threshold, context, created_at)
	), counted AS (
		INSERT INTO daily_usage (account_id, day, count)
		SELECT w.account_id, w.day, w.n
		FROM (SELECT account_id, day, count(*) AS n FROM input GROUP BY account_id, day) w
		WHERE w.n <= COALESCE((SELECT daily_cap FROM accounts WHERE id = w.account_id), ?::integer)
		ORDER BY w.account_id, w.day
		ON CONFLICT (account_id, day) DO UPDATE SET count = daily_usage.count + excluded.count
		WHERE daily_usage.count + excluded.count <=
			COALESCE((SELECT daily_cap FROM accounts WHERE id = daily_usage.account_id), ?::integer)
		RETURNING account_id, day
	)
	INSERT INTO tasks (id, account_id, status, task_type, source, touchpoint, prompt,
		allowed_verdicts, confidence_threshold, context, created_at, run_after)
	SELECT i.id, i.account_id, ?, i.task_type, i.source, i.touchpoint, i.prompt,
		i.allowed_verdicts, i.confidence_threshold, NULLIF(i.context, ''), i.created_at, i.created_at
	FROM input i JOIN counted c ON c.account_id = i.account_id AND c.day = i.day
	RETURNING id`

// insertGroup runs createGroupSQL for group and returns the ids it stored.
func (d *DB) insertGroup(ctx context.Context, group []*pendingCreate) (map[string]bool, error) {
	n := len(group)
	var (
		ids, accounts, types, sources, touchpoints = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		prompts, verdicts                          = make([]string, n), make([]string, n)
		days, created                              = make([]int64, n), make([]int64, n)
		thresholds                                 = make([]float64, n)
		contexts                                   = make([]string, n) // "" for none
	)
	for i, p := range group {
		t := p.task
		ids[i], accounts[i], types[i], sources[i], touchpoints[i] = t.ID, t.AccountID, t.TaskType, t.Source, t.Touchpoint
		prompts[i], verdicts[i] = t.Prompt, p.verdicts
		days[i], created[i] = int64(t.CreatedAt)/msPerDay, int64(t.CreatedAt)
		thresholds[i] = t.ConfidenceThreshold
		contexts[i] = string(t.Context)
	}
	stmt, err := d.stmt(ctx, createGroupSQL)
	if err != nil {
		return nil, err
	}
	rows, err := stmt.QueryContext(ctx, pq.Array(ids), pq.Array(accounts), pq.Array(days), pq.Array(types),
		pq.Array(sources), pq.Array(touchpoints), pq.Array(prompts), pq.Array(verdicts), pq.Array(thresholds),
		pq.Array(contexts), pq.Array(created), d.cap, d.cap, arbiter.StatusPending)
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	defer rows.Close()
	stored := make(map[string]bool, n)
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		stored[id] = true
	}
	return stored, rows.Err()
}

package db

import (
	"context"
	"fmt"
	"slices"

	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db/internal/group"
)

// createGroup stores creates in groups (db/internal/group).
type createGroup = group.Grouper[newCreate, stored]

// storeGroup stores a group and tells each create its outcome. A group of
// one, the creates of an account whose cap the whole group would pass, the
// creates whose idempotency key is stored already or repeats one earlier in
// the group, and every create of a group whose statement fails are stored
// one by one, so each gets its own answer: the cap admits exactly as many
// as it has room for, a used key is replayed, and one bad create fails
// alone.
func (d *DB) storeGroup(ctx context.Context, calls []*group.Call[newCreate, stored]) {
	var inserted map[string]bool
	if len(calls) > 1 {
		var err error
		if inserted, err = d.insertGroup(ctx, firstUseOfEachKey(calls)); err != nil {
			d.log.Warn("a grouped create failed; storing its creates one by one", "creates", len(calls), "error", err.Error())
			inserted = nil
		}
	}
	d.creates.AddGrouped(len(inserted))
	for _, c := range calls {
		if inserted[c.In.task.ID] {
			c.Out = stored{task: c.In.task}
		} else {
			c.Out, c.Err = d.createOne(ctx, c.In)
		}
	}
}

// firstUseOfEachKey returns the creates of group, leaving out those whose
// idempotency key an earlier create of the group carries: one statement
// cannot store a key twice, and the later ones are replays of the first.
func firstUseOfEachKey(calls []*group.Call[newCreate, stored]) []newCreate {
	creates := make([]newCreate, 0, len(calls))
	var keys map[[2]string]bool
	for _, c := range calls {
		if c.In.key != "" {
			k := [2]string{c.In.task.AccountID, c.In.key}
			if keys[k] {
				continue
			}
			if keys == nil {
				keys = map[[2]string]bool{}
			}
			keys[k] = true
		}
		creates = append(creates, c.In)
	}
	return creates
}

// createGroupSQL counts a group against the daily caps, inserts its tasks
// and stores their idempotency keys, one statement. Creates whose key the
// account has used before are left out (storeGroup replays them). The
// creates of one account and day are admitted together when all of them fit
// under the cap and not at all otherwise; the usage rows are locked in
// account order, so two groups never deadlock. Arguments are arrays, one
// element per create (the columns of createArrays), then the default cap
// twice and the pending status. It returns the ids stored.
const createGroupSQL = `WITH ` + createInputSQL + `, fresh AS (
		SELECT * FROM input i WHERE i.idempotency_key = '' OR NOT EXISTS (SELECT 1 FROM idempotency_keys k
			WHERE k.account_id = i.account_id AND k.idempotency_key = i.idempotency_key)
	), counted AS (
		INSERT INTO daily_usage (account_id, day, count)
		SELECT w.account_id, w.day, w.n
		FROM (SELECT account_id, day, count(*) AS n FROM fresh GROUP BY account_id, day) w
		WHERE w.n <= COALESCE((SELECT daily_cap FROM accounts WHERE id = w.account_id), ?::integer)
		ORDER BY w.account_id, w.day
		ON CONFLICT (account_id, day) DO UPDATE SET count = daily_usage.count + excluded.count
		WHERE daily_usage.count + excluded.count <=
			COALESCE((SELECT daily_cap FROM accounts WHERE id = daily_usage.account_id), ?::integer)
		RETURNING account_id, day
	), created AS (
		` + insertInputTasksSQL + `fresh i JOIN counted c ON c.account_id = i.account_id AND c.day = i.day
		RETURNING id
	), ` + insertInputBodiesSQL + `, keyed AS (
		INSERT INTO idempotency_keys (account_id, idempotency_key, fingerprint, task_id, created_at, expires_at)
		SELECT i.account_id, i.idempotency_key, i.fingerprint, i.id, i.created_at, i.expires_at
		FROM input i JOIN created c ON c.id = i.id WHERE i.idempotency_key <> ''
	)
	SELECT id FROM created`

// insertGroup runs createGroupSQL for creates and returns the ids it stored.
func (d *DB) insertGroup(ctx context.Context, creates []newCreate) (map[string]bool, error) {
	stmt, err := d.stmt(ctx, createGroupSQL)
	if err != nil {
		return nil, err
	}
	rows, err := stmt.QueryContext(ctx, append(createArrays(creates), d.cap, d.cap, arbiter.StatusPending)...)
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	defer rows.Close()
	inserted := make(map[string]bool, len(creates))
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("insert tasks: %w", err)
		}
		inserted[id] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	return inserted, nil
}

// createInputSQL is the input of the statements that store creates over
// arrays (createGroupSQL, insertBatchSQL): a common table expression
// input, aliased i, one row per create and one column per array of
// createArrays, in its order. Twenty arguments.
const createInputSQL = `input AS (
		SELECT * FROM unnest(?::text[], ?::text[], ?::bigint[], ?::text[], ?::text[], ?::text[],
			?::text[], ?::text[], ?::float8[], ?::text[], ?::bigint[], ?::text[], ?::text[], ?::bigint[], ?::bigint[],
			?::text[], ?::float8[], ?::text[], ?::text[], ?::text[], ?::text[])
		AS i (id, account_id, day, task_type, source, touchpoint,
			prompt, allowed_verdicts, confidence_threshold, context, created_at,
			idempotency_key, fingerprint, expires_at, deadline_at, callback_url, audit_rate, on_expiry, notify, display,
			traceparent)
	)`

// insertInputTasksSQL begins the insert of the states (task_states) of
// the pending tasks of input's rows: the rows follow its FROM (aliased i),
// and the caller ends the statement with RETURNING id, naming it created.
// Its one argument is the pending status.
const insertInputTasksSQL = `INSERT INTO task_states (id, account_id, status, task_type, source, touchpoint,
			confidence_threshold, created_at, run_after, deadline_at, callback_url, audit_rate, on_expiry, notify, traceparent)
		SELECT i.id, i.account_id, ?, i.task_type, i.source, i.touchpoint,
			i.confidence_threshold, i.created_at, i.created_at,
			NULLIF(i.deadline_at, 0), NULLIF(i.callback_url, ''), NULLIF(i.audit_rate, -1), NULLIF(i.on_expiry, ''), i.notify,
			NULLIF(i.traceparent, '')
		FROM `

// insertInputBodiesSQL is the common table expression that inserts the
// bodies (task_bodies) of the tasks created inserted, from input's rows.
// It takes no argument.
const insertInputBodiesSQL = `bodies AS (
		INSERT INTO task_bodies (id, prompt, allowed_verdicts, context, display)
		SELECT i.id, i.prompt, i.allowed_verdicts, NULLIF(i.context, ''), NULLIF(i.display, '')
		FROM input i JOIN created c ON c.id = i.id
	)`

// createArrays returns creates as Postgres arrays, one per column: id,
// account, day, task type, source, touchpoint, prompt, allowed verdicts,
// threshold, context ("" for none), created at, idempotency key,
// fingerprint ("" for none), the key's expiry, the deadline (0 for
// none), the callback URL, the audit rate (-1 for none), the on-expiry
// outcome ("" for expire), the notify list, the display hint ("" for
// none) and the trace context ("" for none).
func createArrays(creates []newCreate) []any {
	n := len(creates)
	var (
		ids, accounts, types, sources, touchpoints = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		prompts, verdicts, contexts                = make([]string, n), make([]string, n), make([]string, n)
		keys, fingerprints, callbacks              = make([]string, n), make([]string, n), make([]string, n)
		onExpiries, notify, displays, traceParents = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		days, created, expires, deadlines          = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		thresholds, auditRates                     = make([]float64, n), make([]float64, n)
	)
	for i, c := range creates {
		t := c.task
		ids[i], accounts[i], types[i], sources[i], touchpoints[i] = t.ID, t.AccountID, t.TaskType, t.Source, t.Touchpoint
		prompts[i], verdicts[i], contexts[i] = t.Prompt, c.verdicts, string(t.Context)
		keys[i], fingerprints[i], callbacks[i] = c.key, c.fingerprint, c.callbackURL
		onExpiries[i], notify[i], displays[i], traceParents[i] = c.onExpiry, c.notify, c.display, c.traceParent
		days[i], created[i], expires[i] = int64(t.CreatedAt)/msPerDay, int64(t.CreatedAt), int64(c.expiresAt)
		thresholds[i], auditRates[i] = t.ConfidenceThreshold, -1 // -1: the account's rate (NULL)
		if t.AuditRate != nil {
			auditRates[i] = *t.AuditRate
		}
		if t.DeadlineAt != nil {
			deadlines[i] = int64(*t.DeadlineAt)
		}
	}
	return []any{pq.Array(ids), pq.Array(accounts), pq.Array(days), pq.Array(types), pq.Array(sources),
		pq.Array(touchpoints), pq.Array(prompts), pq.Array(verdicts), pq.Array(thresholds),
		pq.Array(contexts), pq.Array(created), pq.Array(keys), pq.Array(fingerprints), pq.Array(expires),
		pq.Array(deadlines), pq.Array(callbacks), pq.Array(auditRates), pq.Array(onExpiries), pq.Array(notify), pq.Array(displays),
		pq.Array(traceParents)}
}

// readGroup reads tasks in groups (db/internal/group).
type readGroup = group.Grouper[taskRef, *arbiter.Task]

// taskRef names a task and the account asking for it.
type taskRef struct{ accountID, id string }

// findGroupSQL reads tasks and their attempts by id, one row per attempt,
// grouped by task.
const findGroupSQL = tasksWithAttemptsSQL + `
	WHERE t.id = ANY(?::text[]) ORDER BY t.id, a.id`

// readGroupOf answers a group of reads with one query, or one by one when
// it is a group of one or the query fails. A task of another account is
// not found, as it is for a single read.
func (d *DB) readGroupOf(ctx context.Context, calls []*group.Call[taskRef, *arbiter.Task]) {
	var found map[string]*arbiter.Task
	if len(calls) > 1 {
		var err error
		if found, err = d.selectGroup(ctx, calls); err != nil {
			d.log.Warn("a grouped read failed; reading its tasks one by one", "reads", len(calls), "error", err.Error())
			found = nil
		}
	}
	if found != nil {
		d.reads.AddGrouped(len(calls))
	}
	given := make(map[string]bool, len(calls))
	for _, c := range calls {
		switch t, ok := found[c.In.id]; {
		case found == nil:
			c.Out, c.Err = d.findTask(ctx, nil, c.In.accountID, c.In.id)
		case !ok || t.AccountID != c.In.accountID:
			c.Err = errTaskNotFound
		case given[t.ID]:
			// Two callers asked for one task; each gets its own.
			cp := *t
			cp.AllowedVerdicts, cp.Attempts = slices.Clone(t.AllowedVerdicts), slices.Clone(t.Attempts)
			c.Out = &cp
		default:
			given[t.ID] = true
			c.Out = t
		}
	}
}

// selectGroup runs findGroupSQL for the group's ids.
func (d *DB) selectGroup(ctx context.Context, calls []*group.Call[taskRef, *arbiter.Task]) (map[string]*arbiter.Task, error) {
	ids := make([]string, len(calls))
	for i, c := range calls {
		ids[i] = c.In.id
	}
	stmt, err := d.stmt(ctx, findGroupSQL)
	if err != nil {
		return nil, err
	}
	rows, err := stmt.QueryContext(ctx, pq.Array(ids))
	if err != nil {
		return nil, fmt.Errorf("find tasks: %w", err)
	}
	tasks, err := scanTasksWithAttempts(rows)
	if err != nil {
		return nil, fmt.Errorf("find tasks: %w", err)
	}
	found := make(map[string]*arbiter.Task, len(tasks))
	for _, t := range tasks {
		found[t.ID] = t
	}
	return found, nil
}

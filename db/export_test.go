package db

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db/internal/group"
)

// StoreGroup stores one create per account of accountIDs as one group, the
// way concurrent creates are stored, and returns the tasks and each one's
// outcome.
func (d *DB) StoreGroup(ctx context.Context, accountIDs []string, in arbiter.TaskCreate) ([]*arbiter.Task, []error) {
	ins := make([]arbiter.TaskCreate, len(accountIDs))
	for i := range ins {
		ins[i] = in
	}
	return d.StoreGroupOf(ctx, accountIDs, ins)
}

// StoreGroupOf stores ins[i] for accountIDs[i], all as one group, and
// returns the tasks (the stored ones, or the ones replayed) and each one's
// outcome.
func (d *DB) StoreGroupOf(ctx context.Context, accountIDs []string, ins []arbiter.TaskCreate) ([]*arbiter.Task, []error) {
	calls := make([]*group.Call[newCreate, stored], len(accountIDs))
	for i, accountID := range accountIDs {
		c, err := d.newCreate(accountID, ins[i], d.nowMS())
		if err != nil {
			panic(err)
		}
		calls[i] = &group.Call[newCreate, stored]{In: c}
	}
	d.storeGroup(ctx, calls)
	tasks, errs := make([]*arbiter.Task, len(calls)), make([]error, len(calls))
	for i, c := range calls {
		tasks[i], errs[i] = c.In.task, c.Err
		if c.Out.task != nil {
			tasks[i] = c.Out.task
		}
	}
	return tasks, errs
}

// Grouped returns how many creates group statements have stored.
func (d *DB) Grouped() int64 { return d.creates.Grouped() }

// ReadGroup reads the tasks of refs (account and id pairs) as one group,
// the way concurrent reads are answered.
func (d *DB) ReadGroup(ctx context.Context, refs [][2]string) ([]*arbiter.Task, []error) {
	calls := make([]*group.Call[taskRef, *arbiter.Task], len(refs))
	for i, r := range refs {
		calls[i] = &group.Call[taskRef, *arbiter.Task]{In: taskRef{r[0], r[1]}}
	}
	d.readGroupOf(ctx, calls)
	tasks, errs := make([]*arbiter.Task, len(calls)), make([]error, len(calls))
	for i, c := range calls {
		tasks[i], errs[i] = c.Out, c.Err
	}
	return tasks, errs
}

// GroupedReads returns how many reads group queries have answered.
func (d *DB) GroupedReads() int64 { return d.reads.Grouped() }

// HoldGroups keeps new creates and reads queued, as if every group slot
// were busy, until the returned function is called.
func (d *DB) HoldGroups() (release func()) {
	releaseCreates, releaseReads := d.creates.Hold(), d.reads.Hold()
	return func() {
		releaseCreates()
		releaseReads()
	}
}

// Queued returns how many creates and reads wait for a group.
func (d *DB) Queued() int { return d.creates.Queued() + d.reads.Queued() }

// MigrateUpTo applies the migrations up to version and no further, as an
// older release of Arbiter left the database.
func (d *DB) MigrateUpTo(ctx context.Context, version int64) error {
	return d.withMigrations(func(p *goose.Provider) error {
		_, err := p.UpTo(ctx, version)
		return err
	})
}

// withMigrations runs fn with the store's migrations on their own
// connection.
func (d *DB) withMigrations(fn func(p *goose.Provider) error) error {
	conn, done, err := d.migrationPool()
	if err != nil {
		return err
	}
	defer done()
	p, err := d.migrations(conn)
	if err != nil {
		return err
	}
	return fn(p)
}

// MigrateVersion applies the one migration, as a build that had it but not
// those numbered before it left the database.
func (d *DB) MigrateVersion(ctx context.Context, version int64) error {
	conn, done, err := d.migrationPool()
	if err != nil {
		return err
	}
	defer done()
	p, err := d.migrations(conn)
	if err != nil {
		return err
	}
	_, err = p.ApplyVersion(ctx, version, true)
	return err
}

// ExplainListTasks returns the store's plan of the query ListTasks runs for
// f, one line per plan row.
func (d *DB) ExplainListTasks(ctx context.Context, accountID string, f arbiter.TaskFilter) (string, error) {
	if err := d.validateTaskFilter(ctx, accountID, &f); err != nil {
		return "", err
	}
	query, args := listTasksQuery(accountID, f)
	return d.explain(ctx, query, args...)
}

// ExplainExpireTasks returns the store's plan of ExpireTasks's statement.
func (d *DB) ExplainExpireTasks(ctx context.Context) (string, error) {
	return d.explain(ctx, d.expireTasksSQL(), 100)
}

// ExplainQueuePlace returns the plan of FindQueuePlace's query.
func (d *DB) ExplainQueuePlace(ctx context.Context, accountID, taskID string, view arbiter.QueueView) (string, error) {
	if err := view.Validate(); err != nil {
		return "", err
	}
	return d.explain(ctx, d.queuePlaceSQL(view), queuePlaceArgs(accountID, taskID, "", view)...)
}

// ExplainQueueCount returns the plan of the count of a view of the
// account's review queue (ListHumanQueue, CountHumanQueue).
func (d *DB) ExplainQueueCount(ctx context.Context, accountID string, view arbiter.QueueView) (string, error) {
	_, filterArgs := viewFilter(view)
	return d.explain(ctx, queueCountSQL(view), append([]any{accountID}, filterArgs...)...)
}

// explain returns the store's plan of query, one line per plan row.
func (d *DB) explain(ctx context.Context, query string, args ...any) (string, error) {
	explain := "EXPLAIN "
	if d.dialect == SQLite {
		explain = "EXPLAIN QUERY PLAN "
	}
	rows, err := d.db.QueryContext(ctx, d.rebind(explain+query), args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var plan strings.Builder
	for rows.Next() {
		cells := make([]any, len(cols))
		for i := range cells {
			cells[i] = new(any)
		}
		if err := rows.Scan(cells...); err != nil {
			return "", err
		}
		for _, c := range cells {
			fmt.Fprintf(&plan, "%v ", *(c.(*any)))
		}
		plan.WriteByte('\n')
	}
	return plan.String(), rows.Err()
}

// Analyze refreshes the planner's statistics of the tasks table, as
// autovacuum would. It names the table: a bare ANALYZE on Postgres reads
// every schema in the database, the other tests' too, and under a loaded
// run that outlasted the store's statement timeout. On Postgres it runs
// without that timeout, in a transaction of its own.
func (d *DB) Analyze(ctx context.Context) error {
	if d.dialect == SQLite {
		for _, table := range []string{"task_states", "task_bodies"} {
			if _, err := d.db.ExecContext(ctx, "ANALYZE "+table); err != nil {
				return err
			}
		}
		return nil
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "SET LOCAL statement_timeout = 0"); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, "ANALYZE task_states, task_bodies"); err != nil {
		return err
	}
	return tx.Commit()
}

// Vacuum marks the pages of the tasks' tables all-visible where it can, as
// autovacuum does on a live database, so that plans may read an index
// alone; on SQLite it analyzes, as SQLite has no visibility to mark.
func (d *DB) Vacuum(ctx context.Context) error {
	if d.dialect == SQLite {
		return d.Analyze(ctx)
	}
	// VACUUM cannot mark a page while a transaction anywhere in the
	// database may still see its rows' older versions, which the tests of
	// other packages running beside this one often hold for a moment: it
	// runs again until every page of task_states is marked.
	for {
		if _, err := d.db.ExecContext(ctx, "VACUUM (ANALYZE) task_states, task_bodies"); err != nil {
			return err
		}
		var marked bool
		if err := d.db.GetContext(ctx, &marked,
			`SELECT relallvisible >= relpages FROM pg_class WHERE oid = 'task_states'::regclass`); err != nil {
			return err
		}
		if marked {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// InsertTasks writes n pending tasks of the account straight into the
// store, one statement for all, created one millisecond apart from first
// on; every other one has the source "bot", the rest "crm". It builds the
// big tables that query plans are checked on.
func (d *DB) InsertTasks(ctx context.Context, accountID string, n int, first arbiter.Timestamp) error {
	series := `SELECT g FROM generate_series(1, ?) AS g`
	id := `lpad(to_hex(g), 8, '0')`
	if d.dialect == SQLite {
		series = `WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < ?) SELECT g FROM s`
		id = `printf('%08x', g)`
	}
	// Each call's ids start with random digits, so two calls' differ.
	prefix := arbiter.NewID("", 4)
	_, err := d.db.ExecContext(ctx, d.rebind(`INSERT INTO task_states (id, account_id, status, task_type, source,
		touchpoint, confidence_threshold, created_at)
		SELECT 'tsk_' || ? || `+id+`, ?, 'pending', 'decide',
			CASE WHEN g % 2 = 0 THEN 'bot' ELSE 'crm' END, 'chat', 0.8, CAST(? AS BIGINT) + g
		FROM (`+series+`) AS gs`), prefix, accountID, int64(first), n)
	if err != nil {
		return err
	}
	_, err = d.db.ExecContext(ctx, d.rebind(`INSERT INTO task_bodies (id, prompt, allowed_verdicts)
		SELECT 'tsk_' || ? || `+id+`, 'p', '["a"]' FROM (`+series+`) AS gs`), prefix, n)
	return err
}

// SetPruneBatch makes PruneDemoVerdicts delete at most n rows per
// statement until the returned function restores the default.
func SetPruneBatch(n int) (restore func()) {
	old := pruneBatch
	pruneBatch = n
	return func() { pruneBatch = old }
}

// MoveDeadline sets the task's deadline to at, as if it had been created
// with the deadline that ends then: the way tests make a deadline pass
// without waiting for the database's clock.
func (d *DB) MoveDeadline(ctx context.Context, taskID string, at arbiter.Timestamp) error {
	_, err := d.db.ExecContext(ctx, d.rebind(`UPDATE task_states SET deadline_at = ? WHERE id = ?`), int64(at), taskID)
	return err
}

// Finish is one FinishAgentAttempt call, for FinishGroup.
type Finish struct {
	Owner, TaskID string
	Step          arbiter.AgentStep
}

// FinishGroup records the finishes as one group, the way concurrent
// finishes are recorded on Postgres, and returns each one's outcome.
func (d *DB) FinishGroup(ctx context.Context, finishes []Finish) []error {
	calls := make([]*group.Call[agentFinish, struct{}], len(finishes))
	for i, f := range finishes {
		calls[i] = &group.Call[agentFinish, struct{}]{In: agentFinish{owner: f.Owner, taskID: f.TaskID, step: f.Step, now: d.nowMS()}}
	}
	d.finishGroupOf(ctx, calls)
	errs := make([]error, len(calls))
	for i, c := range calls {
		errs[i] = c.Err
	}
	return errs
}

// GroupedFinishes returns how many finishes group statements have
// recorded.
func (d *DB) GroupedFinishes() int64 { return d.finishes.Grouped() }

// HoldFinishes keeps new finishes queued, as if every group slot were
// busy, until the returned function is called.
func (d *DB) HoldFinishes() (release func()) { return d.finishes.Hold() }

// QueuedFinishes returns how many finishes wait for a group.
func (d *DB) QueuedFinishes() int { return d.finishes.Queued() }

// QueueAll moves every task of the account to human_needed, as if the
// agent had passed each to a human.
func (d *DB) QueueAll(ctx context.Context, accountID string) error {
	_, err := d.db.ExecContext(ctx, d.rebind(`UPDATE task_states SET status = 'human_needed' WHERE account_id = ?`), accountID)
	return err
}

// HoldWriteTurn begins a transaction that writes, which takes the SQLite
// store's turn to write until release rolls it back.
func (d *DB) HoldWriteTurn(ctx context.Context) (release func(), err error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return func() { _ = tx.Rollback() }, nil
}

// WritersWaiting is how many of the SQLite store's calls wait for a turn
// to write.
func (d *DB) WritersWaiting() int64 { return d.writeGate.Waiting() }

// PromptsInWriteOrder returns the prompts of the account's tasks in the
// order SQLite wrote them (rowid).
func (d *DB) PromptsInWriteOrder(ctx context.Context, accountID string) ([]string, error) {
	var prompts []string
	err := d.db.SelectContext(ctx, &prompts, `SELECT b.prompt FROM task_states s JOIN task_bodies b ON b.id = s.id WHERE s.account_id = ? ORDER BY s.rowid`, accountID)
	return prompts, err
}

// Unavailable is the store's reading of err, as a public call's error.
func (d *DB) Unavailable(err error) error { return d.unavailable(err) }

// HealthLooks returns how many times Health has looked at the store.
func (d *DB) HealthLooks() int64 { return d.health.looks.Load() }

// CalibrationReads returns how many calibration reports' data the store
// has read.
func (d *DB) CalibrationReads() int64 { return d.calibrations.computed.Load() }

// BusiestCalibrationReads returns the most calibration reads that ran at
// once.
func (d *DB) BusiestCalibrationReads() int64 { return d.calibrations.busiest.Load() }

// CachedCalibrations returns how many calibration reports' data is kept.
func (d *DB) CachedCalibrations() int {
	d.calibrations.mu.Lock()
	defer d.calibrations.mu.Unlock()
	return len(d.calibrations.reads)
}

// ExplainDecideDueTasks returns the store's plan of the statement that
// finds the due tasks with an on-expiry outcome.
func (d *DB) ExplainDecideDueTasks(ctx context.Context) (string, error) {
	return d.explain(ctx, d.dueOutcomesSQL(), 100)
}

// ExplainFireDueAlerts returns the store's plan of the statement that
// finds the tasks whose next reminder or rung may be due.
func (d *DB) ExplainFireDueAlerts(ctx context.Context) (string, error) {
	return d.explain(ctx, d.dueAlertsSQL("?"), int64(d.nowMS()), 100)
}

// ApplyLaterMigration applies stmt as migration version of a later release
// would: its statements, its row in goose's table, and whether that release
// recorded it additive.
func (d *DB) ApplyLaterMigration(ctx context.Context, version int64, stmt string, additive bool) error {
	if _, err := d.db.ExecContext(ctx, stmt); err != nil {
		return err
	}
	if _, err := d.db.ExecContext(ctx, d.rebind(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (?, ?)`), version, true); err != nil {
		return err
	}
	_, err := d.db.ExecContext(ctx, d.rebind(`INSERT INTO schema_changes (version, additive) VALUES (?, ?)`), version, additive)
	return err
}

// MigrationUp returns the Up section of each of the dialect's embedded
// migrations, by version.
func MigrationUp(dialect string) (map[int64]string, error) {
	entries, err := migrations.ReadDir("migrations/" + dialect)
	if err != nil {
		return nil, err
	}
	up := make(map[int64]string, len(entries))
	for _, e := range entries {
		n, _, _ := strings.Cut(e.Name(), "_")
		version, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		b, err := migrations.ReadFile("migrations/" + dialect + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		text, _, _ := strings.Cut(string(b), "-- +goose Down")
		up[version] = text
	}
	return up, nil
}

// SchemaChanges returns what schema_changes records: whether each
// migration is additive, by version.
func (d *DB) SchemaChanges(ctx context.Context) (map[int64]bool, error) {
	rows, err := d.db.QueryContext(ctx, `SELECT version, additive FROM schema_changes`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	changes := map[int64]bool{}
	for rows.Next() {
		var v int64
		var additive bool
		if err := rows.Scan(&v, &additive); err != nil {
			return nil, err
		}
		changes[v] = additive
	}
	return changes, rows.Err()
}

// ForgetSchemaChange deletes what schema_changes says of version, as a
// release that did not record it would have left it.
func (d *DB) ForgetSchemaChange(ctx context.Context, version int64) error {
	_, err := d.db.ExecContext(ctx, d.rebind(`DELETE FROM schema_changes WHERE version = ?`), version)
	return err
}

// SignerTTL is how long a store signs with the receipt key it read last.
const SignerTTL = signerTTL

// DecodeVerdicts is decodeVerdicts, for the test that it reads as
// json.Unmarshal does.
var DecodeVerdicts = decodeVerdicts

// DecisionsWaitingForTest returns how many human decisions of the account
// wait for their turn in this process (chainTurnsPerAccount).
func (d *DB) DecisionsWaitingForTest(accountID string) int {
	d.decisions.mu.Lock()
	defer d.decisions.mu.Unlock()
	if k := d.decisions.keys[accountID]; k != nil {
		return k.users - len(k.held)
	}
	return 0
}

package db

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/arbiterhq/arbiter"
)

// breakingMigrations are the migrations a release older than them cannot
// serve on: they drop, rename or tighten what an older release reads or
// writes. Every other migration is additive (new tables, new columns that
// are nullable or have a default, indexes, backfills), and a release
// without it serves a database that has it. A new migration is additive
// unless listed here; TestMigrations_BreakingAreListed fails when one
// that drops or renames something is not.
//
// 00001 creates the schema (no release is older); 00012 made every
// account's owner a member and dropped accounts.email; 00029 split tasks
// into task_states and task_bodies.
var breakingMigrations = map[int64]bool{1: true, 12: true, 29: true}

// Additive reports whether an older release can serve a database with the
// migration version applied (see breakingMigrations).
func Additive(version int64) bool { return !breakingMigrations[version] }

// MigrationVersions returns the versions of the store's migrations this
// build embeds, in order.
func (d *DB) MigrationVersions() ([]int64, error) {
	return migrationVersions(d.dialect)
}

// migrationVersions returns the versions of dialect's embedded migrations.
func migrationVersions(dialect string) ([]int64, error) {
	entries, err := fs.ReadDir(migrations, "migrations/"+dialect)
	if err != nil {
		return nil, err
	}
	var versions []int64
	for _, e := range entries {
		n, _, ok := strings.Cut(e.Name(), "_")
		if !ok || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", e.Name(), err)
		}
		versions = append(versions, v)
	}
	slices.Sort(versions)
	return versions, nil
}

// recordSchemaChanges writes, for every migration this build embeds,
// whether it is additive into schema_changes, so that an older release,
// which does not know the migrations applied after it, can tell whether
// it may serve the schema (CheckSchema).
func (d *DB) recordSchemaChanges(ctx context.Context, conn *sql.DB) error {
	versions, err := d.MigrationVersions()
	if err != nil {
		return err
	}
	var b strings.Builder
	args := make([]any, 0, 2*len(versions))
	b.WriteString(`INSERT INTO schema_changes (version, additive) VALUES `)
	for i, v := range versions {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?)")
		args = append(args, v, Additive(v))
	}
	b.WriteString(` ON CONFLICT (version) DO UPDATE SET additive = excluded.additive`)
	if _, err := conn.ExecContext(ctx, d.rebind(b.String()), args...); err != nil {
		return fmt.Errorf("record the schema's changes: %w", err)
	}
	return nil
}

// SchemaState is how a database's schema compares with the one this
// build needs.
type SchemaState struct {
	// Missing are the migrations this build needs that the database lacks:
	// it is older, and this build does not serve it.
	Missing []int64
	// Newer are the migrations the database has that this build does not
	// know, applied by a later release; Breaking those of them that are
	// not additive, or of which the database does not say.
	Newer, Breaking []int64
}

// Err returns nil when this build may serve the schema (nothing missing,
// whatever is newer additive), else EUNAVAILABLE with a sentence that
// says what to do.
func (s SchemaState) Err() error {
	switch {
	case len(s.Missing) > 0:
		return arbiter.Errorf(arbiter.EUNAVAILABLE,
			"The database's schema is older than this release of Arbiter needs (it lacks migration %s): run `arbiter migrate` with this release, then start it again.",
			versionList(s.Missing))
	case len(s.Breaking) > 0:
		return arbiter.Errorf(arbiter.EUNAVAILABLE,
			"The database's schema is newer than this release of Arbiter can serve (migration %s, applied by a later release, is not additive): run the release that migrated it.",
			versionList(s.Breaking))
	}
	return nil
}

// versionList writes versions as migrations are named, 00012, 00029.
func versionList(versions []int64) string {
	s := make([]string, len(versions))
	for i, v := range versions {
		s[i] = fmt.Sprintf("%05d", v)
	}
	return strings.Join(s, ", ")
}

// CheckSchema compares the database's schema with the one this build
// needs, reading which migrations were applied and, of those it does not
// know, whether the release that applied them recorded them as additive.
// A database never migrated lacks every migration.
func (d *DB) CheckSchema(ctx context.Context) (state SchemaState, err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	known, err := d.MigrationVersions()
	if err != nil {
		return state, err
	}
	var applied []int64
	if err := d.db.SelectContext(ctx, &applied, `SELECT version_id FROM goose_db_version WHERE version_id > 0 AND is_applied`); err != nil {
		if !d.missingTable(ctx, "goose_db_version") {
			return state, fmt.Errorf("read the applied migrations: %w", err)
		}
		applied = nil
	}
	for _, v := range known {
		if !slices.Contains(applied, v) {
			state.Missing = append(state.Missing, v)
		}
	}
	for _, v := range applied {
		if !slices.Contains(known, v) && !slices.Contains(state.Newer, v) {
			state.Newer = append(state.Newer, v)
		}
	}
	slices.Sort(state.Newer)
	if len(state.Newer) == 0 {
		return state, nil
	}
	var additive []int64
	if err := d.selectIn(ctx, d.db, &additive, `SELECT version FROM schema_changes WHERE additive AND version IN (?)`,
		state.Newer); err != nil {
		return state, fmt.Errorf("read the schema's changes: %w", err)
	}
	for _, v := range state.Newer {
		if !slices.Contains(additive, v) {
			state.Breaking = append(state.Breaking, v)
		}
	}
	return state, nil
}

// missingTable reports whether the database has no table of that name.
func (d *DB) missingTable(ctx context.Context, name string) bool {
	query := `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`
	if d.dialect == Postgres {
		query = `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = ?`
	}
	var n int
	return d.db.QueryRowContext(ctx, d.rebind(query), name).Scan(&n) == nil && n == 0
}

var _ arbiter.ReadinessService = (*DB)(nil)

// Ready returns nil when the store answers and its schema is one this
// build serves (CheckSchema), EUNAVAILABLE with the reason otherwise. A
// schema migrated to a breaking change by a later release, while this
// process runs, makes it not ready. Concurrent calls share one look at the
// store, kept HealthyFor when it found the store ready.
func (d *DB) Ready(ctx context.Context) error {
	return d.ready.do(ctx, d.now, d.lookReady)
}

// lookReady reads the schema's state.
func (d *DB) lookReady(ctx context.Context) error {
	state, err := d.CheckSchema(ctx)
	if err != nil {
		if arbiter.ErrorCode(err) == arbiter.EUNAVAILABLE {
			return err
		}
		return fmt.Errorf("%w: %w", arbiter.Errorf(arbiter.EUNAVAILABLE, "The database does not answer."), err)
	}
	return state.Err()
}

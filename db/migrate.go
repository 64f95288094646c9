package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations
var migrations embed.FS

// maxMigrateRounds bounds how often Migrate starts over on SQLite after
// another process applied a migration first.
const maxMigrateRounds = 10

// sqliteMigrationWaits bounds how long Migrate waits on SQLite for other
// processes that migrate the same file, in store timeouts (each the
// busy_timeout of one wait for the write lock): five minutes by default.
const sqliteMigrationWaits = 60

// Migrate applies the embedded migrations of the store's dialect. Any
// number of processes may migrate one database at once: on Postgres they
// take turns under a session advisory lock; on SQLite, where each migration
// is one transaction under the single writer, a process that finds a
// migration applied by another in the meantime (its tables "already
// exist", or its columns are a "duplicate column name", and its
// transaction rolled back) starts over and finds nothing left to do, and
// one that found the write lock held longer than its busy_timeout (other
// processes applying their migrations one after another, which SQLite's
// polling wait does not queue behind) waits and starts over, until
// sqliteMigrationWaits store timeouts have passed.
// SQLite migrations must therefore fail when applied twice: CREATE without
// IF NOT EXISTS, ALTER TABLE … ADD COLUMN, and no data-only migration,
// which a second process could apply again.
//
// Once migrated, it records whether each migration is additive
// (schema_changes), for older releases' CheckSchema.
func (d *DB) Migrate(ctx context.Context) error {
	conn, done, err := d.migrationPool()
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer done()
	// The bound counts from the first time the lock was busy: it bounds
	// the wait for other processes, not a migration slowed by its machine.
	var deadline time.Time
	for round := 1; ; {
		p, err := d.migrations(conn)
		if err != nil {
			return err
		}
		_, err = p.Up(ctx)
		if err == nil {
			// Idempotent, and a write that may wait for the lock too.
			err = d.recordSchemaChanges(ctx, conn)
		}
		switch {
		case err == nil:
			return nil
		case d.dialect != SQLite || !deadline.IsZero() && time.Now().After(deadline):
			return fmt.Errorf("migrate: %w", err)
		case appliedMeanwhile(err) && round < maxMigrateRounds:
			round++
		case sqliteBusyError(err):
			if deadline.IsZero() {
				deadline = time.Now().Add(sqliteMigrationWaits * d.timeout)
			}
			d.log.Info("migrate: another process holds the SQLite write lock; waiting for it", "error", err.Error())
			select {
			case <-ctx.Done():
				return fmt.Errorf("migrate: %w", err)
			case <-time.After(10 * time.Millisecond):
			}
		default:
			return fmt.Errorf("migrate: %w", err)
		}
	}
}

// appliedMeanwhile reports whether a SQLite migration failed because
// another process had applied it: what it creates already exists (a
// table, a column, or the name a table is renamed to), or a later
// migration another process applied since made tasks a view (00029), which
// an earlier migration's ALTER TABLE or CREATE INDEX cannot change.
func appliedMeanwhile(err error) bool {
	for _, meanwhile := range []string{"already exists", "duplicate column name", "already another table or index with this name",
		"Cannot add a column to a view", "views may not be indexed", "may not be altered", "cannot drop column from view"} {
		if strings.Contains(err.Error(), meanwhile) {
			return true
		}
	}
	return false
}

// migrationPool returns the pool to migrate on, and the function that
// releases it. On Postgres it is a pool of its own, without
// statement_timeout: a migration may run longer than the store's timeout,
// and so may the wait for another process's. It connects directly
// (Options.ListenURL): its lock is the session's.
func (d *DB) migrationPool() (*sql.DB, func(), error) {
	if d.dialect != Postgres {
		return d.db.DB, func() {}, nil
	}
	conn, err := sql.Open("postgres", d.listenURL)
	if err != nil {
		return nil, nil, err
	}
	return conn, func() { conn.Close() }, nil
}

// migrations returns the goose provider of the store's migrations on conn,
// new for each run: a provider remembers the version table it has seen.
func (d *DB) migrations(conn *sql.DB) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migrations/"+d.dialect)
	if err != nil {
		return nil, err
	}
	// Migrations are numbered as the work that needs them starts and may
	// land out of that order, each independent of those it overtakes: a
	// database that has a later one applies an earlier one it lacks.
	dialect, opts := goose.DialectSQLite3, []goose.ProviderOption{goose.WithAllowOutofOrder(true)}
	if d.dialect == Postgres {
		dialect, opts = goose.DialectPostgres, append(opts, goose.WithSessionLocker(postgresMigrationLock{}))
	}
	p, err := goose.NewProvider(dialect, conn, sub, opts...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return p, nil
}

// postgresMigrationLock serializes migrations across processes with a
// session advisory lock held by the connection goose migrates on. Unlike
// lock.NewPostgresSessionLocker, which polls every few seconds, it waits in
// pg_advisory_lock and goes on the moment the lock is free; the lock goes
// with the session should the process die.
//
// The lock is the schema's: in the public schema it is the one goose's own
// tool takes (lock.DefaultLockID), so releases before and after agree;
// in any other schema it is that id hashed with the schema's name, so
// stores in different schemas of one database (the tests' own, or several
// deployments) migrate without waiting for each other.
type postgresMigrationLock struct{}

// migrationLockKey is the SQL of the schema's lock key; $1 is
// lock.DefaultLockID.
const migrationLockKey = `CASE WHEN current_schema() = 'public' THEN $1::bigint
	ELSE hashtextextended(current_schema(), $1::bigint) END`

// SessionLock waits for the lock or for ctx to end.
func (postgresMigrationLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(`+migrationLockKey+`)`, lock.DefaultLockID); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	return nil
}

// SessionUnlock releases the lock.
func (postgresMigrationLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	var released bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_advisory_unlock(`+migrationLockKey+`)`, lock.DefaultLockID).Scan(&released); err != nil {
		return fmt.Errorf("release the migration lock: %w", err)
	} else if !released {
		return errors.New("release the migration lock: the session did not hold it")
	}
	return nil
}

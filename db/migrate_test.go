package db_test

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pressly/goose/v3/lock"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// TestMigrate_Concurrent starts four processes' worth of stores at once, as
// four servers starting together would, on a fresh database and on one an
// older release migrated: every migration succeeds and the schema is whole.
func TestMigrate_Concurrent(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			for _, from := range []struct {
				name    string
				version int64 // 0: a fresh database
			}{{"Fresh", 0}, {"FromVersion1", 1}, {"Fresh", 0}, {"FromVersion1", 1}} {
				t.Run(from.name, func(t *testing.T) {
					url := dbtest.URL(t, dialect)
					const processes = 4
					stores := make([]*db.DB, processes)
					for i := range stores {
						d, err := db.Open(ctx, url, db.Options{})
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { d.Close() })
						stores[i] = d
					}
					if from.version > 0 {
						if err := stores[0].MigrateUpTo(ctx, from.version); err != nil {
							t.Fatal(err)
						}
					}
					errs := make([]error, processes)
					var wg sync.WaitGroup
					start := make(chan struct{})
					for i, d := range stores {
						wg.Go(func() {
							<-start
							errs[i] = d.Migrate(ctx)
						})
					}
					close(start)
					wg.Wait()
					for i, err := range errs {
						if err != nil {
							t.Errorf("migrate %d of %d: %v", i+1, processes, err)
						}
					}
					if err := stores[0].SeedDemo(ctx); err != nil {
						t.Fatalf("the migrated schema is not whole: %v", err)
					}
				})
			}
		})
	}
}

// TestMigrate_EarlierMigrationsLandingLater upgrades a database that a build
// with migration 13 but not 10 to 12 left: the missing ones are applied.
func TestMigrate_EarlierMigrationsLandingLater(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			d, err := db.Open(ctx, dbtest.URL(t, dialect), db.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			if err := d.MigrateUpTo(ctx, 9); err != nil {
				t.Fatal(err)
			}
			if err := d.MigrateVersion(ctx, 13); err != nil {
				t.Fatal(err)
			}
			if err := d.Migrate(ctx); err != nil {
				t.Fatalf("migrations 10 to 12 after 13: %v", err)
			}
			// Migration 12 made every account's person an owner.
			acct, err := d.FindOrCreateAccountByEmail(ctx, "owner@example.com")
			if err != nil {
				t.Fatal(err)
			}
			if members, err := d.ListMembers(ctx, acct.ID); err != nil || len(members) != 1 {
				t.Fatalf("members after the late migrations = %v, %v", members, err)
			}
		})
	}
}

// TestMigrate_OtherSchemasDoNotWait holds the migration lock of the public
// schema, as another deployment's migration in the same database would,
// and migrates a store in a schema of its own: it goes on at once. On
// SQLite there is no such lock.
func TestMigrate_OtherSchemasDoNotWait(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	base := os.Getenv("ARBITER_TEST_DATABASE_URL")
	if base == "" {
		base = dbtest.DefaultPostgresURL
	}
	other, err := sql.Open("postgres", base)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, lock.DefaultLockID); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, lock.DefaultLockID)

	d, err := db.Open(ctx, url, db.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// The bound only ends a failing test: a wait for the public schema's
	// lock would last as long as it is held, the whole test.
	bounded, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := d.Migrate(bounded); err != nil {
		t.Fatalf("a store in its own schema waited for the public schema's migration lock: %v", err)
	}
}

// TestMigrate_SQLiteWaitsForAnotherProcessesLock holds SQLite's write lock
// in another process's transaction for longer than the store's timeout, as
// three processes applying their migrations one after another did on a
// loaded machine (SQLITE_BUSY in TestRun_ConcurrentMigrate): Migrate waits
// and applies every migration once the lock is free, and when it is never
// free, gives up with the lock's error after its bound instead of hanging.
func TestMigrate_SQLiteWaitsForAnotherProcessesLock(t *testing.T) {
	t.Parallel()
	for _, released := range []bool{true, false} {
		url := dbtest.URL(t, db.SQLite)
		var log testutil.SyncBuffer
		d, err := db.Open(ctx, url, db.Options{Timeout: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		if err := d.MigrateUpTo(ctx, 1); err != nil {
			t.Fatal(err)
		}
		holder, err := openRaw(t, db.SQLite, url).BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := holder.ExecContext(ctx, `CREATE TABLE another_process (n INTEGER)`); err != nil {
			t.Fatal(err)
		}
		migrated := make(chan error, 1)
		go func() { migrated <- d.Migrate(ctx) }()
		if !released {
			err := within(t, func() error { return <-migrated })
			holder.Rollback()
			if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") {
				t.Errorf("Migrate under a lock never released = %v, want SQLITE_BUSY after its bound", err)
			}
			continue
		}
		for !strings.Contains(log.String(), "waiting for it") {
			select {
			case err := <-migrated:
				t.Fatalf("Migrate under another process's lock returned %v before it waited", err)
			case <-time.After(5 * time.Millisecond):
			}
		}
		holder.Rollback()
		if err := within(t, func() error { return <-migrated }); err != nil {
			t.Fatalf("Migrate once the lock was free: %v", err)
		}
		if err := d.SeedDemo(ctx); err != nil {
			t.Fatalf("the migrated schema is not whole: %v", err)
		}
	}
}

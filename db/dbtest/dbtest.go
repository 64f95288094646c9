// Package dbtest opens real, migrated, throw-away stores for tests: an SQLite
// file in a temporary directory, and a fresh schema in the local Postgres.
//
// The Postgres database is named by ARBITER_TEST_DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/arbiter_test?sslmode=disable). When it
// cannot be reached the Postgres half of a test skips, unless
// ARBITER_TEST_REQUIRE_POSTGRES=1, when it fails. Under go test -short (the
// fast lane) the Postgres half skips whatever the environment says.
package dbtest

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// DefaultPostgresURL is the test database used when none is configured.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/arbiter_test?sslmode=disable"

// Dialects lists the stores every store-backed test runs against.
var Dialects = []string{db.SQLite, db.Postgres}

// Each runs fn as a subtest once per dialect, each with a fresh store.
func Each(t *testing.T, opts db.Options, fn func(t *testing.T, d *db.DB)) {
	t.Helper()
	for _, dialect := range Dialects {
		t.Run(dialect, func(t *testing.T) {
			fn(t, Open(t, dialect, opts))
		})
	}
}

// Open returns a migrated store of the dialect with the demo queue seeded,
// closed and removed when the test ends.
func Open(t testing.TB, dialect string, opts db.Options) *db.DB {
	t.Helper()
	return OpenURL(t, URL(t, dialect), opts)
}

// Timeout bounds each store call of a test that sets no Options.Timeout.
// It is longer than the service's default (db.DefaultTimeout): a test run
// under -race beside the other packages is many times slower than the
// service, and a call that outlasts 5 s there is a slow machine, not the
// failure under test. Tests about timeouts set their own.
const Timeout = time.Minute

// OpenURL opens, migrates and seeds the store at rawURL, as a separate
// process would; it is closed when the test ends.
func OpenURL(t testing.TB, rawURL string, opts db.Options) *db.DB {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = Timeout
	}
	d, err := db.Open(context.Background(), rawURL, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	dialect := d.Dialect()
	t.Cleanup(func() { d.Close() })
	if err := d.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate %s store: %v", dialect, err)
	}
	if err := d.SeedDemo(context.Background()); err != nil {
		t.Fatalf("seed %s store: %v", dialect, err)
	}
	return d
}

// URL returns the address of a fresh, empty store of the dialect: a file in a
// temporary directory, or a new Postgres schema dropped when the test ends.
// A second store opened on the same URL shares the data, as a second process
// would.
func URL(t testing.TB, dialect string) string {
	t.Helper()
	if dialect == db.SQLite {
		return "sqlite:" + t.TempDir() + "/arbiter.db"
	}
	if testing.Short() {
		t.Skip("-short: the Postgres half runs in make test")
	}
	base := os.Getenv("ARBITER_TEST_DATABASE_URL")
	if base == "" {
		base = DefaultPostgresURL
	}
	admin, err := sql.Open("postgres", base)
	if err == nil {
		err = admin.Ping()
	}
	if err != nil {
		if os.Getenv("ARBITER_TEST_REQUIRE_POSTGRES") == "1" {
			t.Fatalf("postgres is required but unreachable at %s: %v", base, err)
		}
		t.Skipf("postgres unreachable (%v); set ARBITER_TEST_REQUIRE_POSTGRES=1 to fail instead", err)
	}
	defer admin.Close()
	schema := arbiter.NewID("test_", 8)
	if _, err := admin.Exec(`CREATE SCHEMA ` + schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		admin, err := sql.Open("postgres", base)
		if err != nil {
			return
		}
		defer admin.Close()
		_, _ = admin.Exec(`DROP SCHEMA ` + schema + ` CASCADE`)
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("parse %s: %v", base, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TakeMail claims every mail due in the store and records each sent, as a
// mail deliverer would, and returns them in the order claimed: what the
// mail outbox held.
func TakeMail(t testing.TB, d *db.DB) []*arbiter.MailMessage {
	t.Helper()
	ctx := context.Background()
	var all []*arbiter.MailMessage
	for {
		claimed, err := d.ClaimMail(ctx, "probe", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) == 0 {
			return all
		}
		records := make([]arbiter.MailRecord, len(claimed))
		for i, m := range claimed {
			records[i] = arbiter.MailRecord{MailID: m.ID, Step: arbiter.DeliveryStep{State: arbiter.DeliveryDone, Attempts: 1}}
		}
		errs, err := d.RecordMailAttempts(ctx, "probe", records)
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		all = append(all, claimed...)
	}
}

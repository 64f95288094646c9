package db_test

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/db"
)

// TestOpen_TransactionPoolerNeedsADirectConnection: behind a transaction
// pooler the store refuses to open without the direct connection that
// LISTEN and the migration lock need, and refuses a pooler in front of an
// SQLite file; both before connecting anywhere.
func TestOpen_TransactionPoolerNeedsADirectConnection(t *testing.T) {
	for _, tc := range []struct{ name, url, listen, want string }{
		{"no direct connection", "postgres://arbiter@127.0.0.1:1/arbiter", "", "ARBITER_DATABASE_LISTEN_URL"},
		{"an SQLite file", "sqlite:" + t.TempDir() + "/a.db", "postgres://arbiter@127.0.0.1:1/arbiter", "Postgres only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := db.Open(ctx, tc.url, db.Options{TransactionPooler: true, ListenURL: tc.listen})
			if err == nil {
				d.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%q does not say %q", err, tc.want)
			}
		})
	}
}

// TestOpen_ReadReplicaIsPostgresOnly: a read URL beside an SQLite store,
// or one that is not a postgres:// URL, is refused with a sentence naming
// the setting, before connecting anywhere.
func TestOpen_ReadReplicaIsPostgresOnly(t *testing.T) {
	for _, tc := range []struct{ name, url, read, want string }{
		{"an SQLite store", "sqlite:" + t.TempDir() + "/a.db", "postgres://arbiter@127.0.0.1:1/arbiter", "an SQLite store has none"},
		{"not a postgres URL", "postgres://arbiter@127.0.0.1:1/arbiter", "sqlite:replica.db", "must be a postgres:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := db.Open(ctx, tc.url, db.Options{ReadURL: tc.read})
			if err == nil {
				d.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "ARBITER_DATABASE_READ_URL") {
				t.Errorf("%q does not say %q and name ARBITER_DATABASE_READ_URL", err, tc.want)
			}
		})
	}
}

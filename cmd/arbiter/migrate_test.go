package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// TestRun_MigrateOffRefusesAnOlderSchema: with ARBITER_MIGRATE=off, serve
// and worker do not migrate a fresh store but refuse it with a sentence
// naming `arbiter migrate`; after that step, serve starts and serves.
func TestRun_MigrateOffRefusesAnOlderSchema(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			getenv := env(map[string]string{"ARBITER_DATABASE_URL": dbtest.URL(t, dialect), "ARBITER_MIGRATE": "off"})
			for _, command := range [][]string{{"serve", "--addr", "127.0.0.1:0"}, {"worker"}} {
				err := run(context.Background(), command, getenv, nil, &bytes.Buffer{}, &bytes.Buffer{})
				if err == nil || !strings.Contains(err.Error(), "older than this release of Arbiter needs") ||
					!strings.Contains(err.Error(), "run `arbiter migrate` with this release") {
					t.Fatalf("%s on an unmigrated store with ARBITER_MIGRATE=off = %v, want a refusal naming arbiter migrate", command[0], err)
				}
			}
			if err := run(context.Background(), []string{"migrate"}, getenv, nil, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
				t.Fatalf("migrate with ARBITER_MIGRATE=off: %v", err)
			}
			base := serve(t, getenv)
			key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))
			if status, task := testutil.APICall(t, "POST", base+"/v1/tasks", key, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`); status != 200 {
				t.Fatalf("create after arbiter migrate = %d %v", status, task)
			}
		})
	}
}

// TestRun_OlderReleaseServesANewerAdditiveSchema stands for a rolling
// deploy: a later release's migrations are applied (a table and a column
// with a default, recorded additive) while this release's replicas run
// with ARBITER_MIGRATE=off. This release starts on that schema and serves
// the hot path, create to the agent's decision; a later migration recorded
// breaking makes it refuse to start, and its running replicas not ready.
func TestRun_OlderReleaseServesANewerAdditiveSchema(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			rules := filepath.Join(t.TempDir(), "rules.txt")
			os.WriteFile(rules, []byte("approve 0.97 context.amount < 50\n"), 0o600)
			getenv := env(map[string]string{"ARBITER_DATABASE_URL": url, "ARBITER_MIGRATE": "off",
				"ARBITER_AGENT": "rules", "ARBITER_AGENT_RULES": rules})
			runOK(t, getenv, "migrate")
			raw := rawStore(t, dialect, url)
			later := func(version int, stmt string, additive bool) {
				t.Helper()
				for _, s := range []string{stmt,
					`INSERT INTO goose_db_version (version_id, is_applied) VALUES ($1, true)`,
					`INSERT INTO schema_changes (version, additive) VALUES ($1, $2)`} {
					args := []any{version, additive}[:strings.Count(s, "$")]
					if dialect == db.SQLite {
						s = strings.NewReplacer("$1", "?", "$2", "?").Replace(s)
					}
					if _, err := raw.Exec(s, args...); err != nil {
						t.Fatalf("%s: %v", s, err)
					}
				}
			}
			later(99001, `CREATE TABLE later_things (id TEXT PRIMARY KEY, note TEXT)`, true)
			later(99002, `ALTER TABLE attempts ADD COLUMN later_note TEXT NOT NULL DEFAULT ''`, true)

			base, logs := serveWithLogs(t, getenv)
			if !strings.Contains(logs.String(), "the schema has additive migrations of a later release") {
				t.Errorf("serve did not log the later migrations:\n%s", logs)
			}
			key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))
			_, created := testutil.APICall(t, "POST", base+"/v1/tasks", key, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"amount":20}}`)
			id, _ := created["id"].(string)
			if id == "" {
				t.Fatalf("create on the newer schema = %v", created)
			}
			if task := waitStatus(t, base, key, id, "completed"); task["final_verdict"] != "approve" {
				t.Errorf("decided on the newer schema = %v", task)
			}
			if status := probeStatus(t, base+"/readyz"); status != http.StatusOK {
				t.Errorf("/readyz on a newer additive schema = %d, want 200", status)
			}

			later(99003, `ALTER TABLE later_things DROP COLUMN note`, false)
			err := run(context.Background(), []string{"worker"}, getenv, nil, &bytes.Buffer{}, &bytes.Buffer{})
			if err == nil || !strings.Contains(err.Error(), "newer than this release of Arbiter can serve (migration 99003") {
				t.Fatalf("worker on a schema newer by a breaking migration = %v, want a refusal naming 99003", err)
			}
			waitProbe(t, base+"/readyz", http.StatusServiceUnavailable)
			if status := probeStatus(t, base+"/livez"); status != http.StatusOK {
				t.Errorf("/livez of the replica that is not ready = %d, want 200", status)
			}
		})
	}
}

// probeStatus returns the status GET url answers.
func probeStatus(t *testing.T, url string) int {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// waitProbe waits until GET url answers want: a probe's outcome is kept
// for db.HealthyFor.
func waitProbe(t *testing.T, url string, want int) {
	t.Helper()
	for deadline := testutil.Patience(t); probeStatus(t, url) != want; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never answered %d", url, want)
		}
	}
}

package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// env returns a getenv over the given variables only.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// runOK runs a command to completion and returns its stdout.
func runOK(t *testing.T, getenv func(string) string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, getenv, nil, &stdout, &stderr); err != nil {
		t.Fatalf("arbiter %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// serve boots `arbiter serve` on :0 and returns its base URL.
func serve(t *testing.T, getenv func(string) string, args ...string) string {
	t.Helper()
	base, _ := serveWithLogs(t, getenv, args...)
	return base
}

// serveWithLogs boots `arbiter serve` on :0 and returns its base URL and
// its log.
func serveWithLogs(t *testing.T, getenv func(string) string, args ...string) (string, *testutil.SyncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...), getenv, nil, &bytes.Buffer{}, logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v", err)
			}
		case <-time.After(time.Until(testutil.Patience(t))):
			t.Error("serve did not stop")
		}
	})
	listening := regexp.MustCompile(`msg=listening addr=(\S+)`)
	for deadline := testutil.Patience(t); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			return "http://" + m[1], logs
		}
		select {
		case err := <-done:
			t.Fatalf("serve stopped: %v\n%s", err, logs.String())
		default:
		}
	}
	t.Fatalf("serve did not listen:\n%s", logs.String())
	return "", nil
}

// waitStatus polls the task until its status is want.
func waitStatus(t *testing.T, base, key, id, want string) map[string]any {
	t.Helper()
	deadline := testutil.Patience(t)
	for {
		status, task := testutil.APICall(t, "GET", base+"/v1/tasks/"+id, key, "")
		if status != 200 {
			t.Fatalf("get = %d %v", status, task)
		}
		if task["status"] == want {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task stayed %v, want %s", task["status"], want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRun_ServeCreateGet(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			getenv := env(map[string]string{"ARBITER_DATABASE_URL": dbtest.URL(t, dialect)})
			base := serve(t, getenv)
			key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))

			status, created := testutil.APICall(t, "POST", base+"/v1/tasks", key, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`)
			id, _ := created["id"].(string)
			if status != 200 || id == "" {
				t.Fatalf("create = %d %v", status, created)
			}
			// The default agent decides nothing: the in-process worker hands
			// the task to a human, with one attempt on record.
			task := waitStatus(t, base, key, id, "human_needed")
			if attempts, _ := task["attempts"].([]any); len(attempts) != 1 {
				t.Errorf("attempts = %v, want the none backend's one", task["attempts"])
			}

			res, err := http.Get(base + "/healthz")
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Errorf("healthz = %d with the in-process worker running", res.StatusCode)
			}
		})
	}
}

func TestRun_RulesAgent(t *testing.T) {
	t.Parallel()
	rules := filepath.Join(t.TempDir(), "rules.txt")
	os.WriteFile(rules, []byte("approve 0.97 context.amount < 50\n"), 0o600)
	getenv := env(map[string]string{
		"ARBITER_DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "a.db"),
		"ARBITER_AGENT":        "rules",
		"ARBITER_AGENT_RULES":  rules,
	})
	base := serve(t, getenv)
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))

	_, small := testutil.APICall(t, "POST", base+"/v1/tasks", key, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"amount":20}}`)
	_, large := testutil.APICall(t, "POST", base+"/v1/tasks", key, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"amount":500}}`)
	task := waitStatus(t, base, key, small["id"].(string), "completed")
	if task["final_tier"] != "agent" || task["final_verdict"] != "approve" || task["final_confidence"] != 0.97 {
		t.Errorf("decided task = %v", task)
	}
	waitStatus(t, base, key, large["id"].(string), "human_needed")
}

func TestRun_BadRulesFailAtStart(t *testing.T) {
	t.Parallel()
	rules := filepath.Join(t.TempDir(), "rules.txt")
	os.WriteFile(rules, []byte("approve 0.9 true\nreject 0.9 context.amount >\n"), 0o600)
	getenv := env(map[string]string{
		"ARBITER_DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "a.db"),
		"ARBITER_AGENT":        "rules",
		"ARBITER_AGENT_RULES":  rules,
	})
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0"}, getenv, nil, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "rules.txt:2:") {
		t.Fatalf("serve with a bad rule = %v, want an error naming rules.txt:2", err)
	}
}

func TestRun_BadTrustedProxiesFailAtStart(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{
		"ARBITER_DATABASE_URL":    "sqlite:" + filepath.Join(t.TempDir(), "a.db"),
		"ARBITER_TRUSTED_PROXIES": "10.0.0.0/8,10.0.0.300/32",
	})
	err := run(context.Background(), []string{"serve", "--addr", "127.0.0.1:0"}, getenv, nil, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "ARBITER_TRUSTED_PROXIES") || !strings.Contains(err.Error(), "10.0.0.300/32") {
		t.Fatalf("serve with a bad trusted proxy = %v, want an error naming the variable and the entry", err)
	}
}

func TestRun_Admin(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{"ARBITER_DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "a.db")})

	key := runOK(t, getenv, "admin", "create-key", "--email", "Ops@Example.com", "--name", "ci")
	if !regexp.MustCompile(`^svc_live_[0-9a-f]{28}\n$`).MatchString(key) {
		t.Fatalf("create-key printed %q, want the key and a newline only", key)
	}
	runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com")

	lines := strings.Split(strings.TrimSuffix(runOK(t, getenv, "admin", "list-keys", "--email", "ops@example.com"), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("list-keys printed %d lines, want 2: %q", len(lines), lines)
	}
	row := regexp.MustCompile(`^(key_[0-9a-f]{16})\t(\S+)\t(svc_live_[0-9a-f]{4})\t(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\t(-)\t(-)$`)
	var ciID string
	for _, line := range lines {
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("list-keys line %q does not follow the contract", line)
		}
		if strings.Contains(line, strings.TrimSpace(key)) {
			t.Fatal("list-keys shows a plaintext key")
		}
		if m[2] == "ci" {
			ciID = m[1]
			if m[3] != strings.TrimSpace(key)[:13] {
				t.Errorf("prefix %q is not the key's first 13 characters", m[3])
			}
		}
	}

	runOK(t, getenv, "admin", "revoke-key", "--id", ciID)
	out := runOK(t, getenv, "admin", "list-keys", "--email", "ops@example.com")
	if !regexp.MustCompile(ciID + `\tci\t\S+\t\S+\t-\t\d{4}-\d\d-\d\dT\S+Z\n`).MatchString(out) {
		t.Errorf("revoked key not listed with revoked_at:\n%s", out)
	}

	runOK(t, getenv, "admin", "set-cap", "--email", "ops@example.com", "--cap", "3")
	store := dbtest.OpenURL(t, getenv("ARBITER_DATABASE_URL"), db.Options{})
	account, err := store.FindAccountByEmail(context.Background(), "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, cap, _ := store.UsageToday(context.Background(), account.ID); cap != 3 {
		t.Errorf("cap after set-cap = %d, want 3", cap)
	}

	for _, args := range [][]string{
		{"admin", "revoke-key", "--id", ciID},                   // already revoked
		{"admin", "revoke-key", "--id", "key_0000000000000000"}, // unknown
		{"admin", "list-keys", "--email", "nobody@example.com"}, // unknown account
		{"admin", "set-cap", "--email", "ops@example.com", "--cap", "-1"},
		{"admin", "create-key", "--email", "not an address"},
		{"admin", "frobnicate"},
		{"nonsense"},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), args, getenv, nil, &stdout, &stderr)
		if err == nil {
			t.Errorf("arbiter %s succeeded, want an error", strings.Join(args, " "))
		}
		if stdout.Len() != 0 {
			t.Errorf("arbiter %s wrote to stdout: %q", strings.Join(args, " "), stdout.String())
		}
	}
}

// TestRun_ConcurrentMigrate runs four `arbiter migrate` at once on a fresh
// database of each store, as four processes starting together do: all of
// them succeed.
func TestRun_ConcurrentMigrate(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			getenv := env(map[string]string{"ARBITER_DATABASE_URL": dbtest.URL(t, dialect)})
			errs := make([]error, 4)
			var wg sync.WaitGroup
			for i := range errs {
				wg.Go(func() {
					var stderr bytes.Buffer
					if err := run(context.Background(), []string{"migrate"}, getenv, nil, &bytes.Buffer{}, &stderr); err != nil {
						errs[i] = fmt.Errorf("%w\n%s", err, stderr.String())
					}
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("migrate %d of %d: %v", i+1, len(errs), err)
				}
			}
		})
	}
}

// TestRun_AdminSaysWhy prints a sentence for a value the store refuses and
// the store's own error for a failure the operator has to look into,
// instead of "Internal error.", on both stores.
func TestRun_AdminSaysWhy(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			getenv := env(map[string]string{"ARBITER_DATABASE_URL": url})
			runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com")
			fail := func(args ...string) string {
				t.Helper()
				var stdout, stderr bytes.Buffer
				err := run(context.Background(), args, getenv, nil, &stdout, &stderr)
				if err == nil {
					t.Fatalf("arbiter %s succeeded", strings.Join(args, " "))
				}
				return err.Error() + stderr.String()
			}

			if out := fail("admin", "set-cap", "--email", "ops@example.com", "--cap", "99999999999"); !strings.Contains(out, "from 0 to 2147483647") {
				t.Errorf("set-cap --cap 99999999999 says %q, want the bound", out)
			}

			driver, dsn := "postgres", url
			if dialect == db.SQLite {
				driver, dsn = "sqlite", strings.TrimPrefix(url, "sqlite:")
			}
			raw, err := sql.Open(driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			if _, err := raw.ExecContext(context.Background(), `ALTER TABLE api_keys RENAME TO api_keys_moved`); err != nil {
				t.Fatal(err)
			}
			out := fail("admin", "list-keys", "--email", "ops@example.com")
			if strings.Contains(out, "Internal error.") || !strings.Contains(out, "api_keys") {
				t.Errorf("list-keys on a broken store says %q, want the store's error", out)
			}
		})
	}
}

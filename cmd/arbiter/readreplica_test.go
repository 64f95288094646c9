package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/testutil"
)

// TestReadReplica_ListsReadTheStandbyAndTheHotPathThePrimary runs `arbiter
// serve` on a primary with ARBITER_DATABASE_READ_URL naming its streaming
// standby (pg_basebackup -R, Debian's PostgreSQL as the postgres user).
// With the standby's replay paused, a task created on the primary is
// answered by its GET at once and missing from the task list, which the
// standby answers; resumed, the list shows it. With the standby stopped,
// create and get work on, and the lists the standby serves answer 503.
func TestReadReplica_ListsReadTheStandbyAndTheHotPathThePrimary(t *testing.T) {
	t.Parallel()
	pg := newPGClusters(t)
	const primaryHost, standbyHost = "127.0.0.7", "127.0.0.8"
	_, standby, port := pg.primaryAndStandby(t, primaryHost, standbyHost, nil, nil)
	onStandby := openDirect(t, standbyHost, port)

	dbURL := func(host string) string {
		return fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=disable", host, port)
	}
	getenv := env(map[string]string{"ARBITER_DATABASE_URL": dbURL(primaryHost), "ARBITER_DATABASE_READ_URL": dbURL(standbyHost),
		"ARBITER_DB_TIMEOUT": "2s"})
	base, serveLogs := serveWithLogs(t, getenv)
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))
	defer func() {
		if t.Failed() {
			t.Logf("serve:\n%s", serveLogs.String())
		}
	}()

	create := func(prompt string) string {
		t.Helper()
		status, task, err := apiSend("POST", base+"/v1/tasks", key, "", `{"prompt":"`+prompt+`","allowed_verdicts":["approve","reject"]}`)
		id, _ := task["id"].(string)
		if err != nil || status != http.StatusOK || id == "" {
			t.Fatalf("create %s = %d %v %v", prompt, status, task, err)
		}
		return id
	}
	get := func(id string) {
		t.Helper()
		if status, task, err := apiSend("GET", base+"/v1/tasks/"+id, key, "", ""); err != nil || status != http.StatusOK || task["id"] != id {
			t.Fatalf("get %s = %d %v %v", id, status, task, err)
		}
	}
	// listed returns the ids of the account's latest tasks, as the task
	// list answers them.
	listed := func() []string {
		t.Helper()
		status, page, err := apiSend("GET", base+"/v1/tasks?limit=100", key, "", "")
		if err != nil || status != http.StatusOK {
			t.Fatalf("list = %d %v %v", status, page, err)
		}
		var ids []string
		tasks, _ := page["tasks"].([]any)
		for _, task := range tasks {
			ids = append(ids, task.(map[string]any)["id"].(string))
		}
		return ids
	}
	// waitListed waits until the list shows id: the standby replayed it.
	waitListed := func(id string) {
		t.Helper()
		for deadline := testutil.Patience(t); !slices.Contains(listed(), id); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the list never showed %s", id)
			}
		}
	}
	waitReplay := func(want string) {
		t.Helper()
		for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
			var state string
			if err := onStandby.QueryRow(`SELECT pg_get_wal_replay_pause_state()`).Scan(&state); err != nil {
				t.Fatal(err)
			}
			if state == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the standby's replay is %q, want %q", state, want)
			}
		}
	}

	first := create("Refund order 1?")
	waitListed(first)

	if _, err := onStandby.Exec(`SELECT pg_wal_replay_pause()`); err != nil {
		t.Fatal(err)
	}
	waitReplay("paused")
	second := create("Refund order 2?")
	get(second)
	if ids := listed(); slices.Contains(ids, second) || !slices.Contains(ids, first) {
		t.Fatalf("with the standby's replay paused the list is %v: want %s and not %s, which only the primary has", ids, first, second)
	}
	var onReplica int
	if err := onStandby.QueryRow(`SELECT count(*) FROM tasks WHERE id = $1`, second).Scan(&onReplica); err != nil || onReplica != 0 {
		t.Fatalf("the paused standby holds %d of %s (%v)", onReplica, second, err)
	}
	if _, err := onStandby.Exec(`SELECT pg_wal_replay_resume()`); err != nil {
		t.Fatal(err)
	}
	waitReplay("not paused")
	waitListed(second)

	// The standby goes: the hot path does not notice; the heavy reads are
	// refused, to be tried again, as when the primary is down.
	pg.run(t, "pg_ctl", "-D", standby, "-m", "immediate", "stop")
	third := create("Refund order 3?")
	get(third)
	for _, path := range []string{"/v1/tasks", "/v1/agreement"} {
		status, answer, err := apiSend("GET", base+path, key, "", "")
		if err != nil || status != http.StatusServiceUnavailable {
			t.Errorf("GET %s with the standby stopped = %d %v %v, want 503", path, status, answer, err)
		}
	}
	var onPrimary int
	if err := openDirect(t, primaryHost, port).QueryRow(`SELECT count(*) FROM tasks WHERE id = ANY($1)`,
		"{"+strings.Join([]string{first, second, third}, ",")+"}").Scan(&onPrimary); err != nil || onPrimary != 3 {
		t.Errorf("the primary holds %d of the 3 tasks (%v)", onPrimary, err)
	}
}

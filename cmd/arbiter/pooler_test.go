package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// pgbouncer starts Debian's PgBouncer on a free loopback port in
// transaction-pooling mode in front of the Postgres database of direct (a
// dbtest URL, whose schema the pooler's connect_query sets, as PgBouncer
// refuses search_path as a startup parameter), with serverConns server
// connections, and returns the URL that reaches the database through it.
// It skips the test when pgbouncer is not installed (.ci/run installs it).
func pgbouncer(t *testing.T, direct string, serverConns int) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/pgbouncer"); statErr != nil {
			t.Skip("pgbouncer is not installed (apt-get install pgbouncer; .ci/run installs it)")
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		t.Fatalf("the test database's address %q: %v", u.Host, err)
	}
	user := u.User.Username()
	schema := u.Query().Get("search_path")
	dir := t.TempDir()
	listen := freeLoopbackPort(t)
	ini := fmt.Sprintf(`[databases]
arbiter = host=%s port=%s dbname=%s user=%s pool_size=%d connect_query='SET search_path = %s; SET statement_timeout = 5000'
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 200
`, host, port, strings.TrimPrefix(u.Path, "/"), user, serverConns, schema, listen, filepath.Join(dir, "users.txt"))
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(fmt.Sprintf("%q \"\"\n", user)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root; it reads its files first.
		args = append([]string{"-u", "nobody"}, args...)
	}
	logs := startLogged(t, "pgbouncer", exec.Command(bin, args...)).logs
	logged(t, logs, `(listening on 127\.0\.0\.1)`)
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/arbiter?sslmode=disable", user, listen)
}

// freeLoopbackPort returns a TCP port on 127.0.0.1 that was free a moment
// ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// callbacks is a webhook receiver that counts each event type per task.
type callbacks struct {
	mu   sync.Mutex
	seen map[string]int // "type task_id" → deliveries
}

func (c *callbacks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var event struct {
		Type string `json:"type"`
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&event); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.seen[event.Type+" "+event.Data.ID]++
	c.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (c *callbacks) count(eventType, id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[eventType+" "+id]
}

// apiSend sends a JSON API request with the key (and an Idempotency-Key
// when idempotencyKey is not empty) and decodes the answer; it may run in
// any goroutine.
func apiSend(method, target, key, idempotencyKey, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return res.StatusCode, nil, err
	}
	var answer map[string]any
	if err := json.Unmarshal(raw, &answer); err != nil {
		return res.StatusCode, nil, fmt.Errorf("%d %s: %w", res.StatusCode, raw, err)
	}
	return res.StatusCode, answer, nil
}

// apiSendAgain is apiSend sent again while it is not answered (no
// answer, or 502, 503 or 504: a replica gone, a balancer without one, a
// database that did not answer in time), as a client of the service does,
// until the test's patience runs out; again counts the requests sent
// again. A create is sent again with its idempotency key.
func apiSendAgain(t *testing.T, again *atomic.Int64, method, target, key, idempotencyKey, body string) (int, map[string]any, error) {
	for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
		status, answer, err := apiSend(method, target, key, idempotencyKey, body)
		if err == nil && status != http.StatusBadGateway && status != http.StatusServiceUnavailable && status != http.StatusGatewayTimeout {
			return status, answer, nil
		}
		again.Add(1)
		if time.Now().After(deadline) {
			return status, answer, fmt.Errorf("%s %s was never answered: %d %v", method, target, status, err)
		}
	}
}

// TestPooler_ServesThroughPgBouncerInTransactionMode runs two `arbiter
// serve` processes whose store goes through PgBouncer in transaction mode,
// with fewer server connections than the processes' pools, so that
// consecutive statements of one process land on different server
// connections: a statement prepared on one, or an unnamed statement parsed
// and bound in two round trips, would fail on another. LISTEN and the
// migrations go directly (ARBITER_DATABASE_LISTEN_URL). Concurrent
// creates through both servers are decided by the verifier, every
// long-poll on the other server is woken by the decision, every callback
// is delivered once, and a retried create with its idempotency key gives
// the same task. A call the database did not answer in time (503, on a
// busy machine where two server connections serve every statement of two
// processes) is sent again.
func TestPooler_ServesThroughPgBouncerInTransactionMode(t *testing.T) {
	t.Parallel()
	direct := dbtest.URL(t, db.Postgres)
	pooled := pgbouncer(t, direct, 2)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant", "content": `{"verdict":"approve","confidence":0.97,"rationale":"small refund"}`}}}})
	}))
	defer provider.Close()
	received := &callbacks{seen: map[string]int{}}
	receiver := httptest.NewServer(received)
	defer receiver.Close()

	getenv := env(map[string]string{
		"ARBITER_DATABASE_URL":          pooled,
		"ARBITER_DATABASE_POOLER":       "transaction",
		"ARBITER_DATABASE_LISTEN_URL":   direct,
		"ARBITER_AGENT":                 "openai",
		"ARBITER_AGENT_BASE_URL":        provider.URL,
		"ARBITER_AGENT_MODEL":           "judge-1",
		"ARBITER_WEBHOOK_ALLOW_PRIVATE": "1",
	})
	// Both migrate at start, through the direct connection's session lock.
	bases := []string{serve(t, getenv), serve(t, getenv)}
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))

	const n = 40
	var again atomic.Int64
	type outcome struct {
		id, retriedID, waited string
		err                   error
	}
	outcomes := make([]outcome, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			o := &outcomes[i]
			create := bases[i%2] + "/v1/tasks"
			body := fmt.Sprintf(`{"prompt":"Refund order %d?","allowed_verdicts":["approve","reject"],"callback_url":%q}`,
				i, receiver.URL+"/hook")
			idempotencyKey := fmt.Sprintf("order-%d", i)
			status, task, err := apiSendAgain(t, &again, "POST", create, key, idempotencyKey, body)
			if err != nil || status != http.StatusOK {
				o.err = fmt.Errorf("create %d = %d %v %v", i, status, task, err)
				return
			}
			o.id, _ = task["id"].(string)
			// The other server waits for the decision: its own listener,
			// on its direct connection, hears of it.
			status, task, err = apiSendAgain(t, &again, "GET", bases[(i+1)%2]+"/v1/tasks/"+o.id+"?wait=60&status=completed", key, "", "")
			if err != nil || status != http.StatusOK {
				o.err = fmt.Errorf("wait for %s = %d %v %v", o.id, status, task, err)
				return
			}
			o.waited, _ = task["status"].(string)
			status, task, err = apiSendAgain(t, &again, "POST", bases[(i+1)%2]+"/v1/tasks", key, idempotencyKey, body)
			if err != nil || status != http.StatusOK {
				o.err = fmt.Errorf("retried create %d = %d %v %v", i, status, task, err)
				return
			}
			o.retriedID, _ = task["id"].(string)
		})
	}
	wg.Wait()
	for i, o := range outcomes {
		switch {
		case o.err != nil:
			t.Error(o.err)
		case o.waited != "completed":
			t.Errorf("the wait for task %d ended %q, want completed", i, o.waited)
		case o.retriedID != o.id:
			t.Errorf("the retried create %d gave %s, want %s", i, o.retriedID, o.id)
		}
	}
	if t.Failed() {
		return
	}
	status, list := testutil.APICall(t, "GET", bases[0]+"/v1/tasks?limit=100", key, "")
	if tasks, _ := list["tasks"].([]any); status != http.StatusOK || len(tasks) != n {
		t.Errorf("the account lists %d tasks (%d), want %d", len(tasks), status, n)
	}
	for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
		delivered := 0
		for _, o := range outcomes {
			if received.count("task.completed", o.id) > 0 {
				delivered++
			}
		}
		if delivered == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d callbacks delivered: %v", delivered, n, received.seen)
		}
	}
	for _, o := range outcomes {
		if c := received.count("task.completed", o.id); c != 1 {
			t.Errorf("task %s's callback was delivered %d times", o.id, c)
		}
	}
	t.Logf("%d calls not answered in time and sent again", again.Load())
}

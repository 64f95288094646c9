package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// host is one `arbiter serve` replica run as a process of its own (this
// test binary as arbiter), listening on a loopback address of its own.
type host struct {
	cmd  *exec.Cmd
	addr string // host:port
	log  string // the file of its log
	done chan struct{}
	// exit is how the process ended, set before done is closed.
	exit error
}

// startHost starts `arbiter serve` on ip with vars as its environment and
// waits until it listens.
func startHost(t *testing.T, ip string, vars map[string]string) *host {
	t.Helper()
	logFile, err := os.CreateTemp(t.TempDir(), "serve-*.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logFile.Close() })
	cmd := exec.Command(os.Args[0], "serve", "--addr", ip+":0")
	cmd.Env = append(os.Environ(), "ARBITER_TEST_RUN_MAIN=1")
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &host{cmd: cmd, log: logFile.Name(), done: make(chan struct{})}
	go func() {
		h.exit = cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-h.done
	})
	listening := regexp.MustCompile(`msg=listening addr=(\S+)`)
	for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
		if m := listening.FindStringSubmatch(h.logs()); m != nil {
			h.addr = m[1]
			return h
		}
		select {
		case <-h.done:
			t.Fatalf("serve on %s stopped: %s", ip, h.logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve on %s did not listen: %s", ip, h.logs())
		}
	}
}

func (h *host) logs() string {
	b, _ := os.ReadFile(h.log)
	return string(b)
}

// haproxy starts Debian's HAProxy on a free loopback port in front of the
// hosts, balancing requests round robin among those whose /readyz answers
// 200 (checked every 100 ms), and returns its base URL. It skips the test
// when haproxy is not installed (.ci/run installs it).
func haproxy(t *testing.T, hosts []*host) string {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		if _, statErr := os.Stat("/usr/sbin/haproxy"); statErr != nil {
			t.Skip("haproxy is not installed (apt-get install haproxy; .ci/run installs it)")
		}
		bin = "/usr/sbin/haproxy"
	}
	port := freeLoopbackPort(t)
	var servers strings.Builder
	for i, h := range hosts {
		fmt.Fprintf(&servers, "    server replica%d %s check\n", i+1, h.addr)
	}
	cfg := fmt.Sprintf(`global
    maxconn 2000
defaults
    mode http
    timeout connect 2s
    timeout client 120s
    timeout server 120s
    timeout check 2s
frontend arbiter
    bind 127.0.0.1:%d
    default_backend replicas
backend replicas
    http-response set-header X-Replica %%[srv_name]
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
    default-server inter 100ms fall 1 rise 1
%s`, port, servers.String())
	dir := t.TempDir()
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testutil.SyncBuffer{}
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy:\n%s", logs.String())
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	// Ready once every replica has answered through it.
	seen := map[string]bool{}
	for deadline := testutil.Patience(t); len(seen) < len(hosts); time.Sleep(20 * time.Millisecond) {
		if res, err := http.Get(base + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				seen[res.Header.Get("X-Replica")] = true
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy did not reach the %d replicas (%v):\n%s", len(hosts), seen, logs.String())
		}
	}
	return base
}

// loopbackIPs are the three hosts' addresses. Network namespaces would
// need the test Postgres to listen beyond 127.0.0.1; every 127/8 address
// is the loopback interface's, so three addresses stand for three hosts.
var loopbackIPs = []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}

// TestThreeHosts_ReplicasBehindHAProxySurviveAKillAndADrain runs three
// `arbiter serve` processes on three loopback addresses behind HAProxy on
// one Postgres. Through the balancer, every per-client and per-account
// limit holds to its value across the three. Then creates load the
// balancer, each waited for by a long-poll, while one replica is killed
// (SIGKILL) and another drained (SIGTERM): every create a client was
// answered is stored once under its idempotency key, every one is decided
// once by the verifier (the killed replica's leases run out and another
// takes them), every long-poll ends with the decision, and every decision
// is queued for its callback once and delivered.
func TestThreeHosts_ReplicasBehindHAProxySurviveAKillAndADrain(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.URL(t, db.Postgres)
	// The verifier takes a moment to answer, as a model does, so that
	// calls and waits are in flight when the faults come. It is sure of
	// the load's refunds and unsure of the limit checks' MCP questions
	// (orders "ord_…"), which wait for a person and hold their slots.
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		time.Sleep(50 * time.Millisecond)
		confidence := 0.97
		if strings.Contains(string(body), "ord_") {
			confidence = 0.1
		}
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant", "content": fmt.Sprintf(`{"verdict":"approve","confidence":%g,"rationale":"small refund"}`, confidence)}}}})
	}))
	defer provider.Close()
	received := &callbacks{seen: map[string]int{}}
	receiver := httptest.NewServer(received)
	defer receiver.Close()
	vars := map[string]string{
		"ARBITER_DATABASE_URL":          dbURL,
		"ARBITER_MIGRATE":               "off",
		"ARBITER_TRUSTED_PROXIES":       "127.0.0.0/8",
		"ARBITER_AGENT":                 "openai",
		"ARBITER_AGENT_BASE_URL":        provider.URL,
		"ARBITER_AGENT_MODEL":           "judge-1",
		"ARBITER_AGENT_TIMEOUT":         "1s",
		"ARBITER_WEBHOOK_ALLOW_PRIVATE": "1",
		// The balancer checks /readyz every 100 ms: a draining replica
		// leaves it before it stops taking connections.
		"ARBITER_DRAIN_DELAY": "1s",
	}
	getenv := env(vars)
	runOK(t, getenv, "migrate")
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))
	hosts := make([]*host, len(loopbackIPs))
	var starting sync.WaitGroup
	for i, ip := range loopbackIPs {
		starting.Go(func() { hosts[i] = startHost(t, ip, vars) })
	}
	starting.Wait()
	if t.Failed() {
		return
	}
	lb := haproxy(t, hosts)

	replicas := make([]string, len(hosts))
	for i, h := range hosts {
		replicas[i] = "http://" + h.addr
	}
	t.Run("Limits", func(t *testing.T) { checkLimitsAcross(t, []string{lb}, replicas, key, dbURL) })

	t.Run("KillAndDrain", func(t *testing.T) {
		store, err := sql.Open("postgres", dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		var before int
		if err := store.QueryRow(`SELECT count(*) FROM tasks`).Scan(&before); err != nil {
			t.Fatal(err)
		}
		const (
			total   = 240 // creates answered in all
			killAt  = 60  // answered creates when a replica is killed
			drainAt = 120 // … and when another is drained
		)
		var (
			answered atomic.Int64
			cut      atomic.Int64 // requests the balancer could not complete
			mu       sync.Mutex
			ids      = map[string]string{} // idempotency key → task id
			problems []error
		)
		fail := func(err error) {
			mu.Lock()
			problems = append(problems, err)
			mu.Unlock()
		}
		send := func(method, target, idempotencyKey, body string) (int, map[string]any, error) {
			return apiSendAgain(t, &cut, method, target, key, idempotencyKey, body)
		}
		killed, drained := make(chan struct{}), make(chan struct{})
		go func() {
			for answered.Load() < killAt {
				time.Sleep(5 * time.Millisecond)
			}
			_ = hosts[0].cmd.Process.Signal(syscall.SIGKILL)
			close(killed)
			for answered.Load() < drainAt {
				time.Sleep(5 * time.Millisecond)
			}
			_ = hosts[1].cmd.Process.Signal(syscall.SIGTERM)
			close(drained)
		}()
		var next atomic.Int64
		var clients sync.WaitGroup
		for range 12 {
			clients.Go(func() {
				for {
					i := next.Add(1)
					if i > total {
						return
					}
					idempotencyKey := fmt.Sprintf("load-%d", i)
					body := fmt.Sprintf(`{"prompt":"Refund order %d?","allowed_verdicts":["approve","reject"],"callback_url":%q}`, i, receiver.URL+"/hook")
					status, task, err := send("POST", lb+"/v1/tasks", idempotencyKey, body)
					id, _ := task["id"].(string)
					if err != nil || status != http.StatusOK || id == "" {
						fail(fmt.Errorf("create %d = %d %v %v", i, status, task, err))
						continue
					}
					answered.Add(1)
					mu.Lock()
					ids[idempotencyKey] = id
					mu.Unlock()
					for {
						status, task, err = send("GET", lb+"/v1/tasks/"+id+"?wait=60&status=completed", "", "")
						if err != nil || status != http.StatusOK {
							fail(fmt.Errorf("wait for %s = %d %v %v", id, status, task, err))
							break
						}
						if task["status"] == "completed" {
							break
						}
						// A wait that ended before the decision (its
						// replica drained) is asked again.
					}
				}
			})
		}
		clients.Wait()
		for _, fault := range []chan struct{}{killed, drained} {
			select {
			case <-fault:
			default:
				t.Fatalf("the load ended before the faults: %d creates answered", answered.Load())
			}
		}
		for _, err := range problems {
			t.Error(err)
		}
		select {
		case <-hosts[1].done:
			if hosts[1].exit != nil {
				t.Errorf("the drained replica ended with %v: %s", hosts[1].exit, hosts[1].logs())
			}
		case <-time.After(time.Until(testutil.Patience(t))):
			t.Errorf("the drained replica did not stop: %s", hosts[1].logs())
		}
		if len(ids) != total {
			t.Fatalf("%d creates answered, want %d", len(ids), total)
		}
		// Every create answered is stored once, under its key, and decided
		// once; no other task was stored.
		var tasks, keyed, decidedTwice int
		if err := store.QueryRow(`SELECT count(*) FROM tasks`).Scan(&tasks); err != nil {
			t.Fatal(err)
		}
		if err := store.QueryRow(`SELECT count(*) FROM idempotency_keys WHERE idempotency_key LIKE 'load-%'`).Scan(&keyed); err != nil {
			t.Fatal(err)
		}
		if tasks-before != total || keyed != total {
			t.Errorf("%d tasks stored, %d under the load's keys, for %d creates", tasks-before, keyed, total)
		}
		for idempotencyKey, id := range ids {
			var stored, status string
			err := store.QueryRow(`SELECT k.task_id, t.status FROM idempotency_keys k JOIN tasks t ON t.id = k.task_id
				WHERE k.idempotency_key = $1`, idempotencyKey).Scan(&stored, &status)
			switch {
			case err != nil:
				t.Errorf("the create under %s answered %s is not stored: %v", idempotencyKey, id, err)
			case stored != id:
				t.Errorf("the create under %s was answered %s but stored as %s", idempotencyKey, id, stored)
			case status != "completed":
				t.Errorf("task %s is %s", id, status)
			}
		}
		if err := store.QueryRow(`SELECT count(*) FROM (SELECT task_id FROM attempts WHERE verdict IS NOT NULL
			GROUP BY task_id HAVING count(*) > 1) twice`).Scan(&decidedTwice); err != nil {
			t.Fatal(err)
		}
		if decidedTwice != 0 {
			t.Errorf("%d tasks decided twice", decidedTwice)
		}
		var queuedTwice int
		if err := store.QueryRow(`SELECT count(*) FROM (SELECT task_id FROM webhook_messages WHERE event_type = 'task.completed'
			GROUP BY task_id HAVING count(*) > 1) twice`).Scan(&queuedTwice); err != nil {
			t.Fatal(err)
		}
		if queuedTwice != 0 {
			t.Errorf("%d tasks' callbacks queued twice", queuedTwice)
		}
		// Callbacks are delivered at least once: one whose replica was
		// killed between sending it and recording it is sent again.
		var redelivered int
		for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
			delivered := 0
			redelivered = 0
			for _, id := range ids {
				if c := received.count("task.completed", id); c > 0 {
					delivered++
					redelivered += c - 1
				}
			}
			if delivered == total {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d callbacks delivered", delivered, total)
			}
		}
		t.Logf("%d creates answered and decided once; %d requests cut by the kill and the drain and sent again; %d callbacks sent again",
			total, cut.Load(), redelivered)
	})
}

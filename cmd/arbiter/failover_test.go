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
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter/internal/testutil"
)

// pgClusters makes Postgres clusters of a test's own under one directory,
// with Debian's postgres binaries run as the postgres user.
type pgClusters struct {
	bin, root string
	uid, gid  int
}

// newPGClusters returns the test's clusters' maker, and skips the test
// when Debian's postgres binaries or the postgres user are missing
// (scripts/dev-postgres installs them).
func newPGClusters(t *testing.T) *pgClusters {
	t.Helper()
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		t.Skip("Debian's postgresql is not installed (scripts/dev-postgres installs it)")
	}
	pgUser, err := user.Lookup("postgres")
	if err != nil {
		t.Skip("no postgres user to run a cluster as")
	}
	c := &pgClusters{bin: filepath.Dir(matches[len(matches)-1])}
	c.uid, _ = strconv.Atoi(pgUser.Uid)
	c.gid, _ = strconv.Atoi(pgUser.Gid)
	if os.Geteuid() != 0 && os.Geteuid() != c.uid {
		t.Skip("the failover drill runs its clusters as postgres: run it as root or postgres")
	}
	// Postgres refuses to run as root, and wants its directories its own.
	if c.root, err = os.MkdirTemp("", "arbiter-failover-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(c.root) })
	if err := os.Chmod(c.root, 0o755); err != nil {
		t.Fatal(err)
	}
	return c
}

// dir makes a directory of the postgres user's.
func (c *pgClusters) dir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(c.root, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, c.uid, c.gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// exec runs one of the postgres binaries as the postgres user.
func (c *pgClusters) exec(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(c.bin, name)}, args...)...)
	}
	cmd.Dir = c.root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// run is exec that fails t.
func (c *pgClusters) run(t *testing.T, name string, args ...string) {
	t.Helper()
	if err := c.exec(name, args...); err != nil {
		t.Fatal(err)
	}
}

// start starts the cluster in dir and stops it at the test's end.
func (c *pgClusters) start(t *testing.T, dir string) {
	t.Helper()
	if err := c.exec("pg_ctl", "-D", dir, "-w", "-l", filepath.Join(dir, "log"), "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		t.Fatalf("%v\n%s", err, log)
	}
	t.Cleanup(func() { _ = c.exec("pg_ctl", "-D", dir, "-m", "immediate", "stop") })
}

// primaryAndStandby starts a primary cluster on primaryHost and a
// streaming standby of it (pg_basebackup -R -X stream, hot standby) on
// standbyHost, each with its extra settings, and returns their
// directories and their port. Both take one port, as a deployment's two
// database hosts do: lib/pq's URL takes one port for all its hosts.
func (c *pgClusters) primaryAndStandby(t *testing.T, primaryHost, standbyHost string, primaryConf, standbyConf []string) (primary, standby string, port int) {
	t.Helper()
	primary, standby = c.dir(t, "primary"), c.dir(t, "standby")
	port = freeLoopbackPort(t)
	c.run(t, "initdb", "-D", primary, "-U", "postgres", "--auth=trust", "--no-sync")
	c.configure(t, primary, append([]string{"listen_addresses = '" + primaryHost + "'", fmt.Sprintf("port = %d", port),
		"unix_socket_directories = '" + c.dir(t, "primary-sockets") + "'", "wal_level = replica", "max_wal_senders = 4",
		"fsync = off", "max_connections = 60"}, primaryConf...)...)
	c.start(t, primary)
	c.run(t, "pg_basebackup", "-h", primaryHost, "-p", strconv.Itoa(port), "-U", "postgres", "-D", standby, "-R", "-X", "stream", "--no-sync")
	c.configure(t, standby, append([]string{"listen_addresses = '" + standbyHost + "'",
		"unix_socket_directories = '" + c.dir(t, "standby-sockets") + "'", "hot_standby = on"}, standbyConf...)...)
	c.start(t, standby)
	return primary, standby, port
}

// configure adds the lines to the settings of the cluster in dir.
func (c *pgClusters) configure(t *testing.T, dir string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
}

// openDirect opens a pool on the postgres database of the cluster at
// host:port, closed when the test ends.
func openDirect(t *testing.T, host string, port int) *sql.DB {
	t.Helper()
	d, err := sql.Open("postgres", fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=disable", host, port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// gatedVerifier is a model server (OpenAI's chat completions) that
// approves every task with confidence 0.97 at once, but for a task whose
// prompt names a gate ("[gate:NAME]"): its call is held until the test
// opens the gate. It counts the calls of each order ("Refund order N?").
type gatedVerifier struct {
	mu    sync.Mutex
	gates map[string]chan struct{}
	held  map[string]int // the calls of each gate that arrived
	calls map[string]int // the calls of each order
}

var (
	gateMark  = regexp.MustCompile(`\[gate:(\w+)\]`)
	orderMark = regexp.MustCompile(`Refund order (\w+)\?`)
)

func newGatedVerifier() *gatedVerifier {
	return &gatedVerifier{gates: map[string]chan struct{}{}, held: map[string]int{}, calls: map[string]int{}}
}

func (v *gatedVerifier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if m := orderMark.FindSubmatch(body); m != nil {
		v.mu.Lock()
		v.calls[string(m[1])]++
		v.mu.Unlock()
	}
	if m := gateMark.FindSubmatch(body); m != nil {
		v.mu.Lock()
		gate := v.gateLocked(string(m[1]))
		v.held[string(m[1])]++
		v.mu.Unlock()
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
	}
	json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
		"role": "assistant", "content": `{"verdict":"approve","confidence":0.97,"rationale":"small refund"}`}}}})
}

func (v *gatedVerifier) gateLocked(name string) chan struct{} {
	if v.gates[name] == nil {
		v.gates[name] = make(chan struct{})
	}
	return v.gates[name]
}

// open lets the held calls of the gate, and those to come, answer; once
// per gate.
func (v *gatedVerifier) open(name string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	close(v.gateLocked(name))
}

// waitHeld waits until n calls of the gate are held: their tasks were
// claimed, and the verifier is being asked.
func (v *gatedVerifier) waitHeld(t *testing.T, name string, n int) {
	t.Helper()
	for deadline := testutil.Patience(t); ; time.Sleep(10 * time.Millisecond) {
		v.mu.Lock()
		held := v.held[name]
		v.mu.Unlock()
		if held >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls held at gate %s, want %d", held, name, n)
		}
	}
}

// longPoll is the answer of a long-poll, and when it came.
type longPoll struct {
	status int
	task   map[string]any
	err    error
	at     time.Time
}

// waiting sends GET base/v1/tasks/{id}?wait=60 with key to a server that
// admits one waiting request per key (ARBITER_MAX_WAITERS_PER_KEY=1), and
// returns, once the server holds the request waiting, the channel its
// answer comes on. It is waiting once a second wait of the key is refused
// (429); a long-poll refused while that probe waited is sent again. The
// task must stay undecided until waiting returns.
func waiting(t *testing.T, base, key, id string) <-chan longPoll {
	t.Helper()
	answer := make(chan longPoll, 1)
	go func() {
		for {
			status, task, err := apiSend("GET", base+"/v1/tasks/"+id+"?wait=60", key, "", "")
			if err == nil && status == http.StatusTooManyRequests {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			answer <- longPoll{status: status, task: task, err: err, at: time.Now()}
			return
		}
	}()
	for deadline := testutil.Patience(t); ; time.Sleep(50 * time.Millisecond) {
		status, body, err := apiSend("GET", base+"/v1/tasks/"+id+"?wait=1", key, "", "")
		if err == nil && status == http.StatusTooManyRequests {
			return answer
		}
		if err != nil || status != http.StatusOK || time.Now().After(deadline) {
			t.Fatalf("the long-poll of %s never waited: the probe was answered %d %v %v", id, status, body, err)
		}
	}
}

// loggedAt returns when the first line of logs with the message msg was
// logged, once there is one.
func loggedAt(t *testing.T, logs *testutil.SyncBuffer, msg string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, logged(t, logs, `time=(\S+) level=\w+ msg="`+regexp.QuoteMeta(msg)+`"`))
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// TestFailover_PromotedStandbyKeepsEveryAcceptedTask is the failover
// drill: a primary with one synchronous standby (streaming replication
// from pg_basebackup, synchronous_commit on), two `arbiter serve` on a URL
// that names both with target_session_attrs=read-write — A without a
// worker, B with the verifier — and clients creating tasks through both
// with idempotency keys, sending again what was refused. The primary is
// stopped at once (as a crash) while the load runs and the standby
// promoted:
//
//   - every create that was answered is on the new primary, none twice,
//     and both servers write again without a restart;
//   - long-polls waiting on both servers when the primary died, for tasks
//     whose verifier calls were in flight, are answered with the decision
//     the worker records on the new primary;
//   - both servers' LISTEN connections reconnect to the new primary: a
//     long-poll on A started after that is woken by B's decision far
//     sooner than its wait;
//   - B's worker decides every task, those created after the promotion
//     too.
//
// It logs how long creates were refused and when the listeners were back.
func TestFailover_PromotedStandbyKeepsEveryAcceptedTask(t *testing.T) {
	t.Parallel()
	pg := newPGClusters(t)
	const primaryHost, standbyHost = "127.0.0.5", "127.0.0.6"
	primary, standby, port := pg.primaryAndStandby(t, primaryHost, standbyHost,
		[]string{"synchronous_commit = on", "synchronous_standby_names = 'standby'"},
		[]string{"cluster_name = 'standby'",
			// Promoted, it has no standby of its own to wait for (the
			// primary's setting came with the base backup).
			"synchronous_standby_names = ''"})

	onPrimary := openDirect(t, primaryHost, port)
	for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
		var state string
		_ = onPrimary.QueryRow(`SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby'`).Scan(&state)
		if state == "sync" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the standby is not synchronous (%q)", state)
		}
	}

	verifier := newGatedVerifier()
	model := httptest.NewServer(verifier)
	defer model.Close()
	url := fmt.Sprintf("postgres://postgres@%s,%s:%d/postgres?sslmode=disable&target_session_attrs=read-write", primaryHost, standbyHost, port)
	settings := map[string]string{
		"ARBITER_DATABASE_URL": url,
		"ARBITER_DB_TIMEOUT":   "2s",
		// One waiting request per key: waiting knows a long-poll waits.
		"ARBITER_MAX_WAITERS_PER_KEY": "1",
	}
	getenvA := env(settings)
	withVerifier := map[string]string{
		"ARBITER_AGENT":          "openai",
		"ARBITER_AGENT_BASE_URL": model.URL,
		"ARBITER_AGENT_MODEL":    "judge-1",
		// The held calls last through the load and the promotion.
		"ARBITER_AGENT_TIMEOUT": "60s",
	}
	for k, v := range settings {
		withVerifier[k] = v
	}
	getenvB := env(withVerifier)
	baseA, logsA := serveWithLogs(t, getenvA, "--worker=false")
	baseB, logsB := serveWithLogs(t, getenvB)
	bases := [2]string{baseA, baseB}
	key := strings.TrimSpace(runOK(t, getenvA, "admin", "create-key", "--email", "ops@example.com"))
	var before int // the demo's tasks
	if err := onPrimary.QueryRow(`SELECT count(*) FROM tasks`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	var drilled []string // every task the drill created

	// Tasks whose verifier calls are in flight when the primary dies,
	// with a long-poll waiting for each, on A and on B in turn (one key
	// each: a key waits once).
	const held = 4
	polls := make([]<-chan longPoll, held)
	heldIDs := make([]string, held)
	for i := range held {
		body := fmt.Sprintf(`{"prompt":"Refund order H%d? [gate:before]","allowed_verdicts":["approve","reject"]}`, i)
		status, task := testutil.APICall(t, "POST", bases[i%2]+"/v1/tasks", key, body)
		if heldIDs[i], _ = task["id"].(string); status != http.StatusOK || heldIDs[i] == "" {
			t.Fatalf("create = %d %v", status, task)
		}
	}
	verifier.waitHeld(t, "before", held)
	for i, id := range heldIDs {
		pollKey := strings.TrimSpace(runOK(t, getenvA, "admin", "create-key", "--email", "ops@example.com", "--name", fmt.Sprintf("poll-%d", i)))
		polls[i] = waiting(t, bases[i%2], pollKey, id)
	}
	drilled = append(drilled, heldIDs...)

	const (
		total    = 200
		failAt   = 60
		senders  = 8
		attempts = 2000 // a create is sent again at most this often
	)
	var (
		answered  atomic.Int64
		mu        sync.Mutex
		ids       = map[string]string{}
		problems  []error
		refusedAt []time.Time // when a create was refused, the first and last
	)
	type failover struct{ crashed, promoted time.Time }
	failedOver := make(chan failover, 1)
	go func() {
		for answered.Load() < failAt {
			time.Sleep(5 * time.Millisecond)
		}
		// The primary goes as in a crash; the standby is promoted.
		crashed := time.Now()
		err := pg.exec("pg_ctl", "-D", primary, "-m", "immediate", "stop")
		if err == nil {
			err = pg.exec("pg_ctl", "-D", standby, "-w", "promote")
		}
		if err != nil {
			mu.Lock()
			problems = append(problems, err)
			mu.Unlock()
		}
		promoted := time.Now()
		// The calls in flight since before the crash answer now; B's
		// worker records them on the new primary.
		verifier.open("before")
		failedOver <- failover{crashed, promoted}
	}()
	var next atomic.Int64
	var clients sync.WaitGroup
	for range senders {
		clients.Go(func() {
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				idempotencyKey := fmt.Sprintf("drill-%d", i)
				body := fmt.Sprintf(`{"prompt":"Refund order %d?","allowed_verdicts":["approve","reject"]}`, i)
				var id string
				for try := 0; try < attempts && id == ""; try++ {
					status, task, err := apiSend("POST", bases[i%2]+"/v1/tasks", key, idempotencyKey, body)
					switch {
					case err == nil && status == http.StatusOK:
						id, _ = task["id"].(string)
					case err == nil && status == http.StatusServiceUnavailable:
						mu.Lock()
						refusedAt = append(refusedAt, time.Now())
						mu.Unlock()
						time.Sleep(20 * time.Millisecond)
					default:
						mu.Lock()
						problems = append(problems, fmt.Errorf("create %d = %d %v %v", i, status, task, err))
						mu.Unlock()
						return
					}
				}
				if id == "" {
					mu.Lock()
					problems = append(problems, fmt.Errorf("create %d was refused %d times", i, attempts))
					mu.Unlock()
					return
				}
				answered.Add(1)
				mu.Lock()
				ids[idempotencyKey] = id
				mu.Unlock()
			}
		})
	}
	clients.Wait()
	for _, err := range problems {
		t.Error(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("serve A:\n%s\nserve B:\n%s", logsA.String(), logsB.String())
		}
	}()
	if len(ids) != total {
		t.Fatalf("%d creates answered, want %d", len(ids), total)
	}
	drill := <-failedOver
	onStandby := openDirect(t, standbyHost, port)
	var stored int
	if err := onStandby.QueryRow(`SELECT count(*) FROM tasks`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if want := total + held; stored-before != want {
		t.Errorf("the new primary holds %d tasks, want the %d answered", stored-before, want)
	}
	for idempotencyKey, id := range ids {
		var got string
		if err := onStandby.QueryRow(`SELECT task_id FROM idempotency_keys WHERE idempotency_key = $1`, idempotencyKey).Scan(&got); err != nil || got != id {
			t.Errorf("the create under %s answered %s is %q on the new primary (%v)", idempotencyKey, id, got, err)
		}
		drilled = append(drilled, id)
	}

	// The long-polls that waited through the crash end with the decision,
	// within their wait.
	for i, poll := range polls {
		var answer longPoll
		select {
		case answer = <-poll:
		case <-time.After(time.Until(testutil.Patience(t))):
			t.Fatalf("the long-poll of %s was never answered", heldIDs[i])
		}
		if answer.err != nil || answer.status != http.StatusOK || answer.task["status"] != "completed" || answer.task["final_verdict"] != "approve" {
			t.Errorf("the long-poll on %s that waited through the promotion = %d %v %v, want the decision", []string{"A", "B"}[i%2], answer.status, answer.task, answer.err)
			continue
		}
		t.Logf("a long-poll on %s that waited through the promotion answered %v after it", []string{"A", "B"}[i%2], answer.at.Sub(drill.promoted).Round(time.Millisecond))
	}

	// Both listeners are back on the new primary; a long-poll on A started
	// now is woken by B's decision, which only LISTEN brings to A.
	listenersBack := loggedAt(t, logsA, "task listener reconnected")
	if atB := loggedAt(t, logsB, "task listener reconnected"); atB.After(listenersBack) {
		listenersBack = atB
	}
	status, task := testutil.APICall(t, "POST", baseA+"/v1/tasks", key, `{"prompt":"Refund order W? [gate:after]","allowed_verdicts":["approve","reject"]}`)
	id, _ := task["id"].(string)
	if status != http.StatusOK || id == "" {
		t.Fatalf("create after the promotion = %d %v", status, task)
	}
	drilled = append(drilled, id)
	verifier.waitHeld(t, "after", 1)
	pollKey := strings.TrimSpace(runOK(t, getenvA, "admin", "create-key", "--email", "ops@example.com", "--name", "poll-after"))
	poll := waiting(t, baseA, pollKey, id)
	decided := time.Now()
	verifier.open("after")
	var answer longPoll
	select {
	case answer = <-poll:
	case <-time.After(time.Until(testutil.Patience(t))):
		t.Fatal("the long-poll on A was never answered")
	}
	// wait=60: an answer by the wait's end is a missed notification.
	const woken = 10 * time.Second
	if answer.err != nil || answer.status != http.StatusOK || answer.task["status"] != "completed" || answer.at.Sub(decided) > woken {
		t.Errorf("the long-poll on A after the promotion = %d %v %v after %v, want the decision within %v",
			answer.status, answer.task, answer.err, answer.at.Sub(decided), woken)
	}

	// B's worker decides every task, those created after the promotion
	// too.
	var undecided int
	for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
		if err := onStandby.QueryRow(`SELECT count(*) FROM tasks WHERE id = ANY($1) AND (status <> 'completed' OR final_tier <> 'agent')`,
			pq.Array(drilled)).Scan(&undecided); err != nil {
			t.Fatal(err)
		}
		if undecided == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d tasks are not decided by the verifier", undecided, len(drilled))
		}
	}
	var lastDecidedMilli int64
	if err := onStandby.QueryRow(`SELECT max(completed_at) FROM tasks WHERE id = ANY($1)`, pq.Array(drilled)).Scan(&lastDecidedMilli); err != nil {
		t.Fatal(err)
	}
	lastDecided := time.UnixMilli(lastDecidedMilli)
	// Each was asked once: a call whose record met the outage is recorded
	// when the new primary answers, not asked again after its lease.
	verifier.mu.Lock()
	for order, n := range verifier.calls {
		if n != 1 {
			t.Errorf("the verifier was asked %d times about order %s, want once", n, order)
		}
	}
	if len(verifier.calls) != len(drilled) {
		t.Errorf("the verifier was asked about %d orders, want the %d tasks", len(verifier.calls), len(drilled))
	}
	verifier.mu.Unlock()

	refused := "no create was refused"
	if len(refusedAt) > 0 {
		first, last := refusedAt[0], refusedAt[0]
		for _, at := range refusedAt {
			if at.Before(first) {
				first = at
			}
			if at.After(last) {
				last = at
			}
		}
		refused = fmt.Sprintf("%d refusals (503) from %v to %v after the crash", len(refusedAt),
			first.Sub(drill.crashed).Round(time.Millisecond), last.Sub(drill.crashed).Round(time.Millisecond))
	}
	t.Logf("%d creates answered; %s; promoted %v after the crash; listeners back %v after the crash; "+
		"a long-poll on A woken %v after B's decision; the last task decided %v after the promotion",
		total, refused, drill.promoted.Sub(drill.crashed).Round(time.Millisecond), listenersBack.Sub(drill.crashed).Round(time.Millisecond),
		answer.at.Sub(decided).Round(time.Millisecond), lastDecided.Sub(drill.promoted).Round(time.Millisecond))
}

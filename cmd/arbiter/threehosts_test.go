package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/slack/slackfake"
	"github.com/arbiterhq/arbiter/worker"
)

// started is a program a test started (startLogged): its log, and how it
// ended.
type started struct {
	cmd  *exec.Cmd
	logs *testutil.SyncBuffer
	// done is closed once the process ended; exit is how, set before.
	done chan struct{}
	exit error
}

// startLogged starts cmd with its output in its log; it is killed when the
// test ends, and its log, under name, shown if the test failed.
func startLogged(t *testing.T, name string, cmd *exec.Cmd) *started {
	t.Helper()
	p := &started{cmd: cmd, logs: &testutil.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.exit = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s:\n%s", name, p.logs.String())
		}
	})
	return p
}

// host is one `arbiter serve` replica run as a process of its own (this
// test binary as arbiter), listening on an address of its own.
type host struct {
	*started
	addr string // host:port
}

// startHost starts `arbiter serve` as replica i of the network with vars
// as its environment and waits until it listens.
func startHost(t *testing.T, hn *hostNetwork, i int, vars map[string]string) *host {
	t.Helper()
	cmd := hn.command(i, os.Args[0], "serve", "--addr", hn.ips[i]+":0")
	cmd.Env = append(os.Environ(), "ARBITER_TEST_RUN_MAIN=1")
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	h := &host{started: startLogged(t, "serve on "+hn.ips[i], cmd)}
	listening := regexp.MustCompile(`msg=listening addr=(\S+)`)
	for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
		if m := listening.FindStringSubmatch(h.logs.String()); m != nil {
			h.addr = m[1]
			return h
		}
		select {
		case <-h.done:
			t.Fatalf("serve on %s stopped: %v", hn.ips[i], h.exit)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve on %s did not listen", hn.ips[i])
		}
	}
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
	logs := startLogged(t, "haproxy", exec.Command(bin, "-db", "-f", path)).logs
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

// threeHostsSlackSecret is the signing secret of the three-host test's
// Slack app.
const threeHostsSlackSecret = "0123456789abcdef0123456789abcdef"

// connectSlack connects the account of email, in the store at dbURL whose
// secrets secretKey seals, to a Slack app in HTTP mode signing with
// threeHostsSlackSecret, #refunds its channel, and links the Slack user
// userID, whose confirmed address is email, to the account's owner, as
// their visit to the link page does.
func connectSlack(t *testing.T, dbURL, secretKey, email, userID string) {
	t.Helper()
	keys, err := secretbox.Parse(secretKey)
	if err != nil {
		t.Fatal(err)
	}
	store := dbtest.OpenURL(t, dbURL, db.Options{Secrets: keys})
	ctx := context.Background()
	acct, err := store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.ConnectSlack(ctx, acct.ID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP, BotToken: "xoxb-hosts",
		SigningSecret: threeHostsSlackSecret, DefaultChannel: "#refunds"}, "T0FAKE", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
		t.Fatal(err)
	}
	person, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: email,
		Email: email, EmailVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	token, err := store.OfferChatLink(ctx, acct.ID, arbiter.ChatUser{Provider: arbiter.ChatSlack, Workspace: "T0FAKE",
		UserID: userID, Email: email})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.LinkChatUser(ctx, token, arbiter.Actor{Email: person.Email, PersonID: person.ID}); err != nil {
		t.Fatal(err)
	}
}

// slackClick is the body Slack posts when user clicks the verdict's
// button on the task's copy; Slack answers the click at responseURL.
func slackClick(user, taskID, verdict, responseURL, triggerID string) []byte {
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "team": map[string]any{"id": "T0FAKE"}, "user": map[string]any{"id": user},
		"response_url": responseURL, "trigger_id": triggerID,
		"actions": []map[string]any{{"type": "button", "block_id": "decide", "action_id": slack.ActionDecide + "_0",
			"value": slack.EncodeValue(taskID, "", verdict)}},
	})
	return []byte(url.Values{"payload": {string(payload)}}.Encode())
}

// copiesOf returns the fake Slack's messages, in every channel, that
// are copies of the task.
func copiesOf(fake *slackfake.Fake, channels []string, taskID string) []slackfake.Message {
	var out []slackfake.Message
	for _, channel := range channels {
		for _, m := range fake.Messages(slackfake.ChannelID(channel)) {
			if strings.Contains(m.Metadata, taskID) {
				out = append(out, m)
			}
		}
	}
	return out
}

// TestThreeHosts_ReplicasBehindHAProxySurviveAKillAndADrain runs three
// `arbiter serve` processes, each in a network namespace of its own (on
// three loopback addresses where namespaces are refused), behind HAProxy
// on one Postgres. Through the balancer, every per-client, per-key and
// per-account limit holds to its value across the three. Then creates
// load the balancer, each waited for by a long-poll, while one replica is
// killed (SIGKILL) and another drained (SIGTERM): every create a client
// was answered is stored once under its idempotency key, every one is
// decided once (the killed replica's leases run out and another takes
// them), every long-poll ends with the decision, and every decision is
// queued for its callback once and delivered. Every sixth task asks a
// person, in Slack: its copy is posted once, the person's click through
// the balancer decides it, and the copy is updated to the outcome once.
func TestThreeHosts_ReplicasBehindHAProxySurviveAKillAndADrain(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.URL(t, db.Postgres)
	hn := newHostNetwork(t, 3)
	// The verifier takes a moment to answer, as a model does, so that
	// calls and waits are in flight when the faults come. It is sure of
	// the load's refunds and unsure of the orders ("ord_…": the limit
	// checks' MCP questions, which wait for a person and hold their
	// slots, and the load's questions for a person in Slack).
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
	fake := slackfake.New(t)
	fake.AddUser(slackfake.User{ID: "UOPS", Email: "ops@example.com", EmailConfirmed: true})
	// The replicas reach the fake Slack's Web API and its response URLs
	// at one address, as Respond wants.
	slackURL := hn.reach(t, strings.TrimSuffix(fake.URL, "/api/"))
	callbackURL := hn.reach(t, receiver.URL) + "/hook"
	secretKey := secretbox.NewKey()
	vars := map[string]string{
		"ARBITER_DATABASE_URL":          hn.reach(t, dbURL),
		"ARBITER_MIGRATE":               "off",
		"ARBITER_TRUSTED_PROXIES":       hn.trusted,
		"ARBITER_AGENT":                 "openai",
		"ARBITER_AGENT_BASE_URL":        hn.reach(t, provider.URL),
		"ARBITER_AGENT_MODEL":           "judge-1",
		"ARBITER_AGENT_TIMEOUT":         "1s",
		"ARBITER_WEBHOOK_ALLOW_PRIVATE": "1",
		"ARBITER_SECRET_KEY":            secretKey,
		"ARBITER_SLACK_API_URL":         slackURL + "/api/",
		"ARBITER_MAX_WAITERS_PER_KEY":   strconv.Itoa(waitersPerKeyAcross),
		// The balancer checks /readyz every 100 ms: a draining replica
		// leaves it before it stops taking connections.
		"ARBITER_DRAIN_DELAY": "1s",
	}
	getenv := env(vars)
	runOK(t, getenv, "migrate")
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))
	hosts := make([]*host, len(hn.ips))
	var starting sync.WaitGroup
	for i := range hn.ips {
		starting.Go(func() { hosts[i] = startHost(t, hn, i, vars) })
	}
	starting.Wait()
	if t.Failed() {
		return
	}
	lb := haproxy(t, hosts)
	replicaNamed := map[string]*host{}
	replicas := make([]string, len(hosts))
	for i, h := range hosts {
		replicaNamed[fmt.Sprintf("replica%d", i+1)] = h
		replicas[i] = "http://" + h.addr
	}
	t.Run("Limits", func(t *testing.T) { checkLimitsAcross(t, []string{lb}, replicas, key, dbURL) })

	t.Run("KillAndDrain", func(t *testing.T) {
		// Connected after the limit checks, whose questions for a
		// person are not the load's.
		connectSlack(t, dbURL, secretKey, "ops@example.com", "UOPS")
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
			// Every slackEvery-th task asks a person, in one of
			// slackChannels channels: Slack takes a message a second in
			// a channel.
			slackEvery    = 6
			slackChannels = 10
		)
		var (
			answered atomic.Int64
			cut      atomic.Int64 // requests the balancer could not complete
			clicks   atomic.Int64 // clicks made again: their replica ended before answering
			mu       sync.Mutex
			ids      = map[string]string{} // idempotency key → task id
			inSlack  = map[string]string{} // task id → its channel
			problems []error
			killedAt time.Time
			// slowest is the longest a task took from its create's
			// answer to its decision: decided by the verifier, and by
			// the person in Slack.
			slowest [2]time.Duration
		)
		fail := func(err error) {
			mu.Lock()
			problems = append(problems, err)
			mu.Unlock()
		}
		send := func(method, target, idempotencyKey, body string) (int, map[string]any, error) {
			return apiSendAgain(t, &cut, method, target, key, idempotencyKey, body)
		}
		// decideInSlack waits for the task's copy in the channel, then
		// clicks "approve" on it through the balancer, and again when
		// the replica that acknowledged the click ended without
		// answering it (killed after its acknowledgement), as a person
		// whose click did nothing does.
		decideInSlack := func(id, channel string) error {
			deadline := testutil.Patience(t)
			for len(copiesOf(fake, []string{channel}, id)) == 0 {
				if time.Now().After(deadline) {
					return fmt.Errorf("task %s was not posted to %s", id, channel)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for attempt := 1; ; attempt++ {
				if time.Now().After(deadline) {
					return fmt.Errorf("the clicks on task %s were never answered", id)
				}
				click := fmt.Sprintf("%s-%d", id, attempt)
				body := slackClick("UOPS", id, "approve", slackURL+"/response?click="+click, "trigger-"+click)
				req, _ := http.NewRequest(http.MethodPost, lb+"/integrations/slack/interactions", strings.NewReader(string(body)))
				req.Header = slackfake.Signed(body, threeHostsSlackSecret, time.Now())
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					cut.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				}
				res.Body.Close()
				switch res.StatusCode {
				case http.StatusOK:
				case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
					cut.Add(1)
					time.Sleep(20 * time.Millisecond)
					continue
				default:
					return fmt.Errorf("a click on task %s = %d", id, res.StatusCode)
				}
				took := replicaNamed[res.Header.Get("X-Replica")]
				if took == nil {
					return fmt.Errorf("a click on task %s was answered by %q", id, res.Header.Get("X-Replica"))
				}
				answeredClick := func() bool {
					return slices.ContainsFunc(fake.Calls("response"), func(c slackfake.Call) bool { return c.Query.Get("click") == click })
				}
				for !answeredClick() {
					select {
					case <-took.done:
					case <-time.After(20 * time.Millisecond):
						if time.Now().Before(deadline) {
							continue
						}
					}
					break
				}
				if answeredClick() {
					return nil
				}
				clicks.Add(1)
			}
		}
		killed, drained := make(chan struct{}), make(chan struct{})
		go func() {
			for answered.Load() < killAt {
				time.Sleep(5 * time.Millisecond)
			}
			_ = hosts[0].cmd.Process.Signal(syscall.SIGKILL)
			mu.Lock()
			killedAt = time.Now()
			mu.Unlock()
			close(killed)
			for answered.Load() < drainAt {
				time.Sleep(5 * time.Millisecond)
			}
			_ = hosts[1].cmd.Process.Signal(syscall.SIGTERM)
			close(drained)
		}()
		began := time.Now()
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
					prompt, notify, channel := fmt.Sprintf("Refund order %d?", i), "", ""
					if i%slackEvery == 0 {
						channel = fmt.Sprintf("#refunds-%d", i/slackEvery%slackChannels)
						prompt, notify = fmt.Sprintf("Refund order ord_%d?", i), fmt.Sprintf(`,"notify":["slack:%s"]`, channel)
					}
					body := fmt.Sprintf(`{"prompt":%q,"allowed_verdicts":["approve","reject"],"callback_url":%q%s}`, prompt, callbackURL, notify)
					status, task, err := send("POST", lb+"/v1/tasks", idempotencyKey, body)
					id, _ := task["id"].(string)
					if err != nil || status != http.StatusOK || id == "" {
						fail(fmt.Errorf("create %d = %d %v %v", i, status, task, err))
						continue
					}
					answered.Add(1)
					created := time.Now()
					mu.Lock()
					ids[idempotencyKey] = id
					if channel != "" {
						inSlack[id] = channel
					}
					mu.Unlock()
					if channel != "" {
						if err := decideInSlack(id, channel); err != nil {
							fail(err)
							continue
						}
					}
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
					by := 0
					if channel != "" {
						by = 1
					}
					mu.Lock()
					slowest[by] = max(slowest[by], time.Since(created))
					mu.Unlock()
				}
			})
		}
		clients.Wait()
		loadTook := time.Since(began)
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
				t.Errorf("the drained replica ended with %v", hosts[1].exit)
			}
		case <-time.After(time.Until(testutil.Patience(t))):
			t.Errorf("the drained replica did not stop")
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
		// A task the person decided has the verifier's unsure verdict
		// and the person's: one of each tier at most.
		if err := store.QueryRow(`SELECT count(*) FROM (SELECT task_id FROM attempts WHERE verdict IS NOT NULL
			GROUP BY task_id, tier HAVING count(*) > 1) twice`).Scan(&decidedTwice); err != nil {
			t.Fatal(err)
		}
		if decidedTwice != 0 {
			t.Errorf("%d tasks decided twice", decidedTwice)
		}
		var byPerson int
		if err := store.QueryRow(`SELECT count(DISTINCT task_id) FROM attempts WHERE tier = 'human' AND verdict = 'approve'
			AND reviewer = 'ops@example.com'`).Scan(&byPerson); err != nil {
			t.Fatal(err)
		}
		if byPerson != len(inSlack) || len(inSlack) != total/slackEvery {
			t.Errorf("%d tasks decided by the person in Slack, want %d", byPerson, total/slackEvery)
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
		waitedFrom := time.Now()
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
		callbacksTook := time.Since(waitedFrom)
		waitedFrom = time.Now()
		updatedAgain := checkSlackCopies(t, fake, slices.Collect(maps.Values(ids)), inSlack, slackChannels, killedAt)
		updatesTook := time.Since(waitedFrom)
		// The most calls the verifier got for one task: a task whose
		// lease lapsed, or whose call failed, was asked again.
		var mostCalls int
		if err := store.QueryRow(`SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM attempts a
			JOIN idempotency_keys k ON k.task_id = a.task_id
			WHERE k.idempotency_key LIKE 'load-%' AND a.tier = 'agent' GROUP BY a.task_id) calls`).Scan(&mostCalls); err != nil {
			t.Fatal(err)
		}
		t.Logf("load %v; %d creates answered and decided once, %d of them by a person in Slack; %d requests cut by the kill and the drain and sent again; "+
			"%d clicks made again; %d callbacks and %d Slack updates sent again; at most %d verifier calls for a task; "+
			"the slowest decision %v by the verifier, %v in Slack; then %v until every callback was delivered, %v until every copy was updated",
			loadTook.Round(100*time.Millisecond), total, len(inSlack), cut.Load(), clicks.Load(), redelivered, updatedAgain, mostCalls,
			slowest[0].Round(100*time.Millisecond), slowest[1].Round(100*time.Millisecond),
			callbacksTook.Round(100*time.Millisecond), updatesTook.Round(100*time.Millisecond))
	})
}

// checkSlackCopies waits until the copy of every task decided in Slack
// (inSlack: task id → its channel) is updated, then checks that each was
// posted once, to its channel alone, and updated to its outcome once,
// and that no other task of the load (tasks) was posted. A replica
// killed (at killedAt) after Slack took its update and before it
// recorded it leaves the update to be sent again, the same, by another
// once its claim lapsed (the Slack outbox's lease,
// worker.DefaultSlackLease): an update sent before the kill and again
// at least half a lease later is counted, and returned, not failed.
func checkSlackCopies(t *testing.T, fake *slackfake.Fake, tasks []string, inSlack map[string]string, slackChannels int, killedAt time.Time) (updatedAgain int) {
	t.Helper()
	channels := []string{"#refunds"}
	for k := range slackChannels {
		channels = append(channels, fmt.Sprintf("#refunds-%d", k))
	}
	for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
		updated := 0
		for id, channel := range inSlack {
			if copies := copiesOf(fake, []string{channel}, id); len(copies) > 0 && copies[0].Updates > 0 {
				updated++
			}
		}
		if updated == len(inSlack) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Slack copies updated", updated, len(inSlack))
		}
	}
	updates := fake.Calls("chat.update")
	for id, channel := range inSlack {
		copies := copiesOf(fake, channels, id)
		if len(copies) != 1 {
			t.Errorf("task %s has %d copies in Slack, want 1", id, len(copies))
			continue
		}
		m := copies[0]
		if !strings.HasPrefix(m.Text, "✅ approve — ops@example.com") {
			t.Errorf("task %s's copy in %s reads %q, not the person's decision", id, channel, m.Text)
		}
		var sent []time.Time
		for _, u := range updates {
			if u.Status == http.StatusOK && u.Form.Get("channel") == slackfake.ChannelID(channel) && u.Form.Get("ts") == m.TS {
				sent = append(sent, u.At)
			}
		}
		switch {
		case m.Updates == 1:
		case m.Updates == 2 && len(sent) == 2 && sent[0].Before(killedAt) && sent[1].After(killedAt) &&
			sent[1].Sub(sent[0]) > worker.DefaultSlackLease/2:
			updatedAgain++
		default:
			t.Errorf("task %s's copy in %s was updated %d times (at %v; the kill at %v), want once", id, channel, m.Updates, sent, killedAt)
		}
	}
	// A post whose answer was lost is looked for, not made again: one
	// call for each.
	posts := map[string]int{}
	for _, p := range fake.Calls("chat.postMessage") {
		for _, id := range tasks {
			if strings.Contains(p.Form.Get("metadata"), id) {
				posts[id]++
			}
		}
	}
	for _, id := range tasks {
		want := 0
		if _, ok := inSlack[id]; ok {
			want = 1
		}
		if posts[id] != want {
			t.Errorf("task %s was posted to Slack %d times, want %d", id, posts[id], want)
		}
	}
	return updatedAgain
}

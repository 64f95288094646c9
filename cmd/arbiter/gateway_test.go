package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter/internal/mcptest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// The gateway's tests run `arbiter gateway` (in the process, or as a
// process of its own where one is killed) in front of mcptest's bank, a
// real MCP server of the Go SDK run as a process of its own, against a
// real `arbiter serve` where a person decides on the desk. This test
// binary is both: with ARBITER_TEST_UPSTREAM_LOG set it is the bank, and
// with ARBITER_TEST_RUN_MAIN=1 it is arbiter.
func TestMain(m *testing.M) {
	if log := os.Getenv("ARBITER_TEST_UPSTREAM_LOG"); log != "" {
		u := &mcptest.Upstream{Log: log, Hold: os.Getenv("ARBITER_TEST_UPSTREAM_HOLD")}
		if err := u.Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bank:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv("ARBITER_TEST_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// gwArbiter is a real Arbiter for the gateway: `arbiter serve` on SQLite
// without a verifier, so that every task goes to a person; an account
// with its key; and its owner signed in on the desk.
type gwArbiter struct {
	base, key string
	logs      *testutil.SyncBuffer
	desk      *http.Client
}

func newGWArbiter(t *testing.T) *gwArbiter {
	t.Helper()
	getenv := env(map[string]string{"ARBITER_DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "a.db")})
	a := &gwArbiter{}
	a.base, a.logs = serveWithLogs(t, getenv)
	a.key = strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "owner@example.com"))
	jar, _ := cookiejar.New(nil)
	a.desk = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := a.desk.PostForm(a.base+"/signin/email", url.Values{"email": {"owner@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	link := loggedLink(t, a.logs)
	res, err = a.desk.PostForm(a.base+"/signin/email/confirm", url.Values{"token": {strings.TrimPrefix(link, a.base+"/signin/email/confirm?token=")}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return a
}

// gatewayTasks lists the tasks the gateway made, newest first.
func (a *gwArbiter) gatewayTasks(t *testing.T) []map[string]any {
	t.Helper()
	status, page := testutil.APICall(t, "GET", a.base+"/v1/tasks?source=arbiter-gateway&limit=100", a.key, "")
	if status != http.StatusOK {
		t.Fatalf("list tasks: %d %v", status, page)
	}
	var out []map[string]any
	for _, v := range page["tasks"].([]any) {
		out = append(out, v.(map[string]any))
	}
	return out
}

// waitForTask waits until the gateway has made n tasks and the newest
// waits for a person; it returns that one.
func (a *gwArbiter) waitForTask(t *testing.T, n int) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		tasks := a.gatewayTasks(t)
		if len(tasks) == n && tasks[0]["status"] == "human_needed" {
			return tasks[0]
		}
		if len(tasks) > n || time.Now().After(deadline) {
			t.Fatalf("the gateway's tasks: %v, want %d, the newest waiting for a person", tasks, n)
		}
	}
}

// decide decides task on the desk, as its form does: the verdict, the
// rationale, the digest of the action shown and the edits of form.
func (a *gwArbiter) decide(t *testing.T, task map[string]any, verdict, rationale string, edits url.Values) {
	t.Helper()
	form := url.Values{"verdict": {verdict}, "rationale": {rationale}}
	if action, ok := task["action"].(map[string]any); ok {
		form.Set("action_digest", action["digest"].(string))
	}
	for k, v := range edits {
		form[k] = v
	}
	res, err := a.desk.PostForm(a.base+"/review/tasks/"+task["id"].(string), form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("the desk answered %d to %v:\n%s", res.StatusCode, form, body)
	}
}

// gwSetup is what a gateway of a test runs against.
type gwSetup struct {
	arbiter *gwArbiter
	dir     string
	log     string // the bank's execution log
	hold    string // the bank's hold file, "" for none
	// upstreamURL, when set, is the bank's streamable HTTP endpoint, and
	// upstreamHeader the header the gateway sends it; else the gateway
	// runs the bank as its command.
	upstreamURL, upstreamHeader string
	policy                      string // the policy file
	// progress receives the progress tokens of the notifications the
	// agent gets.
	progress chan any
}

const gwPolicy = `
rules:
  - tool: [get_balance, echo, open_branch]
    allow: true
  - tool: delete_account
    deny: Accounts are closed by a person, not by the agent.
  - tool: transfer
    when: args.amount < 100
    allow: true
  - tool: transfer
    ask:
      task_type: transfer
      editable: [amount, memo]
`

func newGWSetup(t *testing.T, a *gwArbiter) *gwSetup {
	t.Helper()
	dir := t.TempDir()
	s := &gwSetup{arbiter: a, dir: dir, log: filepath.Join(dir, "executions.jsonl"), policy: filepath.Join(dir, "policy.yaml"),
		progress: make(chan any, 64)}
	if err := os.WriteFile(s.policy, []byte(gwPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// args are the command line of a gateway of s, before extra.
func (s *gwSetup) args(extra ...string) []string {
	upstream := "env ARBITER_TEST_UPSTREAM_LOG='" + s.log + "'"
	if s.hold != "" {
		upstream += " ARBITER_TEST_UPSTREAM_HOLD='" + s.hold + "'"
	}
	upstream += " '" + os.Args[0] + "'"
	from := []string{"--upstream-cmd", upstream}
	if s.upstreamURL != "" {
		from = []string{"--upstream-url", s.upstreamURL, "--upstream-header", s.upstreamHeader}
	}
	args := append(append([]string{"gateway"}, from...), "--policy", s.policy,
		"--state", filepath.Join(s.dir, "state.json"), "--arbiter-url", s.arbiter.base, "--api-key", s.arbiter.key)
	return append(args, extra...)
}

// executions returns the calls the bank ran.
func (s *gwSetup) executions(t *testing.T) []mcptest.Execution {
	t.Helper()
	e, err := mcptest.ReadLog(s.log)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// runGatewayInProcess runs `arbiter gateway` in the process on pipes and
// returns its log and the agent's side of its stdio; it must return
// cleanly once its stdin closes.
func runGatewayInProcess(t *testing.T, args []string) (*testutil.SyncBuffer, io.ReadCloser, io.WriteCloser) {
	t.Helper()
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	logs := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), args, env(nil), serverIn, serverOut, logs)
		serverOut.Close()
	}()
	t.Cleanup(func() {
		clientOut.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("arbiter gateway returned %v\n%s", err, logs.String())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("arbiter gateway did not return after its stdin closed\n%s", logs.String())
		}
	})
	return logs, clientIn, clientOut
}

// agent connects an MCP client of the Go SDK to a gateway in the process.
func (s *gwSetup) agent(t *testing.T, extra ...string) (*mcp.ClientSession, *testutil.SyncBuffer) {
	t.Helper()
	logs, in, out := runGatewayInProcess(t, s.args(extra...))
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case s.progress <- req.Params.ProgressToken:
			default:
			}
		},
	})
	session, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: in, Writer: out}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs.String())
	}
	t.Cleanup(func() { session.Close() })
	return session, logs
}

// callTool calls a tool and returns its result.
func callGW(t *testing.T, session *mcp.ClientSession, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// asyncCall calls a tool in the background; with a progress token, the
// gateway sends progress notifications while it holds the call.
func asyncCall(t *testing.T, session *mcp.ClientSession, tool string, args map[string]any, progressToken ...string) <-chan *mcp.CallToolResult {
	out := make(chan *mcp.CallToolResult, 1)
	params := &mcp.CallToolParams{Name: tool, Arguments: args}
	if len(progressToken) > 0 {
		params.SetProgressToken(progressToken[0])
	}
	go func() {
		res, err := session.CallTool(context.Background(), params)
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "protocol error: " + err.Error()}}}
		}
		out <- res
	}()
	return out
}

// answer waits for a call's result.
func answer(t *testing.T, ch <-chan *mcp.CallToolResult) *mcp.CallToolResult {
	t.Helper()
	select {
	case res := <-ch:
		return res
	case <-time.After(60 * time.Second):
		t.Fatal("the call did not answer")
	}
	return nil
}

// gwText is the text of a result.
func gwText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestGateway_AllowPassesThroughAndDenyReturnsTheReason(t *testing.T) {
	t.Parallel()
	s := newGWSetup(t, newGWArbiter(t))
	agent, _ := s.agent(t)
	if res := callGW(t, agent, "transfer", map[string]any{"to": "acc_2", "amount": 40}); res.IsError || gwText(res) != "Transferred 40 EUR to acc_2." {
		t.Errorf("an allowed transfer = %s", gwText(res))
	}
	res := callGW(t, agent, "delete_account", map[string]any{"account": "acc_1"})
	if !res.IsError || !strings.Contains(gwText(res), "Accounts are closed by a person, not by the agent.") {
		t.Errorf("a denied call = %s", gwText(res))
	}
	if e := s.executions(t); len(e) != 1 || e[0].Tool != "transfer" {
		t.Errorf("the bank ran %+v, want the allowed transfer alone", e)
	}
	if tasks := s.arbiter.gatewayTasks(t); len(tasks) != 0 {
		t.Errorf("allowed and denied calls made tasks: %v", tasks)
	}
}

func TestGateway_AskApprovedOnTheDeskRunsOnceWithTheArgs(t *testing.T) {
	t.Parallel()
	a := newGWArbiter(t)
	s := newGWSetup(t, a)
	agent, logs := s.agent(t)
	call := asyncCall(t, agent, "transfer", map[string]any{"to": "acc_2", "amount": 500, "memo": "rent"})
	task := a.waitForTask(t, 1)
	if task["task_type"] != "transfer" || !strings.Contains(task["prompt"].(string), "test-agent") || !strings.Contains(task["prompt"].(string), "transfer") {
		t.Errorf("the task = %v", task)
	}
	if len(s.executions(t)) != 0 {
		t.Fatal("the bank ran a held call before its approval")
	}
	a.decide(t, task, "approve", "Rent is due.", nil)
	res := answer(t, call)
	if res.IsError || !strings.Contains(gwText(res), "Transferred 500 EUR to acc_2.") {
		t.Fatalf("the approved call = %s", gwText(res))
	}
	e := s.executions(t)
	if len(e) != 1 || string(e[0].Args) != `{"to":"acc_2","amount":500,"memo":"rent"}` {
		t.Errorf("the bank ran %+v, want the transfer once with its args", e)
	}
	// Arbiter holds the claim: no other claim on the task holds.
	approved := waitStatus(t, a.base, a.key, task["id"].(string), "completed")["approved_action"].(map[string]any)
	status, body := testutil.APICall(t, "POST", a.base+"/v1/tasks/"+task["id"].(string)+"/execution", a.key,
		`{"digest":"`+approved["digest"].(string)+`","claim_id":"another"}`)
	if status != http.StatusConflict || body["code"] != "already_executed" {
		t.Errorf("another claim = %d %v, want 409 already_executed", status, body)
	}
	// The log names the tool, the task, the wait and the outcome; never
	// the arguments' values.
	line := regexp.MustCompile(`msg="gateway: held call" tool=transfer task=` + task["id"].(string) + ` wait=\S+ outcome=approved`)
	if !line.MatchString(logs.String()) {
		t.Errorf("no held call line in the log:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "acc_2") || strings.Contains(logs.String(), "rent") {
		t.Errorf("the log holds the arguments' values:\n%s", logs.String())
	}
}

// A reviewer changes the amount on the desk's edit form: the upstream runs
// once with the edited arguments, and the log calls the outcome edited.
func TestGateway_AskEditedOnTheDeskRunsWithTheEditedArgs(t *testing.T) {
	t.Parallel()
	a := newGWArbiter(t)
	s := newGWSetup(t, a)
	agent, logs := s.agent(t)
	call := asyncCall(t, agent, "transfer", map[string]any{"to": "acc_2", "amount": 500, "memo": "rent"})
	task := a.waitForTask(t, 1)
	a.decide(t, task, "approve", "Half now, half next month.", url.Values{"arg.amount": {"250"}})
	res := answer(t, call)
	if res.IsError || !strings.Contains(gwText(res), "Transferred 250 EUR to acc_2.") {
		t.Fatalf("the edited call = %s", gwText(res))
	}
	e := s.executions(t)
	if len(e) != 1 || string(e[0].Args) != `{"to":"acc_2","amount":250,"memo":"rent"}` {
		t.Errorf("the bank ran %+v, want the transfer once with the edited amount", e)
	}
	approved := waitStatus(t, a.base, a.key, task["id"].(string), "completed")["approved_action"].(map[string]any)
	if approved["edited"] != true || approved["digest"] == task["action"].(map[string]any)["digest"] {
		t.Errorf("the approved action = %v, want an edit with its own digest", approved)
	}
	if !strings.Contains(logs.String(), "outcome=edited") {
		t.Errorf("the log has no edited call:\n%s", logs.String())
	}
}

func TestGateway_AskRejectedDoesNotRunAndSaysWhy(t *testing.T) {
	t.Parallel()
	a := newGWArbiter(t)
	s := newGWSetup(t, a)
	agent, logs := s.agent(t)
	call := asyncCall(t, agent, "transfer", map[string]any{"to": "acc_9", "amount": 900})
	task := a.waitForTask(t, 1)
	a.decide(t, task, "reject", "acc_9 is not a payee we know.", nil)
	res := answer(t, call)
	if !res.IsError || !strings.Contains(gwText(res), "acc_9 is not a payee we know.") || !strings.Contains(gwText(res), "not made") {
		t.Errorf("the rejected call = %s", gwText(res))
	}
	if e := s.executions(t); len(e) != 0 {
		t.Errorf("the bank ran %+v, want nothing", e)
	}
	if !strings.Contains(logs.String(), "outcome=rejected") {
		t.Errorf("the log has no rejected call:\n%s", logs.String())
	}
}

// The agent calls again while the first call waits, and again after a
// "still waiting": one task, one run, and every call that waits gets its
// result.
func TestGateway_RetriesWhileWaitingMakeOneTaskAndOneRun(t *testing.T) {
	t.Parallel()
	a := newGWArbiter(t)
	s := newGWSetup(t, a)
	// The wait is long enough for a person to decide after both later
	// calls are held; the first two calls wait it out.
	agent, _ := s.agent(t, "--wait", "10s", "--progress-every", "50ms")
	args := map[string]any{"to": "acc_2", "amount": 500}
	first := callGW(t, agent, "transfer", args)
	task := a.waitForTask(t, 1)
	id := task["id"].(string)
	if !first.IsError || !strings.Contains(gwText(first), "Still waiting: task "+id) {
		t.Fatalf("the first call = %s, want still waiting on %s", gwText(first), id)
	}
	// The same call again: the same task.
	if again := callGW(t, agent, "transfer", map[string]any{"amount": 500, "to": "acc_2"}); !strings.Contains(gwText(again), "Still waiting: task "+id) {
		t.Fatalf("the call again = %s", gwText(again))
	}
	third, fourth := asyncCall(t, agent, "transfer", args, "third"), asyncCall(t, agent, "transfer", args, "fourth")
	// Both wait on the task (each has had a progress notification); a
	// person approves it.
	for waiting := map[any]bool{}; !waiting["third"] || !waiting["fourth"]; {
		select {
		case token := <-s.progress:
			waiting[token] = true
		case <-time.After(60 * time.Second):
			t.Fatalf("the calls sent again are not both held: %v", waiting)
		}
	}
	a.decide(t, task, "approve", "", nil)
	for _, ch := range []<-chan *mcp.CallToolResult{third, fourth} {
		if res := answer(t, ch); res.IsError || !strings.Contains(gwText(res), "Transferred 500 EUR") {
			t.Errorf("a waiting call = %s", gwText(res))
		}
	}
	if n := len(a.gatewayTasks(t)); n != 1 {
		t.Errorf("%d tasks, want one", n)
	}
	if e := s.executions(t); len(e) != 1 {
		t.Errorf("the bank ran %d times, want once: %+v", len(e), e)
	}
	// Once answered, the same call is a new one: a second task.
	asyncCall(t, agent, "transfer", args)
	if second := a.waitForTask(t, 2); second["id"] == id {
		t.Errorf("the call after its answer waits on %s again", id)
	}
}

// processAgent runs `arbiter gateway` as a process of its own (this test
// binary as arbiter) and connects the Go SDK's client to it with the
// SDK's command transport; it returns the session and the process.
// Its log is a file, not a pipe: the bank, its child, holds its stderr
// open when it is killed.
func (s *gwSetup) processAgent(t *testing.T) (*mcp.ClientSession, *exec.Cmd, func() string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], s.args()...)
	cmd.Env = append(os.Environ(), "ARBITER_TEST_RUN_MAIN=1")
	stderr, err := os.CreateTemp(s.dir, "gateway-*.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stderr.Close() })
	cmd.Stderr = stderr
	logs := func() string {
		b, _ := os.ReadFile(stderr.Name())
		return string(b)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1.0"}, nil)
	session, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, logs())
	}
	t.Cleanup(func() {
		session.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return session, cmd, logs
}

// The gateway is killed while the upstream runs an approved call, and
// started again; the agent calls again: the call is not run twice, and
// the answer says it ran.
func TestGateway_KilledAfterApprovalRunsOnce(t *testing.T) {
	t.Parallel()
	a := newGWArbiter(t)
	s := newGWSetup(t, a)
	s.hold = filepath.Join(s.dir, "release")
	t.Cleanup(func() { _ = os.WriteFile(s.hold, nil, 0o600) })
	agent, gw, _ := s.processAgent(t)
	args := map[string]any{"to": "acc_2", "amount": 500}
	asyncCall(t, agent, "transfer", args)
	task := a.waitForTask(t, 1)
	a.decide(t, task, "approve", "", nil)
	// The bank logs the call, then holds it; the gateway dies then.
	for deadline := time.Now().Add(60 * time.Second); len(s.executions(t)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the bank did not get the approved call")
		}
	}
	if err := gw.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Closing the session waits for the process: the SDK's command
	// transport Waits it, and a second Wait here would race with that.
	_ = agent.Close()
	if err := os.WriteFile(s.hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	again, _, logs := s.processAgent(t)
	res := callGW(t, again, "transfer", args)
	if !res.IsError || !strings.Contains(gwText(res), "has already run") || !strings.Contains(gwText(res), task["id"].(string)) {
		t.Errorf("the call after the restart = %s\n%s", gwText(res), logs())
	}
	if e := s.executions(t); len(e) != 1 {
		t.Errorf("the bank ran %d times, want once: %+v", len(e), e)
	}
	if n := len(a.gatewayTasks(t)); n != 1 {
		t.Errorf("%d tasks, want the one", n)
	}
}

// httpBank serves the bank over streamable HTTP, answering 401 to a
// request without the header "Authorization: Bearer up-secret"; it
// returns the endpoint and the count of requests refused.
func (s *gwSetup) httpBank(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	bank := (&mcptest.Upstream{Log: s.log}).NewServer()
	stream := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bank }, nil)
	refused := &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer up-secret" {
			refused.Add(1)
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		stream.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", refused
}

// The upstream is a streamable HTTP server (--upstream-url) that asks for
// a header (--upstream-header): allowed calls pass through, and a held
// call approved on the desk runs there once.
func TestGateway_UpstreamOverHTTP(t *testing.T) {
	t.Parallel()
	a := newGWArbiter(t)
	s := newGWSetup(t, a)
	var refused *atomic.Int64
	s.upstreamURL, refused = s.httpBank(t)
	s.upstreamHeader = "Authorization: Bearer up-secret"
	agent, logs := s.agent(t)
	tools, err := agent.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 5 {
		t.Fatalf("tools = %+v, %v, want the bank's five", tools, err)
	}
	if res := callGW(t, agent, "echo", map[string]any{"message": "over HTTP"}); res.IsError || gwText(res) != "over HTTP" {
		t.Errorf("an allowed call = %s", gwText(res))
	}
	call := asyncCall(t, agent, "transfer", map[string]any{"to": "acc_2", "amount": 500})
	task := a.waitForTask(t, 1)
	if len(s.executions(t)) != 0 {
		t.Fatal("the bank ran a held call before its approval")
	}
	a.decide(t, task, "approve", "", nil)
	if res := answer(t, call); res.IsError || !strings.Contains(gwText(res), "Transferred 500 EUR to acc_2.") {
		t.Errorf("the approved call = %s", gwText(res))
	}
	if e := s.executions(t); len(e) != 1 || string(e[0].Args) != `{"to":"acc_2","amount":500}` {
		t.Errorf("the bank ran %+v, want the transfer once", e)
	}
	if n := refused.Load(); n != 0 {
		t.Errorf("the bank refused %d requests without the header", n)
	}
	// The log names the upstream by its URL, and never the header.
	if !strings.Contains(logs.String(), "upstream="+strings.TrimSuffix(s.upstreamURL, "/mcp")) || strings.Contains(logs.String(), "up-secret") {
		t.Errorf("the log:\n%s", logs.String())
	}
}

// runListening runs `arbiter gateway --listen 127.0.0.1:0` in the process
// with getenv until the test ends, and returns its endpoint once it
// listens.
func runListening(t *testing.T, args []string, getenv func(string) string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, append(args, "--listen", "127.0.0.1:0"), getenv, nil, io.Discard, logs) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("arbiter gateway returned %v\n%s", err, logs.String())
		}
	})
	listening := regexp.MustCompile(`msg="gateway: listening" url=(\S+)`)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("arbiter gateway returned %v before listening\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("arbiter gateway does not listen:\n%s", logs.String())
		}
	}
}

// With ARBITER_GATEWAY_TOKEN set, --listen answers 401 to a request
// without the token, with another token, or with a part of it, and
// serves the agent that sends it.
func TestGateway_ListenAsksForTheToken(t *testing.T) {
	t.Parallel()
	s := newGWSetup(t, newGWArbiter(t))
	const token = "gw-token-0123456789"
	endpoint := runListening(t, s.args(), env(map[string]string{envGatewayToken: token}))
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	for name, authorization := range map[string]string{
		"no token":        "",
		"another token":   "Bearer gw-token-9876543210",
		"a part of it":    "Bearer gw-token",
		"more than it":    "Bearer " + token + "0",
		"another scheme":  "Basic " + token,
		"the token alone": token,
	} {
		req, _ := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer") ||
			strings.Contains(string(body), token) {
			t.Errorf("%s: %d %q %s, want 401 asking for a bearer token", name, res.StatusCode, res.Header.Get("WWW-Authenticate"), body)
		}
	}
	hc := &http.Client{Transport: headerTransport{header: http.Header{"Authorization": {"Bearer " + token}}, base: http.DefaultTransport}}
	c := mcp.NewClient(&mcp.Implementation{Name: "http-agent", Version: "1.0"}, nil)
	session, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatalf("the agent with the token: %v", err)
	}
	defer session.Close()
	if res := callGW(t, session, "echo", map[string]any{"message": "let in"}); res.IsError || gwText(res) != "let in" {
		t.Errorf("a call with the token = %s", gwText(res))
	}
}

package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/internal/mcptasks"
	"github.com/arbiterhq/arbiter/internal/mcptest"
)

// fakeArbiter is a function-field Arbiter for the gateway's unit tests;
// cmd/arbiter's tests run the gateway against a real server.
type fakeArbiter struct {
	create func(ctx context.Context, in client.TaskCreate) (*client.Task, error)
	wait   func(ctx context.Context, id string) (*client.Task, error)
	claim  func(ctx context.Context, id string, in client.ExecutionClaim) (*client.Execution, error)
}

func (f *fakeArbiter) CreateTask(ctx context.Context, in client.TaskCreate) (*client.Task, error) {
	return f.create(ctx, in)
}

func (f *fakeArbiter) GetTask(ctx context.Context, id string) (*client.Task, error) {
	return f.wait(ctx, id)
}

func (f *fakeArbiter) WaitTask(ctx context.Context, id string, _ *client.WaitOptions) (*client.Task, error) {
	return f.wait(ctx, id)
}

func (f *fakeArbiter) ClaimExecution(ctx context.Context, id string, in client.ExecutionClaim) (*client.Execution, error) {
	return f.claim(ctx, id, in)
}

// world is a gateway in front of the test bank, with an agent's client
// session on it, all in the process.
type world struct {
	gw    *Gateway
	agent *mcp.ClientSession
	log   string
	// changed receives the agent's tools/list_changed notifications.
	changed chan struct{}
}

func newWorld(t *testing.T, policy string, arb Arbiter) *world {
	t.Helper()
	dir := t.TempDir()
	w := &world{log: filepath.Join(dir, "executions.jsonl"), changed: make(chan struct{}, 8)}
	bank := (&mcptest.Upstream{Log: w.log}).NewServer()
	upClient, upServer := mcp.NewInMemoryTransports()
	if _, err := bank.Connect(context.Background(), upServer, nil); err != nil {
		t.Fatal(err)
	}
	var pol *Policy
	if policy != "" {
		var err error
		if pol, err = ParsePolicy("policy.yaml", []byte(policy)); err != nil {
			t.Fatal(err)
		}
	}
	if arb == nil {
		arb = &fakeArbiter{}
	}
	gw, err := New(context.Background(), Config{Upstream: upClient, UpstreamName: "bank", UpstreamID: "test", Policy: pol, Arbiter: arb})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	w.gw = gw
	agentT, gwT := mcp.NewInMemoryTransports()
	if _, err := gw.Server().Connect(context.Background(), rewritingTransport{gwT}, nil); err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1.0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { w.changed <- struct{}{} },
	})
	w.agent, err = c.Connect(context.Background(), agentT, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.agent.Close() })
	return w
}

func (w *world) call(t *testing.T, tool string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := w.agent.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func textOf(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func executions(t *testing.T, log string) []mcptest.Execution {
	t.Helper()
	e, err := mcptest.ReadLog(log)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The agent sees the upstream's tools, resources, templates and prompts
// as they are, and a change of the tools.
func TestGateway_MirrorsTheUpstream(t *testing.T) {
	w := newWorld(t, "rules:\n  - tool: \"*\"\n    allow: true\n", nil)
	ctx := context.Background()
	direct := (&mcptest.Upstream{}).NewServer()
	ct, st := mcp.NewInMemoryTransports()
	if _, err := direct.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	d, err := mcp.NewClient(&mcp.Implementation{Name: "direct"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want, err := d.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := w.agent.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON, _ := json.Marshal(want.Tools)
	gotJSON, _ := json.Marshal(got.Tools)
	if string(wantJSON) != string(gotJSON) {
		t.Errorf("tools through the gateway:\n%s\nwant the upstream's:\n%s", gotJSON, wantJSON)
	}
	if init := w.agent.InitializeResult(); init.ServerInfo.Name != "bank" || !strings.Contains(init.Instructions, "The bank's tools") ||
		!strings.Contains(init.Instructions, "Still waiting") {
		t.Errorf("initialize = %+v", init)
	}
	res, err := w.agent.ReadResource(ctx, &mcp.ReadResourceParams{URI: "bank://terms"})
	if err != nil || res.Contents[0].Text != "No overdrafts." {
		t.Errorf("resource = %+v, %v", res, err)
	}
	res, err = w.agent.ReadResource(ctx, &mcp.ReadResourceParams{URI: "bank://accounts/7"})
	if err != nil || res.Contents[0].Text != `{"balance":100}` {
		t.Errorf("templated resource = %+v, %v", res, err)
	}
	templates, err := w.agent.ListResourceTemplates(ctx, nil)
	if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate != "bank://accounts/{id}" {
		t.Errorf("templates = %+v, %v", templates, err)
	}
	prompt, err := w.agent.GetPrompt(ctx, &mcp.GetPromptParams{Name: "statement", Arguments: map[string]string{"account": "acc_1"}})
	if err != nil || prompt.Messages[0].Content.(*mcp.TextContent).Text != "Write the statement of account acc_1." {
		t.Errorf("prompt = %+v, %v", prompt, err)
	}

	// The upstream gains a tool: the agent is told, and lists it.
	w.call(t, "open_branch", map[string]any{})
	select {
	case <-w.changed:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent was not told the tools changed")
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		got, err := w.agent.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Tools) == len(want.Tools)+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tools after the change: %d", len(got.Tools))
		}
	}
}

func TestGateway_AllowPassesThroughAndDenyRefuses(t *testing.T) {
	w := newWorld(t, `
rules:
  - tool: get_balance
    allow: true
  - tool: transfer
    when: args.amount < 100
    allow: true
  - tool: delete_account
    deny: Accounts are closed by a person, not by the agent.
`, nil)
	res := w.call(t, "get_balance", map[string]any{"account": "acc_1"})
	if res.IsError || !strings.Contains(textOf(res), `"balance":100`) {
		t.Errorf("get_balance = %+v", res)
	}
	res = w.call(t, "transfer", map[string]any{"to": "acc_2", "amount": 40})
	if res.IsError || textOf(res) != "Transferred 40 EUR to acc_2." {
		t.Errorf("transfer = %s", textOf(res))
	}
	res = w.call(t, "delete_account", map[string]any{"account": "acc_1"})
	if !res.IsError || !strings.Contains(textOf(res), "Accounts are closed by a person, not by the agent.") {
		t.Errorf("delete_account = %+v", res)
	}
	if e := executions(t, w.log); len(e) != 1 || e[0].Tool != "transfer" {
		t.Errorf("executions = %+v, want the allowed transfer alone", e)
	}
}

// decidingArbiter is a fake Arbiter whose tasks are decided by the test.
type decidingArbiter struct {
	mu       sync.Mutex
	creates  []client.TaskCreate
	decided  chan *client.Task
	claims   []client.ExecutionClaim
	claimErr error
}

func (a *decidingArbiter) arbiter() *fakeArbiter {
	return &fakeArbiter{
		create: func(_ context.Context, in client.TaskCreate) (*client.Task, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.creates = append(a.creates, in)
			args, _ := json.Marshal(in.Action.Args)
			digest, err := client.ActionDigest(in.Action.Name, args)
			if err != nil {
				return nil, err
			}
			return &client.Task{ID: "tsk_0000000000000001", Status: client.StatusHumanNeeded,
				Action: &client.Action{Name: in.Action.Name, Args: args, Digest: digest}}, nil
		},
		wait: func(ctx context.Context, id string) (*client.Task, error) {
			select {
			case t := <-a.decided:
				return t, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
		claim: func(_ context.Context, id string, in client.ExecutionClaim) (*client.Execution, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.claims = append(a.claims, in)
			if a.claimErr != nil {
				return nil, a.claimErr
			}
			return &client.Execution{TaskID: id, Digest: in.Digest, ClaimID: in.ClaimID}, nil
		},
	}
}

// approved is the task approving name(args), edited from proposed when
// they differ.
func approved(t *testing.T, name, args, proposed string) *client.Task {
	t.Helper()
	verdict, tier := "approve", client.TierHuman
	digest, err := client.ActionDigest(name, json.RawMessage(args))
	if err != nil {
		t.Fatal(err)
	}
	a := &client.ApprovedAction{Name: name, Args: json.RawMessage(args), Digest: digest}
	if proposed != args {
		a.Edited, a.Patch = true, json.RawMessage(`[{"op":"replace","path":"/amount","value":80}]`)
	}
	return &client.Task{ID: "tsk_0000000000000001", Status: client.StatusCompleted, FinalVerdict: &verdict, FinalTier: &tier, Approved: a}
}

func TestGateway_AHeldCallRunsWithTheApprovedArgs(t *testing.T) {
	a := &decidingArbiter{decided: make(chan *client.Task, 1)}
	w := newWorld(t, "", a.arbiter())
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- w.call(t, "transfer", map[string]any{"to": "acc_2", "amount": 500, "memo": "rent"}) }()
	a.decided <- approved(t, "transfer", `{"amount":80,"memo":"rent","to":"acc_2"}`, `{"amount":500,"memo":"rent","to":"acc_2"}`)
	res := <-done
	if res.IsError || !strings.Contains(textOf(res), "Transferred 80 EUR to acc_2.") || !strings.Contains(textOf(res), "amount = 80") {
		t.Errorf("result = %s", textOf(res))
	}
	e := executions(t, w.log)
	if len(e) != 1 || string(e[0].Args) != `{"to":"acc_2","amount":80,"memo":"rent"}` {
		t.Errorf("executions = %+v", e)
	}
	if len(a.claims) != 1 || a.claims[0].Digest != approved(t, "transfer", `{"amount":80,"memo":"rent","to":"acc_2"}`, "").Approved.Digest {
		t.Errorf("claims = %+v", a.claims)
	}
	in := a.creates[0]
	if in.TaskType != DefaultTaskType || in.Action.Name != "transfer" || in.IdempotencyKey == "" || !strings.Contains(in.Prompt, "test-agent") ||
		!strings.Contains(in.Prompt, "transfer") || in.Action.Schema == nil {
		t.Errorf("create = %+v", in)
	}
}

func TestGateway_ATamperedApprovalDoesNotRun(t *testing.T) {
	a := &decidingArbiter{decided: make(chan *client.Task, 1)}
	w := newWorld(t, "", a.arbiter())
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- w.call(t, "transfer", map[string]any{"to": "acc_2", "amount": 500}) }()
	task := approved(t, "transfer", `{"amount":500,"to":"acc_2"}`, `{"amount":500,"to":"acc_2"}`)
	task.Approved.Args = json.RawMessage(`{"amount":5000,"to":"acc_2"}`) // not what the digest says
	a.decided <- task
	res := <-done
	if !res.IsError || !strings.Contains(textOf(res), "was not made") {
		t.Errorf("result = %s", textOf(res))
	}
	if e := executions(t, w.log); len(e) != 0 {
		t.Errorf("executions = %+v, want none", e)
	}
	if len(a.claims) != 0 {
		t.Errorf("claims = %+v, want none", a.claims)
	}
}

func TestGateway_AnAlreadyExecutedClaimDoesNotRun(t *testing.T) {
	a := &decidingArbiter{decided: make(chan *client.Task, 1),
		claimErr: &client.Error{StatusCode: 409, Code: client.CodeAlreadyExecuted, Message: "The action of task tsk_0000000000000001 was already claimed."}}
	w := newWorld(t, "", a.arbiter())
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- w.call(t, "transfer", map[string]any{"to": "acc_2", "amount": 500}) }()
	a.decided <- approved(t, "transfer", `{"amount":500,"to":"acc_2"}`, `{"amount":500,"to":"acc_2"}`)
	res := <-done
	if !res.IsError || !strings.Contains(textOf(res), "already run") {
		t.Errorf("result = %s", textOf(res))
	}
	if e := executions(t, w.log); len(e) != 0 {
		t.Errorf("executions = %+v, want none", e)
	}
}

// rawAgent speaks JSON-RPC to the gateway's stdio transport, one
// message a line, as a client that knows the Tasks utility would; the Go
// SDK's client has no "task" parameter.
type rawAgent struct {
	out     io.WriteCloser
	mu      sync.Mutex
	next    int64
	answers map[int64]chan *jsonrpc.Response
	init    *jsonrpc.Response
}

func newRawAgent(t *testing.T, gw *Gateway) *rawAgent {
	t.Helper()
	serverIn, agentOut := io.Pipe()
	agentIn, serverOut := io.Pipe()
	served := make(chan error, 1)
	go func() {
		served <- gw.ServeStdio(context.Background(), serverIn, serverOut)
		serverOut.Close()
	}()
	a := &rawAgent{out: agentOut, answers: map[int64]chan *jsonrpc.Response{}}
	go func() {
		lines := bufio.NewScanner(agentIn)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			msg, err := jsonrpc.DecodeMessage(lines.Bytes())
			if err != nil {
				continue
			}
			res, ok := msg.(*jsonrpc.Response)
			if !ok {
				continue // a notification or a request of the server's
			}
			id, _ := res.ID.Raw().(int64)
			a.mu.Lock()
			ch := a.answers[id]
			a.mu.Unlock()
			if ch != nil {
				ch <- res
			}
		}
	}()
	t.Cleanup(func() {
		agentOut.Close()
		if err := <-served; err != nil && !errors.Is(err, io.EOF) {
			t.Errorf("ServeStdio returned %v", err)
		}
	})
	a.init = a.call(t, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "raw-agent", "version": "1"}})
	a.write(t, &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage("{}")})
	return a
}

// write sends msg, a line.
func (a *rawAgent) write(t *testing.T, msg jsonrpc.Message) {
	t.Helper()
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.out.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

func (a *rawAgent) call(t *testing.T, method string, params any) *jsonrpc.Response {
	t.Helper()
	a.mu.Lock()
	a.next++
	id := a.next
	ch := make(chan *jsonrpc.Response, 1)
	a.answers[id] = ch
	a.mu.Unlock()
	b, _ := json.Marshal(params)
	rid, err := jsonrpc.MakeID(float64(id))
	if err != nil {
		t.Fatal(err)
	}
	a.write(t, &jsonrpc.Request{ID: rid, Method: method, Params: b})
	select {
	case res := <-ch:
		return res
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no answer", method)
	}
	return nil
}

func decodeResult[T any](t *testing.T, res *jsonrpc.Response) T {
	t.Helper()
	var out T
	if res.Error != nil {
		t.Fatalf("JSON-RPC error: %v", res.Error)
	}
	if err := json.Unmarshal(res.Result, &out); err != nil {
		t.Fatalf("%s: %v", res.Result, err)
	}
	return out
}

func TestGateway_TasksUtility(t *testing.T) {
	a := &decidingArbiter{decided: make(chan *client.Task, 1)}
	w := newWorld(t, "rules:\n  - tool: delete_account\n    deny: Not from the agent.\n  - tool: get_balance\n    allow: true\n", a.arbiter())
	agent := newRawAgent(t, w.gw)
	caps := decodeResult[struct {
		Capabilities struct {
			Tasks *struct {
				Requests struct {
					Tools struct {
						Call *struct{} `json:"call"`
					} `json:"tools"`
				} `json:"requests"`
			} `json:"tasks"`
		} `json:"capabilities"`
	}](t, agent.init)
	if caps.Capabilities.Tasks == nil || caps.Capabilities.Tasks.Requests.Tools.Call == nil {
		t.Errorf("initialize = %s, want the tasks capability", agent.init.Result)
	}
	list := decodeResult[struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}](t, agent.call(t, "tools/list", map[string]any{}))
	for _, tool := range list.Tools {
		if tool.Execution.TaskSupport != "optional" {
			t.Errorf("%s: taskSupport %q", tool.Name, tool.Execution.TaskSupport)
		}
	}

	type handle struct {
		TaskID, Status, StatusMessage string
	}
	created := decodeResult[struct{ Task handle }](t, agent.call(t, "tools/call", map[string]any{
		"name": "transfer", "arguments": map[string]any{"to": "acc_2", "amount": 500}, "task": map[string]any{"ttl": 60000}}))
	if created.Task.TaskID != "tsk_0000000000000001" || created.Task.Status != "working" {
		t.Fatalf("handle = %+v", created.Task)
	}
	if got := decodeResult[handle](t, agent.call(t, "tasks/get", map[string]any{"taskId": created.Task.TaskID})); got.Status != "working" {
		t.Errorf("tasks/get = %+v", got)
	}
	results := make(chan *jsonrpc.Response, 1)
	go func() { results <- agent.call(t, "tasks/result", map[string]any{"taskId": created.Task.TaskID}) }()
	a.decided <- approved(t, "transfer", `{"amount":500,"to":"acc_2"}`, `{"amount":500,"to":"acc_2"}`)
	result := decodeResult[struct {
		IsError bool
		Content []struct{ Text string }
		Meta    map[string]struct{ TaskID string } `json:"_meta"`
	}](t, <-results)
	if result.IsError || result.Content[0].Text != "Transferred 500 EUR to acc_2." || result.Meta[mcptasks.RelatedTaskMeta].TaskID != created.Task.TaskID {
		t.Errorf("tasks/result = %+v", result)
	}
	if got := decodeResult[handle](t, agent.call(t, "tasks/get", map[string]any{"taskId": created.Task.TaskID})); got.Status != "completed" {
		t.Errorf("tasks/get after = %+v", got)
	}
	if e := executions(t, w.log); len(e) != 1 {
		t.Errorf("executions = %+v", e)
	}
	// Allowed and denied calls as tasks get handles of their own.
	denied := decodeResult[struct{ Task handle }](t, agent.call(t, "tools/call", map[string]any{
		"name": "delete_account", "arguments": map[string]any{"account": "a"}, "task": map[string]any{}}))
	if !strings.HasPrefix(denied.Task.TaskID, "gwt_") || denied.Task.Status != "failed" || !strings.Contains(denied.Task.StatusMessage, "Not from the agent.") {
		t.Errorf("denied = %+v", denied.Task)
	}
	allowed := decodeResult[struct{ Task handle }](t, agent.call(t, "tools/call", map[string]any{
		"name": "get_balance", "arguments": map[string]any{"account": "a"}, "task": map[string]any{}}))
	res := decodeResult[struct {
		IsError           bool
		StructuredContent map[string]any
	}](t, agent.call(t, "tasks/result", map[string]any{"taskId": allowed.Task.TaskID}))
	if res.IsError || res.StructuredContent["balance"] != 100.0 {
		t.Errorf("allowed as a task = %+v", res)
	}
	for name, r := range map[string]*jsonrpc.Response{
		"unknown":     agent.call(t, "tasks/get", map[string]any{"taskId": "tsk_ffffffffffffffff"}),
		"no id":       agent.call(t, "tasks/result", map[string]any{}),
		"cancel":      agent.call(t, "tasks/cancel", map[string]any{"taskId": created.Task.TaskID}),
		"unknown too": agent.call(t, "tools/call", map[string]any{"name": "nope", "arguments": map[string]any{}, "task": map[string]any{}}),
	} {
		if r.Error == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestGateway_ProgressWhileHeld(t *testing.T) {
	a := &decidingArbiter{decided: make(chan *client.Task, 1)}
	w := newWorld(t, "", a.arbiter())
	w.gw.cfg.ProgressEvery = 20 * time.Millisecond
	progress := make(chan *mcp.ProgressNotificationParams, 16)
	ct, st := mcp.NewInMemoryTransports()
	if _, err := w.gw.Server().Connect(context.Background(), rewritingTransport{st}, nil); err != nil {
		t.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "progress-agent"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			select {
			case progress <- req.Params:
			default:
			}
		},
	})
	session, err := c.Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"to": "acc_2", "amount": 500}}
		params.SetProgressToken("p-1")
		res, _ := session.CallTool(context.Background(), params)
		done <- res
	}()
	var last float64
	for i := range 2 {
		p := <-progress
		if p.ProgressToken != "p-1" || !strings.Contains(p.Message, "tsk_0000000000000001") || p.Progress <= last {
			t.Errorf("progress %d = %+v", i, p)
		}
		last = p.Progress
	}
	a.decided <- approved(t, "transfer", `{"amount":500,"to":"acc_2"}`, `{"amount":500,"to":"acc_2"}`)
	if res := <-done; res == nil || res.IsError {
		t.Errorf("result = %+v", res)
	}
}

// The agent reaches the gateway over streamable HTTP with the Go SDK's
// client: tools listed, an allowed call runs, a denied one is refused,
// and a JSON-RPC batch is refused whole.
func TestGateway_StreamableHTTP(t *testing.T) {
	w := newWorld(t, "rules:\n  - tool: transfer\n    allow: true\n  - tool: delete_account\n    deny: Not from the agent.\n", nil)
	srv := httptest.NewServer(w.gw.HTTPHandler())
	defer srv.Close()
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "http-agent", Version: "1.0"}, nil)
	session, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	tools, err := session.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("tools = %+v, %v", tools, err)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "transfer", Arguments: map[string]any{"to": "acc_2", "amount": 40}})
	if err != nil || res.IsError || textOf(res) != "Transferred 40 EUR to acc_2." {
		t.Errorf("transfer = %+v, %v", res, err)
	}
	res, err = session.CallTool(ctx, &mcp.CallToolParams{Name: "delete_account", Arguments: map[string]any{"account": "acc_1"}})
	if err != nil || !res.IsError || !strings.Contains(textOf(res), "Not from the agent.") {
		t.Errorf("delete_account = %+v, %v", res, err)
	}
	if e := executions(t, w.log); len(e) != 1 || e[0].Tool != "transfer" {
		t.Errorf("executions = %+v, want the allowed call alone", e)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	batch, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(batch.Body)
	batch.Body.Close()
	if batch.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "-32600") {
		t.Errorf("a batch = %d %s, want 400 and -32600", batch.StatusCode, body)
	}
}

// recordSpans installs a tracer provider that keeps the spans ended while
// the test runs, in place of the global one (a no-op until telemetry's
// Setup), and returns them.
func recordSpans(t *testing.T) *tracetest.SpanRecorder {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	return rec
}

// heldSpan returns the gateway.held_call span of task's call, with its
// attributes as strings.
func heldSpan(t *testing.T, rec *tracetest.SpanRecorder, task string) (sdktrace.ReadOnlySpan, map[string]string) {
	t.Helper()
	for _, s := range rec.Ended() {
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		if s.Name() == "gateway.held_call" && attrs["arbiter.task_id"] == task {
			return s, attrs
		}
	}
	t.Fatalf("no gateway.held_call span of %s among %d spans", task, len(rec.Ended()))
	return nil, nil
}

// A held call whose task expires before anyone decides it answers the
// documented refusal, and the upstream never runs it; its span says so.
func TestGateway_AnExpiredTaskDoesNotRun(t *testing.T) {
	rec := recordSpans(t)
	a := &decidingArbiter{decided: make(chan *client.Task, 1)}
	w := newWorld(t, "", a.arbiter())
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- w.call(t, "transfer", map[string]any{"to": "acc_2", "amount": 500}) }()
	expiredAt := time.Now()
	a.decided <- &client.Task{ID: "tsk_0000000000000001", Status: client.StatusExpired, ExpiredAt: &expiredAt}
	res := <-done
	want := "Nobody decided task tsk_0000000000000001 before its deadline, and it expired: the call was not made."
	if !res.IsError || textOf(res) != want {
		t.Errorf("result = %q, want the error %q", textOf(res), want)
	}
	if e := executions(t, w.log); len(e) != 0 {
		t.Errorf("executions = %+v, want none", e)
	}
	if len(a.claims) != 0 {
		t.Errorf("claims = %+v, want none", a.claims)
	}
	span, attrs := heldSpan(t, rec, "tsk_0000000000000001")
	if attrs["mcp.tool.name"] != "transfer" || attrs["arbiter.gateway.outcome"] != "expired" || attrs["arbiter.gateway.wait_ms"] == "" {
		t.Errorf("the span's attributes = %v", attrs)
	}
	for k, v := range attrs {
		if strings.Contains(v, "acc_2") {
			t.Errorf("the span holds an argument's value: %s=%s", k, v)
		}
	}
	if span.Status().Code == codes.Error {
		t.Errorf("an expired call's span is an error: %v", span.Status())
	}
}

// An approved held call's span ends after the upstream answered, with
// the outcome approved; a failed claim's span is an error.
func TestGateway_HeldCallSpans(t *testing.T) {
	rec := recordSpans(t)
	a := &decidingArbiter{decided: make(chan *client.Task, 1)}
	w := newWorld(t, "", a.arbiter())
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- w.call(t, "transfer", map[string]any{"to": "acc_2", "amount": 500}) }()
	a.decided <- approved(t, "transfer", `{"amount":500,"to":"acc_2"}`, `{"amount":500,"to":"acc_2"}`)
	if res := <-done; res.IsError {
		t.Fatalf("result = %s", textOf(res))
	}
	span, attrs := heldSpan(t, rec, "tsk_0000000000000001")
	if attrs["arbiter.gateway.outcome"] != "approved" || span.Status().Code == codes.Error {
		t.Errorf("the approved call's span: %v %v", attrs, span.Status())
	}
	if len(executions(t, w.log)) != 1 {
		t.Errorf("executions = %+v, want one", executions(t, w.log))
	}
}

// A client of protocol 2026-07-28 (the official Python SDK's, mcp 2)
// validates that every result says "resultType": "complete"; tools/list,
// which the gateway rewrites, says it too. Before, the rewritten result
// lost it, and that client refused the gateway's tools.
func TestGateway_ModernToolsListSaysComplete(t *testing.T) {
	w := newWorld(t, "", nil)
	agent := newRawAgent(t, w.gw)
	meta := map[string]any{"_meta": map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "modern-agent", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
	}}
	res := decodeResult[map[string]json.RawMessage](t, agent.call(t, "tools/list", meta))
	if string(res["resultType"]) != `"complete"` {
		t.Errorf("tools/list's resultType = %s, want \"complete\"", res["resultType"])
	}
	var tools []map[string]json.RawMessage
	if err := json.Unmarshal(res["tools"], &tools); err != nil || len(tools) != 5 || string(tools[0]["execution"]) != `{"taskSupport":"optional"}` {
		t.Errorf("tools = %s", res["tools"])
	}
	// A 2025-11-25 client gets no resultType: the field is new.
	old := decodeResult[map[string]json.RawMessage](t, agent.call(t, "tools/list", map[string]any{}))
	if _, ok := old["resultType"]; ok {
		t.Errorf("an older client's tools/list has a resultType: %s", old["resultType"])
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/openapi/openapitest"
	"github.com/arbiterhq/arbiter/web"
	"github.com/arbiterhq/arbiter/worker"
)

// mcpServer is a real Arbiter for the MCP tests: the router over a store,
// an in-process worker whose rules backend approves amounts under 50 with
// confidence 0.97 and leaves the rest to a person, served by httptest.
type mcpServer struct {
	store *db.DB
	// decider is the store reviewers decide through: on Postgres a second
	// store on the same database, as another server process would be, so
	// that only LISTEN/NOTIFY carries the decision to the waiting call; on
	// SQLite, which serves one process, the server's own store.
	decider *db.DB
	base    string
	srv     *httptest.Server
	// dialect and url name the store, for tests that edit it directly.
	dialect, url string
}

// mcpWriteTimeout is the test server's write timeout, shorter than the
// waits of the tests: a call that waits for a verdict must move its
// deadline past the wait, or its answer is lost.
const mcpWriteTimeout = time.Second

func newMCPServer(t *testing.T, dialect string) *mcpServer {
	t.Helper()
	url := dbtest.URL(t, dialect)
	store := dbtest.OpenURL(t, url, db.Options{})
	rules, err := agent.ParseRules("rules.txt", []byte("approve 0.97 context.amount < 50\n"))
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	w := worker.New(worker.Config{Queue: store, Verifier: rules, Health: store, Demo: store, Keys: store, Logger: logger,
		Concurrency: 2, AttemptTimeout: 10 * time.Second, Grace: 5 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })

	shuttingDown := make(chan struct{})
	router := &web.Router{
		Services:     web.Services{Tasks: store, Keys: store, Demo: store, Health: store, Queue: store, Watcher: store},
		KeyChecker:   web.NewKeyChecker(store, nil),
		Logger:       logger,
		TaskCreated:  func(int) { w.Notify() },
		ShuttingDown: shuttingDown,
	}
	srv := httptest.NewUnstartedServer(router.Routes())
	srv.Config.WriteTimeout = mcpWriteTimeout
	srv.Config.RegisterOnShutdown(func() { close(shuttingDown) })
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		wg.Wait()
	})
	s := &mcpServer{store: store, decider: store, base: srv.URL, srv: srv, dialect: dialect, url: url}
	if store.Dialect() == db.Postgres {
		s.decider = dbtest.OpenURL(t, url, db.Options{})
	}
	return s
}

// newAccount creates an account and a key of it.
func (s *mcpServer) newAccount(t *testing.T, email string) (accountID, key string) {
	t.Helper()
	account, err := s.store.FindOrCreateAccountByEmail(context.Background(), email)
	if err != nil {
		t.Fatal(err)
	}
	_, key, err = s.store.CreateAPIKey(context.Background(), account.ID, "mcp", arbiter.Actor{Email: email})
	if err != nil {
		t.Fatal(err)
	}
	return account.ID, key
}

// validatingTransport sends requests with an API key and checks every
// answer against the OpenAPI document.
type validatingTransport struct {
	t   *testing.T
	key string
}

func (v validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	if v.key != "" {
		req.Header.Set("Authorization", "Bearer "+v.key)
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		return res, nil // not expected here; left to the SDK, which fails the test
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	openapitest.ValidateResponse(v.t, req, res.StatusCode, res.Header, b)
	res.Body = io.NopCloser(bytes.NewReader(b))
	return res, nil
}

// mcpTransports connect an MCP client of the SDK to the server with a
// key: over Streamable HTTP at /v1/mcp, and over stdio to `arbiter mcp`
// run in-process, which calls the server through the Go client.
var mcpTransports = []struct {
	name    string
	connect func(t *testing.T, s *mcpServer, key string) *mcp.ClientSession
}{
	{"HTTP", func(t *testing.T, s *mcpServer, key string) *mcp.ClientSession {
		return connectMCP(t, &mcp.StreamableClientTransport{
			Endpoint:   s.base + "/v1/mcp",
			HTTPClient: &http.Client{Transport: validatingTransport{t: t, key: key}},
			MaxRetries: -1,
		})
	}},
	{"Stdio", func(t *testing.T, s *mcpServer, key string) *mcp.ClientSession {
		clientIn, clientOut := startStdioMCP(t, s, key)
		// Closing the session closes the server's stdin: arbiter mcp
		// returns (startStdioMCP's cleanup, registered first, runs last).
		return connectMCP(t, &mcp.IOTransport{Reader: clientIn, Writer: clientOut})
	}},
}

// startStdioMCP runs `arbiter mcp` in-process for key, and returns what it
// writes and a writer to its stdin. When the test ends, its stdin is
// closed and it must return cleanly within 30 seconds.
func startStdioMCP(t *testing.T, s *mcpServer, key string) (*io.PipeReader, *io.PipeWriter) {
	t.Helper()
	serverIn, clientOut := io.Pipe()
	clientIn, serverOut := io.Pipe()
	var stderr testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"mcp"},
			env(map[string]string{"SVC_BASE_URL": s.base, "SVC_API_KEY": key}), serverIn, serverOut, &stderr)
		serverOut.Close()
	}()
	t.Cleanup(func() {
		clientOut.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("arbiter mcp returned %v\n%s", err, stderr.String())
			}
		case <-time.After(time.Until(testutil.Patience(t))):
			t.Errorf("arbiter mcp did not return after its stdin closed")
		}
	})
	return clientIn, clientOut
}

// connectMCP connects a client of the SDK over transport.
func connectMCP(t *testing.T, transport mcp.Transport) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "arbiter-test", Version: "v0.0.1"}, nil)
	session, err := c.Connect(context.Background(), transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Close() })
	return session
}

// eachMCP runs fn once per store dialect and transport, against a fresh
// server per dialect and an account of its own per transport.
func eachMCP(t *testing.T, fn func(t *testing.T, s *mcpServer, session *mcp.ClientSession, accountID string)) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newMCPServer(t, dialect)
			for _, tr := range mcpTransports {
				t.Run(tr.name, func(t *testing.T) {
					accountID, key := s.newAccount(t, strings.ToLower(tr.name)+"@example.com")
					fn(t, s, tr.connect(t, s, key), accountID)
				})
			}
		})
	}
}

// toolAnswer is the structured answer of ask_verdict and get_task.
type toolAnswer struct {
	TaskID     string   `json:"task_id"`
	Status     string   `json:"status"`
	Verdict    *string  `json:"verdict"`
	Tier       *string  `json:"tier"`
	Confidence *float64 `json:"confidence"`
	Rationale  string   `json:"rationale"`
	Prompt     string   `json:"prompt"`
	CreatedAt  string   `json:"created_at"`
	Message    string   `json:"message"`
}

// callTool calls a tool and returns its result; a protocol failure fails
// the test.
func callTool(t *testing.T, session *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: a protocol failure: %v", name, err)
	}
	return res
}

// decodeResult decodes a successful result's structured content into out.
func decodeResult(t *testing.T, res *mcp.CallToolResult, out any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", resultText(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// toolErrorText returns the sentence of a tool error; a success fails the
// test.
func toolErrorText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a tool error, got %s", resultText(res))
	}
	return resultText(res)
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if text, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, text.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// refund is the arguments of an ask_verdict about a refund of amount.
func refund(prompt string, amount float64, extra map[string]any) map[string]any {
	args := map[string]any{
		"prompt":           prompt,
		"allowed_verdicts": []string{"approve", "reject"},
		"context":          map[string]any{"order": "ord_1", "amount": amount},
		"source":           "support-agent",
	}
	for k, v := range extra {
		args[k] = v
	}
	return args
}

// countTasks counts the account's tasks.
func countTasks(t *testing.T, s *mcpServer, accountID string) int {
	t.Helper()
	page, err := s.store.ListTasks(context.Background(), accountID, arbiter.TaskFilter{Limit: arbiter.MaxTaskPageSize})
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Tasks)
}

func TestMCP_ListsTheTools(t *testing.T) {
	t.Parallel()
	eachMCP(t, func(t *testing.T, s *mcpServer, session *mcp.ClientSession, _ string) {
		res, err := session.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]*mcp.Tool{}
		for _, tool := range res.Tools {
			got[tool.Name] = tool
		}
		for _, name := range []string{"ask_verdict", "get_task", "list_tasks"} {
			tool := got[name]
			if tool == nil || len(tool.Description) < 100 || tool.InputSchema == nil || tool.OutputSchema == nil {
				t.Errorf("tool %s = %+v, want a description for a model and both schemas", name, tool)
			}
		}
		if len(got) != 3 {
			t.Errorf("%d tools, want 3", len(got))
		}
		schema, _ := json.Marshal(got["ask_verdict"].InputSchema)
		for _, want := range []string{`"required":["prompt","allowed_verdicts"]`, `"wait_seconds"`, `"default":50`, `"maximum":60`, `"idempotency_key"`} {
			if !strings.Contains(string(schema), want) {
				t.Errorf("ask_verdict's input schema lacks %s: %s", want, schema)
			}
		}
		if init := session.InitializeResult(); init == nil || init.ServerInfo.Name != "arbiter" || !strings.Contains(init.Instructions, "ask_verdict") {
			t.Errorf("initialize answered %+v", init)
		}
	})
}

func TestMCP_AskVerdictDecidedByTheAgent(t *testing.T) {
	t.Parallel()
	eachMCP(t, func(t *testing.T, s *mcpServer, session *mcp.ClientSession, accountID string) {
		started := time.Now()
		var got toolAnswer
		decodeResult(t, callTool(t, session, "ask_verdict", refund("Refund order ord_1?", 20, nil)), &got)
		if got.Status != "completed" || got.Verdict == nil || *got.Verdict != "approve" || got.Tier == nil || *got.Tier != "agent" ||
			got.Confidence == nil || *got.Confidence != 0.97 || !strings.HasPrefix(got.TaskID, "tsk_") {
			t.Fatalf("ask_verdict = %+v", got)
		}
		if !strings.Contains(got.Message, `"approve"`) || !strings.Contains(got.Message, "automated verifier") {
			t.Errorf("message = %q", got.Message)
		}
		// Woken by the decision, not by the end of the 50 s wait.
		if elapsed := time.Since(started); elapsed > 30*time.Second {
			t.Errorf("ask_verdict answered after %s", elapsed)
		}
		stored, err := s.store.FindTaskByID(context.Background(), accountID, got.TaskID)
		if err != nil || stored.Touchpoint != "mcp" || stored.Source != "support-agent" ||
			string(stored.Context) != `{"amount":20,"order":"ord_1"}` {
			t.Errorf("stored task = %+v, %v", stored, err)
		}
	})
}

// TestMCP_AskVerdictKeepsTheContextAsSent: the context reaches the task as
// the call sent it, integers past 2^53 (a 19-digit order id) included,
// on both transports; the SDK reads a tool's arguments through float64.
func TestMCP_AskVerdictKeepsTheContextAsSent(t *testing.T) {
	t.Parallel()
	eachMCP(t, func(t *testing.T, s *mcpServer, session *mcp.ClientSession, accountID string) {
		sent := `{"order_id":1234567890123456789,"items":[{"sku":9007199254740993,"price":24.9}],"note":null}`
		var got toolAnswer
		decodeResult(t, callTool(t, session, "ask_verdict", refund("Refund order 1234567890123456789?", 20,
			map[string]any{"context": json.RawMessage(sent), "wait_seconds": 0})), &got)
		stored, err := s.store.FindTaskByID(context.Background(), accountID, got.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if string(stored.Context) != sent {
			t.Errorf("stored context = %s, want %s", stored.Context, sent)
		}
	})
}

func TestMCP_AskVerdictWaitsForAReviewer(t *testing.T) {
	t.Parallel()
	eachMCP(t, func(t *testing.T, s *mcpServer, session *mcp.ClientSession, accountID string) {
		const prompt = "Refund order ord_2, above the agent's limit?"
		answered := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := session.CallTool(context.Background(), &mcp.CallToolParams{
				Name: "ask_verdict", Arguments: refund(prompt, 500, map[string]any{"wait_seconds": 60}),
			})
			if err != nil {
				t.Errorf("ask_verdict: a protocol failure: %v", err)
			}
			answered <- res
		}()
		// The rules leave 500 to a person: wait for the task in the queue.
		var id string
		for deadline := testutil.Patience(t); id == ""; time.Sleep(10 * time.Millisecond) {
			queue, _, err := s.store.ListHumanQueue(context.Background(), accountID, arbiter.QueueView{Touchpoint: "mcp"}, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, task := range queue {
				if task.Prompt == prompt {
					id = task.ID
				}
			}
			if id == "" && time.Now().After(deadline) {
				t.Fatal("the task never reached a person")
			}
		}
		if _, err := s.decider.DecideTask(context.Background(), accountID, id, arbiter.HumanDecision{
			Verdict: "reject", Rationale: "Over the limit for this customer.", Reviewer: "reviewer@example.com",
		}); err != nil {
			t.Fatal(err)
		}
		var res *mcp.CallToolResult
		select {
		case res = <-answered:
		case <-time.After(time.Until(testutil.Patience(t))):
			t.Fatal("ask_verdict did not answer after the decision")
		}
		if res == nil {
			return
		}
		var got toolAnswer
		decodeResult(t, res, &got)
		if got.TaskID != id || got.Status != "completed" || got.Verdict == nil || *got.Verdict != "reject" ||
			got.Tier == nil || *got.Tier != "human" || got.Rationale != "Over the limit for this customer." {
			t.Errorf("ask_verdict = %+v", got)
		}
	})
}

func TestMCP_AskVerdictShortWaitAnswersThePendingTask(t *testing.T) {
	t.Parallel()
	eachMCP(t, func(t *testing.T, s *mcpServer, session *mcp.ClientSession, accountID string) {
		// Longer than the server's write timeout, which the call outlives.
		started := time.Now()
		var got toolAnswer
		decodeResult(t, callTool(t, session, "ask_verdict", refund("Refund order ord_3?", 900, map[string]any{"wait_seconds": 2})), &got)
		if elapsed := time.Since(started); elapsed < 2*time.Second {
			t.Errorf("ask_verdict answered after %s, before its wait was over", elapsed)
		}
		if got.Status == "completed" || got.Status == "expired" || got.Verdict != nil || got.Tier != nil || got.TaskID == "" {
			t.Fatalf("ask_verdict = %+v, want the undecided task", got)
		}
		for _, want := range []string{"Not decided within 2 seconds", "get_task", got.TaskID} {
			if !strings.Contains(got.Message, want) {
				t.Errorf("message %q lacks %q", got.Message, want)
			}
		}
		// get_task reads it later: the same task, with its prompt.
		var read toolAnswer
		decodeResult(t, callTool(t, session, "get_task", map[string]any{"task_id": got.TaskID}), &read)
		if read.TaskID != got.TaskID || read.Prompt != "Refund order ord_3?" || read.Verdict != nil || !strings.Contains(read.Message, "Not decided yet") {
			t.Errorf("get_task = %+v", read)
		}
		// A wait of 0 answers at once.
		var now toolAnswer
		decodeResult(t, callTool(t, session, "ask_verdict", refund("Refund order ord_4?", 900, map[string]any{"wait_seconds": 0})), &now)
		if now.Status == "completed" || now.TaskID == "" || now.TaskID == got.TaskID {
			t.Errorf("ask_verdict with wait_seconds 0 = %+v", now)
		}
	})
}

func TestMCP_BadRequestsAreToolErrorsWithTheAPISentence(t *testing.T) {
	t.Parallel()
	eachMCP(t, func(t *testing.T, s *mcpServer, session *mcp.ClientSession, accountID string) {
		before := countTasks(t, s, accountID)
		cases := []struct {
			name string
			tool string
			args map[string]any
			want string
		}{
			{"DuplicateVerdicts", "ask_verdict", map[string]any{"prompt": "Refund?", "allowed_verdicts": []string{"approve", "approve"}},
				`allowed_verdicts must not hold duplicates; "approve" appears twice.`},
			{"EmptyPrompt", "ask_verdict", map[string]any{"prompt": " ", "allowed_verdicts": []string{"approve"}},
				"prompt is required and must be a non-empty string."},
			{"NoVerdicts", "ask_verdict", map[string]any{"prompt": "Refund?", "allowed_verdicts": []string{}},
				"allowed_verdicts is required and must be a non-empty array of strings."},
			{"ThresholdOutOfRange", "ask_verdict", refund("Refund?", 1, map[string]any{"confidence_threshold": 1.5}),
				"confidence_threshold must be a number between 0 and 1."},
			{"ShortDeadline", "ask_verdict", refund("Refund?", 1, map[string]any{"deadline_seconds": 5}),
				"deadline_seconds must be a whole number of seconds from 60"},
			{"BadIdempotencyKey", "ask_verdict", refund("Refund?", 1, map[string]any{"idempotency_key": "caf\u00e9"}),
				"An idempotency key must be 1 to 255 printable ASCII characters"},
			{"WaitTooLong", "ask_verdict", refund("Refund?", 1, map[string]any{"wait_seconds": 61}),
				"wait_seconds must be a whole number of seconds from 0 to 60."},
			{"WaitNotWhole", "get_task", map[string]any{"task_id": "tsk_0123456789abcdef", "wait_seconds": 1.5},
				"wait_seconds must be a whole number of seconds from 0 to 60."},
			{"MissingPrompt", "ask_verdict", map[string]any{"allowed_verdicts": []string{"approve"}},
				"prompt is required and must be a non-empty string."},
			{"PromptNotAString", "ask_verdict", map[string]any{"prompt": 5, "allowed_verdicts": []string{"approve"}},
				"prompt must be a string."},
			{"UnknownArgument", "ask_verdict", map[string]any{"promt": "Refund?", "allowed_verdicts": []string{"approve"}},
				`The argument object has an unknown field "promt".`},
			{"LimitZero", "list_tasks", map[string]any{"limit": 0}, "limit must be a whole number from 1 to 100."},
			{"StatusNotAString", "list_tasks", map[string]any{"status": 1}, "status must be a string."},
			{"UnknownTask", "get_task", map[string]any{"task_id": "tsk_0123456789abcdef"}, "Task not found."},
			{"UnknownTaskWaiting", "get_task", map[string]any{"task_id": "tsk_0123456789abcdef", "wait_seconds": 30}, "Task not found."},
			{"NoTaskID", "get_task", map[string]any{"task_id": ""}, "task_id is required"},
			{"BadStatus", "list_tasks", map[string]any{"status": "done"}, "status must be one of pending,"},
			{"BadTime", "list_tasks", map[string]any{"created_after": "yesterday"}, "created_after must be a time in RFC 3339"},
			{"BadCursor", "list_tasks", map[string]any{"starting_after": "tsk_0123456789abcdef"}, "starting_after"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				started := time.Now()
				if msg := toolErrorText(t, callTool(t, session, c.tool, c.args)); !strings.Contains(msg, c.want) {
					t.Errorf("tool error %q lacks %q", msg, c.want)
				}
				if elapsed := time.Since(started); elapsed > 10*time.Second {
					t.Errorf("refused only after %s", elapsed)
				}
			})
		}
		// A call with several problems is told the first, in the order of
		// the arguments as sent (a Go map is sent with its keys sorted),
		// every time.
		many := map[string]any{"prompt": 5, "allowed_verdicts": "approve", "wait_seconds": 61, "confidence_threshold": "high"}
		for range 5 {
			if msg := toolErrorText(t, callTool(t, session, "ask_verdict", many)); msg != "allowed_verdicts must be a non-empty array of strings." {
				t.Errorf("a call with four problems was told %q, want allowed_verdicts'", msg)
			}
		}
		if after := countTasks(t, s, accountID); after != before {
			t.Errorf("refused calls stored %d tasks", after-before)
		}
	})
}

func TestMCP_SameIdempotencyKeyMakesOneTask(t *testing.T) {
	t.Parallel()
	eachMCP(t, func(t *testing.T, s *mcpServer, session *mcp.ClientSession, accountID string) {
		before := countTasks(t, s, accountID)
		args := refund("Refund order ord_5?", 30, map[string]any{"idempotency_key": "refund-ord_5"})
		var first, second toolAnswer
		decodeResult(t, callTool(t, session, "ask_verdict", args), &first)
		decodeResult(t, callTool(t, session, "ask_verdict", args), &second)
		if first.TaskID == "" || second.TaskID != first.TaskID || second.Status != "completed" || *second.Verdict != "approve" {
			t.Errorf("two calls with one key answered %+v and %+v", first, second)
		}
		if after := countTasks(t, s, accountID); after != before+1 {
			t.Errorf("two calls with one key made %d tasks", after-before)
		}
		// The key with another question is refused with the API's sentence.
		other := refund("Refund order ord_6?", 30, map[string]any{"idempotency_key": "refund-ord_5"})
		if msg := toolErrorText(t, callTool(t, session, "ask_verdict", other)); !strings.Contains(msg, "This idempotency key was used for a different request") {
			t.Errorf("a reused key answered %q", msg)
		}
		if after := countTasks(t, s, accountID); after != before+1 {
			t.Errorf("a reused key stored a task")
		}
	})
}

func TestMCP_DailyCapIsAToolErrorSayingWhenItResets(t *testing.T) {
	t.Parallel()
	eachMCP(t, func(t *testing.T, s *mcpServer, session *mcp.ClientSession, accountID string) {
		none := 0
		if err := s.store.SetDailyCap(context.Background(), accountID, &none); err != nil {
			t.Fatal(err)
		}
		msg := toolErrorText(t, callTool(t, session, "ask_verdict", refund("Refund?", 1, nil)))
		for _, want := range []string{"daily task cap is used up", "Try again in "} {
			if !strings.Contains(msg, want) {
				t.Errorf("tool error %q lacks %q", msg, want)
			}
		}
		if n := countTasks(t, s, accountID); n != 0 {
			t.Errorf("%d tasks stored past the cap", n)
		}
	})
}

// listPage is list_tasks' structured answer.
type listPage struct {
	Tasks []struct {
		TaskID  string  `json:"task_id"`
		Status  string  `json:"status"`
		Verdict *string `json:"verdict"`
		Prompt  string  `json:"prompt"`
		Source  string  `json:"source"`
	} `json:"tasks"`
	HasMore           bool   `json:"has_more"`
	NextStartingAfter string `json:"next_starting_after"`
}

func TestMCP_ListTasks(t *testing.T) {
	t.Parallel()
	eachMCP(t, func(t *testing.T, s *mcpServer, session *mcp.ClientSession, accountID string) {
		var ids []string
		for i := range 3 {
			var got toolAnswer
			decodeResult(t, callTool(t, session, "ask_verdict", refund(fmt.Sprintf("Refund order %d?", i), 10, nil)), &got)
			ids = append(ids, got.TaskID)
		}
		var page listPage
		decodeResult(t, callTool(t, session, "list_tasks", map[string]any{
			"final_tier": "agent", "touchpoint": "mcp", "limit": 2,
			"created_after": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339),
		}), &page)
		if len(page.Tasks) != 2 || !page.HasMore || page.Tasks[0].TaskID != ids[2] || page.Tasks[1].TaskID != ids[1] ||
			page.NextStartingAfter != ids[1] || page.Tasks[0].Verdict == nil || page.Tasks[0].Source != "support-agent" ||
			page.Tasks[0].Prompt != "Refund order 2?" {
			t.Fatalf("list_tasks = %+v", page)
		}
		next := page.NextStartingAfter
		page = listPage{}
		decodeResult(t, callTool(t, session, "list_tasks", map[string]any{
			"final_tier": "agent", "limit": 2, "starting_after": next,
		}), &page)
		if len(page.Tasks) != 1 || page.HasMore || page.Tasks[0].TaskID != ids[0] || page.NextStartingAfter != "" {
			t.Errorf("the next page = %+v", page)
		}
		page = listPage{}
		decodeResult(t, callTool(t, session, "list_tasks", map[string]any{"final_tier": "human"}), &page)
		if len(page.Tasks) != 0 {
			t.Errorf("final_tier human = %+v", page)
		}
	})
}

// mcpInitialize is an MCP initialize request.
const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`

// postMCP sends body to /v1/mcp with the headers and validates the answer
// against the OpenAPI document.
func postMCP(t *testing.T, base, method string, header map[string]string, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+"/v1/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	openapitest.ValidateResponse(t, req, res.StatusCode, res.Header, b)
	return res.StatusCode, res.Header, b
}

// apiErrorSentence checks an {"error": "…", "code": "…"} answer of status
// want and returns its sentence.
func apiErrorSentence(t *testing.T, status int, header http.Header, body []byte, want int) string {
	t.Helper()
	var e map[string]string
	if status != want || header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil || len(e) != 2 || e["error"] == "" || e["code"] == "" {
		t.Fatalf("answer = %d %s %s, want %d and {\"error\": \"…\", \"code\": \"…\"}", status, header.Get("Content-Type"), body, want)
	}
	return e["error"]
}

func TestMCP_HTTPNeedsAnActiveKey(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newMCPServer(t, dialect)
			_, key := s.newAccount(t, "a@example.com")

			status, h, b := postMCP(t, s.base, "POST", nil, mcpInitialize)
			apiErrorSentence(t, status, h, b, http.StatusUnauthorized)
			if h.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			status, h, b = postMCP(t, s.base, "POST", map[string]string{"Authorization": "Bearer svc_live_XYZ"}, mcpInitialize)
			apiErrorSentence(t, status, h, b, http.StatusUnauthorized)

			// The key works, until it is revoked (by another process on
			// Postgres): then it is refused within 2 seconds.
			if status, _, b := postMCP(t, s.base, "POST", map[string]string{"Authorization": "Bearer " + key}, mcpInitialize); status != http.StatusOK {
				t.Fatalf("initialize with the key = %d %s", status, b)
			}
			k, err := s.decider.FindAPIKeyByHash(context.Background(), arbiter.HashToken(key))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.decider.RevokeAPIKey(context.Background(), "", k.ID, arbiter.Actor{Email: "a@example.com"}); err != nil {
				t.Fatal(err)
			}
			revoked := time.Now()
			for {
				sent := time.Now()
				status, h, b := postMCP(t, s.base, "POST", map[string]string{"Authorization": "Bearer " + key}, mcpInitialize)
				if status == http.StatusUnauthorized {
					if msg := apiErrorSentence(t, status, h, b, http.StatusUnauthorized); !strings.Contains(msg, "revoked") {
						t.Errorf("%q does not say the key was revoked", msg)
					}
					break
				}
				if sent.Sub(revoked) > 2*time.Second {
					t.Fatalf("a revoked key still reached /v1/mcp after 2s: %d", status)
				}
				time.Sleep(50 * time.Millisecond)
			}

			// The SDK's client is refused too, with no session.
			_, revokedKey := s.newAccount(t, "b@example.com")
			rk, _ := s.store.FindAPIKeyByHash(context.Background(), arbiter.HashToken(revokedKey))
			if _, err := s.store.RevokeAPIKey(context.Background(), "", rk.ID, arbiter.Actor{Email: "b@example.com"}); err != nil {
				t.Fatal(err)
			}
			c := mcp.NewClient(&mcp.Implementation{Name: "arbiter-test", Version: "v0.0.1"}, nil)
			for _, key := range []string{"", revokedKey} {
				session, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
					Endpoint: s.base + "/v1/mcp", HTTPClient: &http.Client{Transport: validatingTransport{t: t, key: key}}, MaxRetries: -1,
				}, nil)
				if err == nil {
					session.Close()
					t.Errorf("the SDK's client connected with key %q", key)
				}
			}
		})
	}
}

func TestMCP_HTTPRefusalsAreTheAPIsJSON(t *testing.T) {
	t.Parallel()
	s := newMCPServer(t, db.SQLite)
	_, key := s.newAccount(t, "a@example.com")
	auth := map[string]string{"Authorization": "Bearer " + key}
	with := func(extra map[string]string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + key}
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	cases := []struct {
		name   string
		method string
		header map[string]string
		body   string
		status int
	}{
		{"GET", "GET", auth, "", http.StatusMethodNotAllowed},
		{"DELETE", "DELETE", auth, "", http.StatusMethodNotAllowed},
		{"NotJSON", "POST", with(map[string]string{"Content-Type": "text/plain"}), mcpInitialize, http.StatusUnsupportedMediaType},
		{"NoEventStreamAccepted", "POST", with(map[string]string{"Accept": "application/json"}), mcpInitialize, http.StatusNotAcceptable},
		{"MalformedBody", "POST", auth, `{"jsonrpc":`, http.StatusBadRequest},
		{"TooLarge", "POST", auth, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", arbiter.MaxBodyBytes) + `"}}`, http.StatusRequestEntityTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, h, b := postMCP(t, s.base, c.method, c.header, c.body)
			msg := apiErrorSentence(t, status, h, b, c.status)
			if !strings.HasSuffix(msg, ".") {
				t.Errorf("%q is not a sentence", msg)
			}
			if c.status == http.StatusMethodNotAllowed && h.Get("Allow") != "POST" {
				t.Errorf("Allow = %q", h.Get("Allow"))
			}
		})
	}
}

func TestRun_MCPNeedsAKey(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"mcp"}, env(nil), strings.NewReader(""), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "SVC_API_KEY is not set") {
		t.Errorf("arbiter mcp without a key = %v", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout, the protocol's, got %q", stdout.String())
	}
}

// waitForWatches waits until the server's store has n watches open.
func waitForWatches(t *testing.T, s *mcpServer, n int) {
	t.Helper()
	for deadline := testutil.Patience(t); s.store.Waiting() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d watches open, want %d", s.store.Waiting(), n)
		}
	}
}

// askForAPerson is a tools/call of ask_verdict, alone in its POST, that a
// person must decide and that waits up to 60 s.
const askForAPerson = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"ask_verdict","arguments":` +
	`{"prompt":"Refund order ord_9?","allowed_verdicts":["approve","reject"],"context":{"amount":700},"wait_seconds":60}}}`

func TestMCP_HTTPWaitEndsWhenTheCallerLeaves(t *testing.T) {
	t.Parallel()
	s := newMCPServer(t, db.SQLite)
	_, key := s.newAccount(t, "a@example.com")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/mcp", strings.NewReader(askForAPerson))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	done := make(chan error, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err == nil {
			res.Body.Close()
		}
		done <- err
	}()
	waitForWatches(t, s, 1)
	cancel()
	<-done
	// The call stops watching the task long before its 60 s are up.
	waitForWatches(t, s, 0)
}

func TestMCP_HTTPShutdownAnswersAWaitingCall(t *testing.T) {
	// Not parallel: the waiting call must be answered within 10 s of the
	// shutdown.
	s := newMCPServer(t, db.SQLite)
	_, key := s.newAccount(t, "a@example.com")
	type answer struct {
		status int
		body   []byte
	}
	answered := make(chan answer, 1)
	go func() {
		status, _, b := postMCP(t, s.base, "POST", map[string]string{"Authorization": "Bearer " + key}, askForAPerson)
		answered <- answer{status, b}
	}()
	waitForWatches(t, s, 1)
	started := time.Now()
	go s.srv.Config.Shutdown(context.Background())
	var a answer
	select {
	case a = <-answered:
	case <-time.After(time.Until(testutil.Patience(t))):
		t.Fatal("the waiting call was not answered at shutdown")
	}
	var res struct {
		Result struct {
			IsError           bool       `json:"isError"`
			StructuredContent toolAnswer `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(a.body, &res); err != nil || a.status != http.StatusOK {
		t.Fatalf("answer = %d %s (%v)", a.status, a.body, err)
	}
	got := res.Result.StructuredContent
	if res.Result.IsError || got.TaskID == "" || got.Verdict != nil || !strings.Contains(got.Message, "get_task") {
		t.Errorf("the call answered %s, want the undecided task", a.body)
	}
	if elapsed := time.Since(started); elapsed > 10*time.Second {
		t.Errorf("answered %s after shutdown began", elapsed)
	}
}

// TestMCPDoc_QuickStart keeps docs/mcp.md's set-up usable by a newcomer:
// how the binary gets where a client launches it from, and the quick
// start's own origin in both examples.
func TestMCPDoc_QuickStart(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"go install ./cmd/arbiter",
		"absolute path",
		`"SVC_BASE_URL": "http://localhost:8080"`,
		`"url": "http://localhost:8080/v1/mcp"`,
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/mcp.md does not say %s", want)
		}
	}
}

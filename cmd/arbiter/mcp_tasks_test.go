package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// rpcAnswer is a JSON-RPC answer: its result, or its error.
type rpcAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rawMCP sends JSON-RPC requests as a client that knows the Tasks utility
// would: the SDK's Go client has no "task" parameter.
type rawMCP interface {
	call(t *testing.T, method string, params any) rpcAnswer
	// initialize is the answer to the session's initialize.
	initialize(t *testing.T) rpcAnswer
}

// initializeParams are a client's initialize parameters.
var initializeParams = map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
	"clientInfo": map[string]any{"name": "arbiter-test", "version": "v0.0.1"}}

// httpMCP posts each request to /v1/mcp with a key; calls may come from
// several goroutines at once.
type httpMCP struct {
	base, key string
	id        atomic.Int64
}

func (h *httpMCP) initialize(t *testing.T) rpcAnswer {
	return h.call(t, "initialize", initializeParams)
}

func (h *httpMCP) call(t *testing.T, method string, params any) rpcAnswer {
	t.Helper()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": h.id.Add(1), "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	status, _, b := postMCP(t, h.base, "POST", map[string]string{"Authorization": "Bearer " + h.key}, string(body))
	if status != 200 {
		t.Fatalf("%s: HTTP %d %s", method, status, b)
	}
	var a rpcAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("%s: %s: %v", method, b, err)
	}
	return a
}

// stdioMCP talks to `arbiter mcp` run in-process, one line a message.
type stdioMCP struct {
	in      io.WriteCloser
	mu      sync.Mutex
	answers map[int]chan rpcAnswer
	id      int
	init    rpcAnswer
}

func (c *stdioMCP) initialize(*testing.T) rpcAnswer { return c.init }

func newStdioMCP(t *testing.T, s *mcpServer, key string) *stdioMCP {
	t.Helper()
	clientIn, clientOut := startStdioMCP(t, s, key)
	c := &stdioMCP{in: clientOut, answers: map[int]chan rpcAnswer{}}
	go func() {
		sc := bufio.NewScanner(clientIn)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			var msg struct {
				ID *int `json:"id"`
				rpcAnswer
			}
			if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID == nil {
				continue
			}
			c.mu.Lock()
			ch := c.answers[*msg.ID]
			c.mu.Unlock()
			if ch != nil {
				ch <- msg.rpcAnswer
			}
		}
	}()
	c.init = c.call(t, "initialize", initializeParams)
	if _, err := fmt.Fprintln(c.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *stdioMCP) call(t *testing.T, method string, params any) rpcAnswer {
	t.Helper()
	c.mu.Lock()
	c.id++
	id := c.id
	ch := make(chan rpcAnswer, 1)
	c.answers[id] = ch
	c.mu.Unlock()
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.in.Write(append(body, '\n')); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-ch:
		return a
	case <-time.After(time.Until(testutil.Patience(t))):
		t.Fatalf("%s: no answer on stdio", method)
	}
	return rpcAnswer{}
}

// eachRawMCP runs fn once per store and transport, with an account of its
// own per transport.
func eachRawMCP(t *testing.T, fn func(t *testing.T, s *mcpServer, c rawMCP, accountID string)) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			s := newMCPServer(t, dialect)
			t.Run("HTTP", func(t *testing.T) {
				accountID, key := s.newAccount(t, "http-tasks@example.com")
				fn(t, s, &httpMCP{base: s.base, key: key}, accountID)
			})
			t.Run("Stdio", func(t *testing.T) {
				accountID, key := s.newAccount(t, "stdio-tasks@example.com")
				fn(t, s, newStdioMCP(t, s, key), accountID)
			})
		})
	}
}

// mcpTaskHandle is the part of an MCP task handle the tests read.
type mcpTaskHandle struct {
	TaskID        string  `json:"taskId"`
	Status        string  `json:"status"`
	StatusMessage string  `json:"statusMessage"`
	CreatedAt     string  `json:"createdAt"`
	LastUpdatedAt string  `json:"lastUpdatedAt"`
	TTL           *int64  `json:"ttl"`
	PollInterval  float64 `json:"pollInterval"`
}

func decode[T any](t *testing.T, a rpcAnswer) T {
	t.Helper()
	var out T
	if a.Error != nil {
		t.Fatalf("JSON-RPC error %d: %s", a.Error.Code, a.Error.Message)
	}
	if err := json.Unmarshal(a.Result, &out); err != nil {
		t.Fatalf("%s: %v", a.Result, err)
	}
	return out
}

// askAsTask calls ask_verdict as a task and returns its handle.
func askAsTask(t *testing.T, c rawMCP, args map[string]any) mcpTaskHandle {
	t.Helper()
	created := decode[struct {
		Task mcpTaskHandle `json:"task"`
	}](t, c.call(t, "tools/call", map[string]any{"name": "ask_verdict", "arguments": args, "task": map[string]any{"ttl": 60000}}))
	return created.Task
}

// pollTask reads the handle with tasks/get until it has status.
func pollTask(t *testing.T, c rawMCP, id, status string) mcpTaskHandle {
	t.Helper()
	deadline := testutil.Patience(t)
	for {
		h := decode[mcpTaskHandle](t, c.call(t, "tasks/get", map[string]any{"taskId": id}))
		if h.Status == status {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s (%s), want %s", id, h.Status, h.StatusMessage, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitForStatus waits until the store has the task in status.
func waitForStatus(t *testing.T, s *mcpServer, accountID, id string, status string) {
	t.Helper()
	for deadline := testutil.Patience(t); ; time.Sleep(10 * time.Millisecond) {
		task, err := s.store.FindTaskByID(context.Background(), accountID, id)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s is %s, want %s", id, task.Status, status)
		}
	}
}

func TestMCPTasks_AdvertisedOnBothTransports(t *testing.T) {
	t.Parallel()
	eachRawMCP(t, func(t *testing.T, s *mcpServer, c rawMCP, _ string) {
		init := decode[struct {
			Capabilities struct {
				Tasks *struct {
					List     *struct{} `json:"list"`
					Cancel   *struct{} `json:"cancel"`
					Requests struct {
						Tools struct {
							Call *struct{} `json:"call"`
						} `json:"tools"`
					} `json:"requests"`
				} `json:"tasks"`
				Tools *struct{} `json:"tools"`
			} `json:"capabilities"`
		}](t, c.initialize(t))
		caps := init.Capabilities
		if caps.Tools == nil || caps.Tasks == nil || caps.Tasks.List == nil || caps.Tasks.Cancel == nil || caps.Tasks.Requests.Tools.Call == nil {
			t.Fatalf("initialize's capabilities do not offer tasks for tools/call: %+v", caps)
		}
		list := decode[struct {
			Tools []struct {
				Name      string `json:"name"`
				Execution *struct {
					TaskSupport string `json:"taskSupport"`
				} `json:"execution"`
			} `json:"tools"`
		}](t, c.call(t, "tools/list", map[string]any{}))
		support := map[string]string{}
		for _, tool := range list.Tools {
			if tool.Execution != nil {
				support[tool.Name] = tool.Execution.TaskSupport
			}
		}
		if len(list.Tools) != 3 || support["ask_verdict"] != "optional" || len(support) != 1 {
			t.Errorf("task support of the tools = %v of %d tools, want ask_verdict optional alone", support, len(list.Tools))
		}
	})
}

func TestMCPTasks_AHandleFollowsTheTaskToAPersonsVerdict(t *testing.T) {
	t.Parallel()
	eachRawMCP(t, func(t *testing.T, s *mcpServer, c rawMCP, accountID string) {
		h := askAsTask(t, c, refund("Refund order ord_7 as a task?", 500, nil))
		if !strings.HasPrefix(h.TaskID, "tsk_") || h.Status != "working" || h.TTL != nil || h.PollInterval != 2000 || h.CreatedAt == "" {
			t.Fatalf("tools/call answered the handle %+v, want a working tsk_ handle at once", h)
		}
		// Waiting for the person: still working, saying so.
		waitForStatus(t, s, accountID, h.TaskID, arbiter.StatusHumanNeeded)
		// In the Tasks utility's words: what to poll, not a tool to call.
		if got := pollTask(t, c, h.TaskID, "working"); !strings.Contains(got.StatusMessage, "human reviewer") ||
			!strings.Contains(got.StatusMessage, "tasks/get") || !strings.Contains(got.StatusMessage, "tasks/result") ||
			strings.Contains(got.StatusMessage, "get_task") {
			t.Errorf("a task waiting for a person reads %q", got.StatusMessage)
		}
		// tasks/result waits for the verdict.
		results := make(chan rpcAnswer, 1)
		go func() { results <- c.call(t, "tasks/result", map[string]any{"taskId": h.TaskID}) }()
		if _, err := s.decider.DecideTask(context.Background(), accountID, h.TaskID, arbiter.HumanDecision{
			Verdict: "reject", Rationale: "Over the limit.", Reviewer: "reviewer@example.com",
		}); err != nil {
			t.Fatal(err)
		}
		done := pollTask(t, c, h.TaskID, "completed")
		if done.LastUpdatedAt < done.CreatedAt || !strings.Contains(done.StatusMessage, `"reject"`) {
			t.Errorf("the completed handle = %+v", done)
		}
		var res rpcAnswer
		select {
		case res = <-results:
		case <-time.After(time.Until(testutil.Patience(t))):
			t.Fatal("tasks/result did not answer after the decision")
		}
		result := decode[struct {
			IsError           bool       `json:"isError"`
			StructuredContent toolAnswer `json:"structuredContent"`
			Meta              map[string]struct {
				TaskID string `json:"taskId"`
			} `json:"_meta"`
		}](t, res)
		got := result.StructuredContent
		if result.IsError || got.TaskID != h.TaskID || got.Verdict == nil || *got.Verdict != "reject" || got.Tier == nil ||
			*got.Tier != "human" || got.Rationale != "Over the limit." || result.Meta["io.modelcontextprotocol/related-task"].TaskID != h.TaskID {
			t.Errorf("tasks/result = %s", res.Result)
		}
		// Cancelling a decided task changes nothing and says why.
		if a := c.call(t, "tasks/cancel", map[string]any{"taskId": h.TaskID}); a.Error == nil || a.Error.Code != -32602 {
			t.Errorf("tasks/cancel of a completed task = %+v", a)
		}
	})
}

func TestMCPTasks_AnExpiredTaskFails(t *testing.T) {
	t.Parallel()
	eachRawMCP(t, func(t *testing.T, s *mcpServer, c rawMCP, accountID string) {
		h := askAsTask(t, c, refund("Refund order ord_8 before the deadline?", 500, map[string]any{"deadline_seconds": 3600}))
		waitForStatus(t, s, accountID, h.TaskID, arbiter.StatusHumanNeeded)
		// A person cannot cancel it away: tasks/cancel refuses and the
		// task still waits.
		if a := c.call(t, "tasks/cancel", map[string]any{"taskId": h.TaskID}); a.Error == nil || a.Error.Code != -32602 ||
			!strings.Contains(a.Error.Message, "cannot be cancelled") {
			t.Errorf("tasks/cancel = %+v", a)
		}
		pollTask(t, c, h.TaskID, "working")
		moveDeadlineIntoThePast(t, s.dialect, s.url, h.TaskID)
		failed := pollTask(t, c, h.TaskID, "failed")
		if !strings.Contains(failed.StatusMessage, "expired") {
			t.Errorf("the failed handle says %q", failed.StatusMessage)
		}
		result := decode[struct {
			IsError           bool       `json:"isError"`
			StructuredContent toolAnswer `json:"structuredContent"`
		}](t, c.call(t, "tasks/result", map[string]any{"taskId": h.TaskID}))
		if !result.IsError || result.StructuredContent.Status != "expired" || result.StructuredContent.Verdict != nil {
			t.Errorf("tasks/result of an expired task = %+v", result)
		}
	})
}

func TestMCPTasks_ListsAndRefusesWhatItDoesNotKnow(t *testing.T) {
	t.Parallel()
	eachRawMCP(t, func(t *testing.T, s *mcpServer, c rawMCP, accountID string) {
		h := askAsTask(t, c, refund("Refund order ord_9, small?", 20, nil))
		pollTask(t, c, h.TaskID, "completed") // the rules approve under 50
		listed := decode[struct {
			Tasks []mcpTaskHandle `json:"tasks"`
		}](t, c.call(t, "tasks/list", map[string]any{}))
		if len(listed.Tasks) == 0 || listed.Tasks[0].TaskID != h.TaskID || listed.Tasks[0].Status != "completed" {
			t.Errorf("tasks/list = %+v, want the task first", listed.Tasks)
		}
		// Another account's task, an unknown id, a tool that does not run
		// as a task, and bad arguments are each -32602 with a sentence.
		_, otherKey := s.newAccount(t, "other-"+strings.ToLower(t.Name()[len(t.Name())-4:])+"@example.com")
		theirs := askAsTask(t, &httpMCP{base: s.base, key: otherKey}, refund("Theirs?", 20, nil))
		for name, a := range map[string]rpcAnswer{
			"foreign":   c.call(t, "tasks/get", map[string]any{"taskId": theirs.TaskID}),
			"unknown":   c.call(t, "tasks/result", map[string]any{"taskId": "tsk_0000000000000000"}),
			"no id":     c.call(t, "tasks/get", map[string]any{}),
			"get_task":  c.call(t, "tools/call", map[string]any{"name": "get_task", "arguments": map[string]any{"task_id": h.TaskID}, "task": map[string]any{}}),
			"arguments": c.call(t, "tools/call", map[string]any{"name": "ask_verdict", "arguments": map[string]any{"prompt": "No verdicts?"}, "task": map[string]any{}}),
		} {
			if a.Error == nil || a.Error.Code != -32602 || a.Error.Message == "" {
				t.Errorf("%s: %+v, want -32602 with a sentence", name, a)
			}
		}
		if a := c.call(t, "tools/call", map[string]any{"name": "ask_verdict", "arguments": map[string]any{"prompt": "No verdicts?"}, "task": map[string]any{}}); a.Error == nil ||
			!strings.Contains(a.Error.Message, "allowed_verdicts") {
			t.Errorf("bad arguments: %+v, want the API's sentence about allowed_verdicts", a)
		}
	})
}

// Params that are not what the method takes get the API's sentence, naming
// the member and what it takes, and never the decoder's text, which quoted
// the request back; on both transports, for the SDK's methods and the
// Tasks utility's alike. The session goes on.
func TestMCP_MalformedParamsGetTheAPIsSentence(t *testing.T) {
	t.Parallel()
	const secret = "sk-hunter2-do-not-echo"
	eachRawMCP(t, func(t *testing.T, s *mcpServer, c rawMCP, _ string) {
		for _, tc := range []struct {
			method string
			params any
			want   string
		}{
			{"tools/call", map[string]any{"name": 5, "arguments": map[string]any{"note": secret}}, "The params of tools/call are not valid: name must be a string."},
			{"tools/call", secret, "The params of tools/call must be a JSON object."},
			{"tools/list", map[string]any{"cursor": 5, "note": secret}, "The params of tools/list are not valid: cursor must be a string."},
			{"initialize", map[string]any{"protocolVersion": 5, "clientInfo": map[string]any{"name": secret}}, "The params of initialize are not valid: protocolVersion must be a string."},
			{"ping", []any{secret}, "The params of ping must be a JSON object."},
			{"tasks/list", map[string]any{"cursor": []any{secret}}, "The params of tasks/list are not valid: cursor must be a string."},
			{"tasks/get", map[string]any{"taskId": map[string]any{"id": secret}}, "The params of tasks/get are not valid: taskId must be a string."},
		} {
			a := c.call(t, tc.method, tc.params)
			if a.Error == nil || a.Error.Code != -32602 || a.Error.Message != tc.want {
				t.Errorf("%s %v answered %+v, want -32602 %q", tc.method, tc.params, a.Error, tc.want)
			}
		}
		// Well-formed calls still work.
		if a := c.call(t, "tools/list", map[string]any{}); a.Error != nil {
			t.Errorf("tools/list after the refusals: %+v", a.Error)
		}
	})
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/openapi/openapitest"
)

// mcpBatch is a JSON-RPC batch of n calls, call(i) making the i-th.
func mcpBatch(n int, call func(i int) string) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = call(i)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// askCall is a tools/call of ask_verdict with id i that does not wait.
func askCall(i int) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"ask_verdict","arguments":`+
		`{"prompt":"Refund order ord_%d?","allowed_verdicts":["approve","reject"],"context":{"amount":700},"wait_seconds":0}}}`, i, i)
}

// jsonRPCError is a JSON-RPC error response.
type jsonRPCError struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      *json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// wantJSONRPCError decodes b as one JSON-RPC error response with a null id
// and code, and returns its message.
func wantJSONRPCError(t *testing.T, b []byte, code int) string {
	t.Helper()
	var e jsonRPCError
	if err := json.Unmarshal(b, &e); err != nil || e.JSONRPC != "2.0" || e.Error.Code != code || e.Error.Message == "" ||
		(e.ID != nil && string(*e.ID) != "null") {
		t.Fatalf("answer %.300s, want a JSON-RPC error %d with id null", b, code)
	}
	return e.Error.Message
}

func TestMCP_HTTPRefusesABatch(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newMCPServer(t, dialect)
			accountID, key := s.newAccount(t, "a@example.com")
			auth := map[string]string{"Authorization": "Bearer " + key}
			for _, body := range []string{mcpBatch(1000, askCall), " \r\n\t" + mcpBatch(1, askCall), "[]"} {
				status, h, b := postMCP(t, s.base, "POST", auth, body)
				if status != http.StatusBadRequest || h.Get("Content-Type") != "application/json" {
					t.Fatalf("a batch answered %d %s %.300s, want 400 application/json", status, h.Get("Content-Type"), b)
				}
				if msg := wantJSONRPCError(t, b, -32600); !strings.Contains(msg, "batch") {
					t.Errorf("%q does not say that batches are refused", msg)
				}
			}
			if n := countTasks(t, s, accountID); n != 0 {
				t.Errorf("the refused batches created %d tasks", n)
			}
			// One call alone still works.
			if status, _, b := postMCP(t, s.base, "POST", auth, askCall(1)); status != http.StatusOK || strings.Contains(string(b), `"isError":true`) {
				t.Fatalf("one call answered %d %s", status, b)
			}
		})
	}
}

func TestMCP_StdioRefusesABatchAndKeepsServing(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newMCPServer(t, dialect)
			accountID, key := s.newAccount(t, "a@example.com")
			out := runStdioMCP(t, s, key, mcpInitialize+"\n"+
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
				mcpBatch(1000, askCall)+"\n"+
				`{"jsonrpc":"2.0","id":"after","method":"ping"}`+"\n")
			// The refusal is written as the batch is read, so it may come
			// before the answer to initialize.
			if len(out) != 3 {
				t.Fatalf("answers %q, want three: initialize, the refused batch, the ping", out)
			}
			refusal := slices.IndexFunc(out, func(line string) bool { return strings.Contains(line, `"error"`) })
			if refusal < 0 {
				t.Fatalf("answers %q, none refuses the batch", out)
			}
			if msg := wantJSONRPCError(t, []byte(out[refusal]), -32600); !strings.Contains(msg, "batch") {
				t.Errorf("%q does not say that batches are refused", msg)
			}
			if !slices.ContainsFunc(out, func(line string) bool {
				return strings.Contains(line, `"id":"after"`) && strings.Contains(line, `"result"`)
			}) {
				t.Errorf("answers %q, none answers the ping after the batch", out)
			}
			if n := countTasks(t, s, accountID); n != 0 {
				t.Errorf("the refused batch created %d tasks", n)
			}
		})
	}
}

// runStdioMCP runs `arbiter mcp` with the key on input, which ends there,
// and returns the lines it wrote once it returned.
func runStdioMCP(t *testing.T, s *mcpServer, key, input string) []string {
	t.Helper()
	outR, outW := io.Pipe()
	var stderr testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), []string{"mcp"},
			env(map[string]string{"SVC_BASE_URL": s.base, "SVC_API_KEY": key}), strings.NewReader(input), outW, &stderr)
		outW.Close()
	}()
	var lines []string
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("arbiter mcp returned %v\n%s", err, stderr.String())
		}
	case <-time.After(time.Until(testutil.Patience(t))):
		t.Fatal("arbiter mcp did not return after its input ended")
	}
	return lines
}

func TestMCP_OneKeysFloodLeavesOtherAccountsReadsFast(t *testing.T) {
	// Not parallel: a load test; it bounds the other accounts' latency.
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newMCPServer(t, dialect)
			_, floodKey := s.newAccount(t, "flood@example.com")
			_, key := s.newAccount(t, "b@example.com")
			flood := map[string]string{"Authorization": "Bearer " + floodKey}
			status, _, b := postMCP(t, s.base, "POST", flood, askCall(1))
			var created struct {
				Result struct {
					StructuredContent toolAnswer `json:"structuredContent"`
				} `json:"result"`
			}
			if status != http.StatusOK || json.Unmarshal(b, &created) != nil || created.Result.StructuredContent.TaskID == "" {
				t.Fatalf("ask_verdict answered %d %s", status, b)
			}
			getCall := func(i int) string {
				return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"get_task","arguments":{"task_id":%q}}}`,
					i, created.Result.StructuredContent.TaskID)
			}
			theirs := createTask(t, s, key)

			// The flood: eight senders of 1,000-call batches, as in the
			// report, each for as long as the reads are measured (and at
			// most 2,000 requests). The reads begin once every sender's
			// first request has been sent whole.
			ctx, stop := context.WithCancel(context.Background())
			var wg, sent sync.WaitGroup
			sent.Add(8)
			floodClient := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 64, MaxIdleConnsPerHost: 64}}
			defer floodClient.CloseIdleConnections()
			body := mcpBatch(1000, getCall)
			for range 8 {
				wg.Go(func() {
					first := sync.OnceFunc(sent.Done)
					defer first()
					trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { first() }}
					for range 2000 {
						if ctx.Err() != nil {
							return
						}
						req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), "POST", s.base+"/v1/mcp", strings.NewReader(body))
						req.Header.Set("Authorization", "Bearer "+floodKey)
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Accept", "application/json, text/event-stream")
						if res, err := floodClient.Do(req); err == nil {
							io.Copy(io.Discard, res.Body)
							res.Body.Close()
						}
					}
				})
			}
			defer func() { stop(); wg.Wait() }()
			waitGroupWithin(t, &sent, 30*time.Second, "every flood sender sent a request")

			// Another account reads its task 60 times, one after another.
			const reads = 100
			took := make([]time.Duration, 0, reads)
			for range reads {
				started := time.Now()
				req, _ := http.NewRequest("GET", s.base+"/v1/tasks/"+theirs, nil)
				req.Header.Set("Authorization", "Bearer "+key)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					// The server's write timeout (a second) closed the
					// connection: a read slower than that.
					took = append(took, time.Since(started))
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				took = append(took, time.Since(started))
				if res.StatusCode != http.StatusOK {
					t.Fatalf("the other account's read answered %d", res.StatusCode)
				}
			}
			slices.Sort(took)
			median, p90 := took[reads/2], took[reads*9/10]
			t.Logf("the other account's reads during the flood: median %s, 90th percentile %s, slowest %s", median, p90, took[reads-1])
			// The median, not a higher percentile, and a slowest read far
			// beyond it: the flood's own senders and other tests share the
			// machine's cores. (Before batches were refused: medians of
			// 170-270 ms on Postgres, slowest reads of 4-11 s on both.)
			if median > 50*time.Millisecond {
				t.Errorf("the median of %d reads of another account took %s during the flood, want under 50ms", reads, median)
			}
			if slowest := took[reads-1]; slowest > 2*time.Second {
				t.Errorf("the slowest of %d reads of another account took %s during the flood, want under 2s", reads, slowest)
			}
		})
	}
}

// createTask creates a task with the key through the API and returns its id.
func createTask(t *testing.T, s *mcpServer, key string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", s.base+"/v1/tasks",
		strings.NewReader(`{"prompt":"Refund order ord_2?","allowed_verdicts":["approve","reject"],"context":{"amount":700}}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var task struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&task); err != nil || task.ID == "" {
		t.Fatalf("create answered %d (%v)", res.StatusCode, err)
	}
	return task.ID
}

func TestMCP_StdioAnswersEveryRequestReadBeforeItsInputEnds(t *testing.T) {
	t.Parallel()
	s := newMCPServer(t, dbtest.Dialects[0])
	_, key := s.newAccount(t, "a@example.com")
	// The input ends while both calls are running: one waits 2 seconds for
	// a person, the other reads the account's tasks.
	out := runStdioMCP(t, s, key, mcpInitialize+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":"ask","method":"tools/call","params":{"name":"ask_verdict","arguments":`+
		`{"prompt":"Refund order ord_9?","allowed_verdicts":["approve","reject"],"context":{"amount":700},"wait_seconds":2}}}`+"\n"+
		`{"jsonrpc":"2.0","id":"list","method":"tools/call","params":{"name":"list_tasks","arguments":{}}}`+"\n")
	answered := map[string]bool{}
	for _, line := range out[1:] {
		var res struct {
			ID     string `json:"id"`
			Result struct {
				IsError bool `json:"isError"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(line), &res) == nil && !res.Result.IsError {
			answered[res.ID] = true
		}
	}
	if len(out) != 3 || !answered["ask"] || !answered["list"] {
		t.Errorf("answers %q, want initialize's, ask's and list's", out)
	}
}

// waitGroupWithin waits for wg, failing the test after limit.
func waitGroupWithin(t *testing.T, wg *sync.WaitGroup, limit time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("not within %s: %s", limit, what)
	}
}

func TestMCP_HTTPCapsTheCallsOfAnAccountAtOnce(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newMCPServer(t, dialect)
			_, key := s.newAccount(t, "a@example.com")
			_, otherKey := s.newAccount(t, "b@example.com")
			auth := map[string]string{"Authorization": "Bearer " + key}

			// The account's MaxMCPCalls calls wait for a person.
			ctx, leave := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			defer func() { leave(); wg.Wait() }()
			for range handlers.MaxMCPCalls {
				wg.Go(func() {
					req, _ := http.NewRequestWithContext(ctx, "POST", s.base+"/v1/mcp", strings.NewReader(askForAPerson))
					req.Header.Set("Authorization", "Bearer "+key)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					if res, err := http.DefaultClient.Do(req); err == nil {
						res.Body.Close()
					}
				})
			}
			waitForWatches(t, s, handlers.MaxMCPCalls)

			// One more is refused at once, and says when to try again.
			status, h, b := postMCP(t, s.base, "POST", auth, askCall(1))
			if msg := apiErrorSentence(t, status, h, b, http.StatusTooManyRequests); !strings.Contains(msg, "at once") {
				t.Errorf("%q does not say that too many calls run at once", msg)
			}
			if h.Get("Retry-After") == "" {
				t.Error("429 without Retry-After")
			}
			// Another account is served.
			if status, _, b := postMCP(t, s.base, "POST", map[string]string{"Authorization": "Bearer " + otherKey}, askCall(1)); status != http.StatusOK {
				t.Fatalf("another account's call answered %d %s", status, b)
			}
			// Once the waiting calls end, the account is served again.
			leave()
			wg.Wait()
			waitForWatches(t, s, 0)
			for deadline := testutil.Patience(t); ; time.Sleep(10 * time.Millisecond) {
				status, _, b := postMCP(t, s.base, "POST", auth, askCall(2))
				if status == http.StatusOK {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the account's call after its waits ended answered %d %s", status, b)
				}
			}
		})
	}
}

func TestMCP_UnknownMethodIsTheSameErrorOnBothTransports(t *testing.T) {
	t.Parallel()
	s := newMCPServer(t, dbtest.Dialects[0])
	_, key := s.newAccount(t, "a@example.com")
	const call = `{"jsonrpc":"2.0","id":5,"method":"tasks/frobnicate","params":{}}`
	status, _, b := postMCP(t, s.base, "POST", map[string]string{"Authorization": "Bearer " + key}, call)
	if status != http.StatusOK {
		t.Fatalf("HTTP answered %d %s, want 200 and a JSON-RPC error", status, b)
	}
	out := runStdioMCP(t, s, key, mcpInitialize+"\n"+`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+call+"\n")
	if len(out) != 2 {
		t.Fatalf("stdio answered %q", out)
	}
	var overHTTP, overStdio jsonRPCError
	if json.Unmarshal(b, &overHTTP) != nil || json.Unmarshal([]byte(out[1]), &overStdio) != nil {
		t.Fatalf("answers %s and %s are not JSON-RPC", b, out[1])
	}
	if overHTTP.Error.Code != -32601 || overHTTP.Error != overStdio.Error || overHTTP.ID == nil || string(*overHTTP.ID) != "5" {
		t.Errorf("HTTP answered %s and stdio %s, want the same error -32601 for id 5", b, out[1])
	}
}

func TestMCP_A401LeadsToNoOAuth(t *testing.T) {
	t.Parallel()
	s := newMCPServer(t, dbtest.Dialects[0])
	status, h, b := postMCP(t, s.base, "POST", nil, mcpInitialize)
	apiErrorSentence(t, status, h, b, http.StatusUnauthorized)
	if challenge := h.Get("WWW-Authenticate"); !strings.HasPrefix(challenge, "Bearer ") || strings.Contains(challenge, "resource_metadata") {
		t.Errorf("WWW-Authenticate = %q, want a Bearer challenge that points to no OAuth metadata", challenge)
	}
	// An MCP client that looks for the protected resource's metadata
	// (RFC 9728, at both the root and the endpoint's own address) reads
	// that keys go in the header and that no authorization server exists.
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/v1/mcp"} {
		req, _ := http.NewRequest("GET", s.base+path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		openapitest.ValidateResponse(t, req, res.StatusCode, res.Header, body)
		var prm struct {
			Resource             string    `json:"resource"`
			BearerMethods        []string  `json:"bearer_methods_supported"`
			AuthorizationServers *[]string `json:"authorization_servers"`
		}
		if res.StatusCode != http.StatusOK || json.Unmarshal(body, &prm) != nil || !strings.HasSuffix(prm.Resource, "/v1/mcp") ||
			!slices.Equal(prm.BearerMethods, []string{"header"}) || prm.AuthorizationServers == nil || len(*prm.AuthorizationServers) != 0 {
			t.Errorf("GET %s = %d %s, want the metadata of /v1/mcp: the header, no authorization server", path, res.StatusCode, body)
		}
	}
	// Nor does the server offer an authorization server's metadata.
	for _, path := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		res, err := http.Get(s.base + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, res.StatusCode)
		}
	}
}

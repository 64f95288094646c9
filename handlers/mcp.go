package handlers

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/mcpserver"
)

// MCP handles /v1/mcp: the Model Context Protocol's Streamable HTTP
// transport, serving mcpserver's tools to the account of the request's API
// key. It is stateless (any server process answers any request, and
// nothing is kept between requests) and answers plain JSON, so it takes
// POST alone.
//
// The tools are the ones `arbiter mcp` serves over the Go client; here
// they call the services in-process, through mcpTasks, which hands them
// the API's task objects and sentences as the client would. A call that
// waits for a verdict (up to arbiter.MaxWait) has its write deadline moved
// past the wait, as GET /v1/tasks/{id}?wait=N does, stops waiting when the
// caller leaves, and is answered at once when shutdown closes. A wait
// is admitted by waiters as GET /v1/tasks/{id}?wait=N is, counted with
// them per API key and per account: past the bound the call fails with
// the API's 429 sentence, the server may end it when it needs the
// connection (answered as a wait whose time is up, the connection
// closed), and the key is checked again before the answer (revoked: the
// call fails with the API's 401 sentence).
//
// One request runs one call: a JSON-RPC batch is refused whole. An account
// runs at most MaxMCPCalls requests at once, waits included: calls holds
// the account's slots, across processes when it is shared
// (internal/limits); nil holds them in this process.
func MCP(tasks arbiter.TaskService, watcher arbiter.TaskWatcher, calls arbiter.SlotLimit, shutdown <-chan struct{}, created func(n int), waiters Waiters) http.Handler {
	if watcher == nil {
		watcher = unwatched{}
	}
	over := &mcpTasks{tasks: tasks, watcher: watcher, shutdown: shutdown, created: created,
		answering: newAnswerSlots(maxAnswering), waiters: waiters}
	server := mcpserver.New(over)
	utility := mcpserver.NewTaskUtility(over)
	stream := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
		// The SDK's guard against DNS rebinding protects local servers
		// without authentication; every request here carries an API key,
		// and a server behind a reverse proxy on its machine sees a
		// loopback peer asking for the public host.
		DisableLocalhostProtection:   true,
		PropagateRequestCancellation: true,
		MaxRequestBodyBytes:          arbiter.MaxBodyBytes,
	})
	if calls == nil {
		calls = arbiter.NewInFlightLimiter(MaxMCPCalls)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkMCPRequest(w, r); err != nil {
			Error(w, r, err)
			return
		}
		if peekBatch(r) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(mcpserver.BatchRefusalJSON)
			return
		}
		release, ok, err := calls.Acquire(r.Context(), arbiter.AccountIDFromContext(r.Context()))
		switch {
		case err != nil:
			Error(w, r, err)
			return
		case !ok:
			Error(w, r, errTooManyMCPCalls)
			return
		}
		defer release()
		// The server's write timeout counts from the request; a tool call
		// may wait for a verdict first.
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Now().Add(arbiter.MaxWait + answerTime))
		r = r.WithContext(context.WithValue(r.Context(), mcpRequestKey{}, &mcpCall{request: r, header: w.Header()}))
		jw := &jsonErrorWriter{ResponseWriter: w}
		body, err := ReadBody(r)
		if err != nil {
			Error(w, r, err)
			return
		}
		jw.sent.Write(body)
		r.Body = struct {
			io.Reader
			io.Closer
		}{bytes.NewReader(body), r.Body}
		// The MCP Tasks utility answers its own requests; the SDK has none.
		var amend string
		if msg, err := jsonrpc.DecodeMessage(body); err == nil {
			if req, ok := msg.(*jsonrpc.Request); ok {
				if req.Method == "tasks/result" {
					// It waits for the task to be final, as long as that takes.
					_ = rc.SetWriteDeadline(time.Time{})
				}
				if res := mcpserver.RefuseMalformedParams(req); res != nil {
					writeJSONRPC(w, res)
					return
				}
				if res := utility.Handle(r.Context(), req); res != nil {
					writeJSONRPC(w, res)
					return
				}
				if req.Method == "initialize" || req.Method == "tools/list" {
					amend = req.Method
				}
			}
		}
		if amend == "" {
			stream.ServeHTTP(jw, r)
			jw.finish(r)
			return
		}
		// initialize and tools/list: the SDK's answer, with the utility added.
		rec := &answerRecorder{header: http.Header{}}
		stream.ServeHTTP(rec, r)
		if msg, err := jsonrpc.DecodeMessage(rec.body.Bytes()); err == nil {
			if res, ok := msg.(*jsonrpc.Response); ok {
				mcpserver.Amend(amend, res)
				if b, err := jsonrpc.EncodeMessage(res); err == nil {
					rec.body.Reset()
					rec.body.Write(b)
				}
			}
		}
		for k, v := range rec.header {
			jw.Header()[k] = v
		}
		jw.Header().Del("Content-Length")
		jw.WriteHeader(cmp.Or(rec.status, http.StatusOK))
		_, _ = jw.Write(rec.body.Bytes())
		jw.finish(r)
	})
}

// writeJSONRPC answers one JSON-RPC response as the transport's JSON.
func writeJSONRPC(w http.ResponseWriter, res *jsonrpc.Response) {
	b, err := jsonrpc.EncodeMessage(res)
	if err != nil {
		b = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"The answer could not be encoded."}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// answerRecorder holds the SDK's answer to a request whose answer is
// edited before it is sent: small, and never a stream.
type answerRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answerRecorder) Header() http.Header { return a.header }

func (a *answerRecorder) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *answerRecorder) Write(b []byte) (int, error) { return a.body.Write(b) }

// MaxMCPCalls is how many /v1/mcp requests of one account run at once,
// waits for a verdict included, in the whole deployment when the limit is
// shared (internal/limits); past it, a request is 429.
const MaxMCPCalls = 32

var errTooManyMCPCalls = &arbiter.Error{Code: arbiter.ERATELIMIT, RetryAfter: time.Second,
	Message: fmt.Sprintf("Too many MCP calls of this account are running at once (at most %d): wait for one to end, then try again.", MaxMCPCalls)}

// peekBatch reports whether the body of r is a JSON-RPC batch (its first
// byte after white space is '['), leaving the body to be read whole.
//
// The SDK refuses a batch only when the request names protocol version
// 2025-06-18 or later, and runs every call of one at once otherwise; one
// request could start thousands of calls. Batches are refused here, before
// the SDK, whatever the version.
func peekBatch(r *http.Request) bool {
	body := bufio.NewReader(r.Body)
	r.Body = struct {
		io.Reader
		io.Closer
	}{body, r.Body}
	for {
		b, err := body.ReadByte()
		if err != nil {
			return false // the SDK answers an empty or unreadable body
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			continue
		}
		_ = body.UnreadByte()
		return b == '['
	}
}

// checkMCPRequest refuses, with the API's sentences, the requests the
// Streamable HTTP transport does not take here.
func checkMCPRequest(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return StatusError(http.StatusMethodNotAllowed,
			"/v1/mcp takes POST only: it is a stateless MCP Streamable HTTP endpoint, with no server-to-client stream to GET.")
	}
	if mediaType, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mediaType != "application/json" {
		return StatusError(http.StatusUnsupportedMediaType, "Send the JSON-RPC message as Content-Type: application/json.")
	}
	var acceptsJSON, acceptsStream bool
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mediaType, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
			acceptsJSON = acceptsJSON || mediaType == "application/json" || mediaType == "*/*"
			acceptsStream = acceptsStream || mediaType == "text/event-stream" || mediaType == "*/*"
		}
	}
	if !acceptsJSON || !acceptsStream {
		return StatusError(http.StatusNotAcceptable,
			"Accept must list both application/json and text/event-stream, as the MCP Streamable HTTP transport requires.")
	}
	return nil
}

// mcpRequestKey carries the HTTP request (an *mcpCall) into the tools,
// whose own context the SDK detaches from it, so that a wait ends when
// the caller leaves, and is admitted as the request's.
type mcpRequestKey struct{}

// mcpCall is the HTTP request a tool runs in: the request as it came
// (its context ends when the caller leaves, and names its connection),
// and its answer's header, which the SDK writes after the tool returns.
type mcpCall struct {
	request *http.Request
	header  http.Header
}

// jsonErrorWriter answers the SDK's plain-text refusals (a body that is not
// JSON-RPC, say) as the API's {"error": "…"}; everything else, JSON-RPC
// answers included, passes through.
//
// A call of a method the server does not have, which the SDK refuses with
// a plain-text 400 before protocol 2026-07-28, is answered as on stdio: a
// 200 with the JSON-RPC error -32601.
type jsonErrorWriter struct {
	http.ResponseWriter
	status int // the refusal held back, or 0
	text   bytes.Buffer
	sent   bytes.Buffer // the request's body as the SDK read it
}

func (w *jsonErrorWriter) WriteHeader(status int) {
	if status >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.status = status
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *jsonErrorWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		return w.ResponseWriter.Write(b)
	}
	if w.text.Len() < 512 {
		w.text.Write(b[:min(len(b), 512)])
	}
	return len(b), nil
}

// Unwrap lets http.ResponseController reach the connection.
func (w *jsonErrorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish writes the refusal held back, if any.
func (w *jsonErrorWriter) finish(r *http.Request) {
	if w.status == 0 {
		return
	}
	if w.status == http.StatusBadRequest && strings.HasPrefix(w.text.String(), "JSON RPC not handled") {
		if msg, err := jsonrpc.DecodeMessage(w.sent.Bytes()); err == nil {
			if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
				b, err := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{
					Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("method not found: %q", req.Method)}})
				if err == nil {
					w.ResponseWriter.Header().Set("Content-Type", "application/json")
					w.ResponseWriter.WriteHeader(http.StatusOK)
					_, _ = w.ResponseWriter.Write(b)
					return
				}
			}
		}
	}
	msg := []rune(strings.TrimSpace(w.text.String()))
	if len(msg) == 0 {
		msg = []rune(http.StatusText(w.status))
	}
	msg[0] = unicode.ToUpper(msg[0])
	if !strings.HasSuffix(string(msg), ".") {
		msg = append(msg, '.')
	}
	Error(w.ResponseWriter, r, StatusError(w.status, "%s", string(msg)))
}

// mcpTasks is mcpserver.Tasks over the services, for the account in the
// context: the in-process twin of the Go client. Tasks are encoded as the
// API encodes them and decoded as the client does, and failures become
// the *client.Error that the API's answer would have made.
type mcpTasks struct {
	tasks    arbiter.TaskService
	watcher  arbiter.TaskWatcher
	shutdown <-chan struct{}
	created  func(n int)
	// answering bounds the waits that answer at once (maxAnswering).
	answering *answerSlots
	// waiters admits the waits, as they admit GET /v1/tasks/{id}?wait=N.
	waiters Waiters
}

// errShuttingDown ends a wait when the server begins to shut down.
var errShuttingDown = errors.New("the server is shutting down")

// errEvicted ends a wait the server ended because it needed the
// connection: the tools answer the task as it is, as at the end of the
// wait.
var errEvicted = errors.New("the server needed the connection for another caller")

// CreateTask creates the task as POST /v1/tasks does.
func (m *mcpTasks) CreateTask(ctx context.Context, in client.TaskCreate) (*client.Task, error) {
	if in.IdempotencyKey != "" {
		if err := arbiter.ValidateIdempotencyKey(in.IdempotencyKey); err != nil {
			return nil, apiError(ctx, err)
		}
	}
	body, err := json.Marshal(in)
	if err != nil {
		return nil, apiError(ctx, arbiter.Errorf(arbiter.EINVALID, "context must be a JSON value."))
	}
	// A callback_url from an agent must lead to a public https address,
	// whatever the server allows its own API callers.
	answer, err := createTask(ctx, m.tasks, m.created, body, in.IdempotencyKey, false)
	if err != nil {
		return nil, apiError(ctx, err)
	}
	return apiTask(ctx, answer.Task)
}

// GetTask reads the task as GET /v1/tasks/{id} does.
func (m *mcpTasks) GetTask(ctx context.Context, id string) (*client.Task, error) {
	task, err := m.tasks.FindTaskByID(ctx, arbiter.AccountIDFromContext(ctx), id)
	if err != nil {
		return nil, apiError(ctx, err)
	}
	return apiTask(ctx, task)
}

// WaitTask waits for the task to be final, woken by the watcher, until ctx
// ends, the HTTP request ends, the server shuts down or needs the
// connection (errEvicted); then it returns the task as last read with an
// error. Each wait is admitted by the waiters as the HTTP request's, which
// check its key again before the answer.
func (m *mcpTasks) WaitTask(ctx context.Context, id string, _ *client.WaitOptions) (*client.Task, error) {
	var hooks waitHooks
	call, ok := ctx.Value(mcpRequestKey{}).(*mcpCall)
	if ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(call.request.Context(), cancel)()
		hooks.enter = func() (Waiter, error) { return enterWait(m.waiters, call.request) }
	}
	accountID := arbiter.AccountIDFromContext(ctx)
	var last *client.Task
	for {
		task, answered, waited, err := waitForFinal(ctx, m.tasks, m.watcher, m.answering, accountID, id, arbiter.MaxWait, m.shutdown, hooks)
		if waited.evicted {
			// The connection closes after this answer, as an evicted
			// GET's does.
			call.header.Set("Connection", "close")
		}
		switch {
		case err != nil && ctx.Err() == nil:
			answered()
			return last, apiError(ctx, err)
		case err != nil || task == nil: // ctx ended
			answered()
			return last, fmt.Errorf("waiting for task %s: %w", id, ctx.Err())
		}
		last, err = apiTask(ctx, task)
		answered()
		if err != nil || task.Final() {
			return last, err
		}
		if waited.evicted {
			return last, errEvicted
		}
		if ctx.Err() != nil {
			return last, fmt.Errorf("task %s is still %s: %w", id, task.Status, ctx.Err())
		}
		select {
		case <-m.shutdown:
			return last, errShuttingDown
		default:
		}
	}
}

// ListTasks reads a page of the account's tasks as GET /v1/tasks does.
func (m *mcpTasks) ListTasks(ctx context.Context, opts client.ListOptions) (*client.TaskPage, error) {
	f := arbiter.TaskFilter{
		Status: opts.Status, TaskType: opts.TaskType, Source: opts.Source, Touchpoint: opts.Touchpoint,
		FinalTier: opts.FinalTier, StartingAfter: opts.StartingAfter, Limit: opts.Limit,
	}
	for _, t := range []struct {
		in  time.Time
		out **arbiter.Timestamp
	}{{opts.CreatedAfter, &f.CreatedAfter}, {opts.CreatedBefore, &f.CreatedBefore}} {
		if !t.in.IsZero() {
			ts := arbiter.TimestampOf(t.in)
			*t.out = &ts
		}
	}
	page, err := m.tasks.ListTasks(ctx, arbiter.AccountIDFromContext(ctx), f)
	if err != nil {
		return nil, apiError(ctx, err)
	}
	for _, t := range page.Tasks {
		t.HideOpenVotes()
	}
	var out client.TaskPage
	if err := viaJSON(taskListResponse{Tasks: page.Tasks, HasMore: page.HasMore}, &out); err != nil {
		return nil, apiError(ctx, err)
	}
	return &out, nil
}

// taskListResponse is the body of GET /v1/tasks.
type taskListResponse struct {
	Tasks   []*arbiter.Task `json:"tasks"`
	HasMore bool            `json:"has_more"`
}

// apiTask is the task as the client reads the API's answer, its open
// votes hidden as the API hides them.
func apiTask(ctx context.Context, task *arbiter.Task) (*client.Task, error) {
	task.HideOpenVotes()
	var out client.Task
	if err := viaJSON(task, &out); err != nil {
		return nil, apiError(ctx, err)
	}
	return &out, nil
}

// viaJSON decodes into out the API's encoding of v.
func viaJSON(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding an answer: %w", err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decoding an answer as the client does: %w", err)
	}
	return nil
}

// apiError is the *client.Error of the API's answer to err: its status,
// its sentence and when to try again. Failures that are the server's are
// logged here, once, as Error logs them.
func apiError(ctx context.Context, err error) error {
	status := StatusOf(err)
	logFailure(ctx, status, err, "path", "/v1/mcp")
	out := &client.Error{StatusCode: status, Message: arbiter.ErrorMessage(err)}
	var e *arbiter.Error
	if errors.As(err, &e) {
		out.RetryAfter = e.RetryAfter
	}
	return out
}

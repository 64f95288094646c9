package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter/internal/mcptasks"
)

// The Tasks utility of MCP (protocol 2025-11-25), which the Go SDK
// (v1.8.0) does not have, as mcpserver implements it for ask_verdict: a
// client that sends tools/call with a "task" parameter gets a task handle
// at once instead of a call held open. For a held call the handle's
// taskId is the Arbiter task's id; its status is working until the call
// is decided (and, when approved, has run), then completed with the
// upstream's result, or failed with the reason it did not run. A call
// the policy allows or denies as a task gets a handle of the gateway's
// own (gwt_…), completed or failed as soon as it is answered.
// tasks/result answers the call's result, tasks/list the calls held, and
// tasks/cancel refuses: a person may be deciding.
//
// The transports move a tools/call's "task" parameter into its _meta
// (metaTask), which the SDK keeps, and the middleware below answers such
// calls; the tasks/* requests are the server's custom methods.

// The _meta keys the transports set on a tools/call for the middleware:
// the request's "task" parameter, and its JSON-RPC id.
const (
	metaTask      = "dev.arbiter.gateway/task"
	metaRequestID = "dev.arbiter.gateway/request-id"
)

// taskHandle is an MCP task; a held call's is kept until its answer is
// taken.
type taskHandle = mcptasks.Handle

// handleResult is a task handle as a result (tasks/get).
type handleResult struct {
	mcp.ResultBase
	taskHandle
}

// createTaskResult answers a tools/call made as a task.
type createTaskResult struct {
	mcp.ResultBase
	Task taskHandle `json:"task"`
}

// taskListResult answers tasks/list.
type taskListResult struct {
	mcp.ResultBase
	Tasks []taskHandle `json:"tasks"`
}

// taskIDParams are the params of tasks/get, tasks/result, tasks/cancel.
type taskIDParams struct {
	mcp.ParamsBase
	TaskID string `json:"taskId"`
}

// cursorParams are the params of tasks/list.
type cursorParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// addTaskMethods serves the tasks/* requests.
func (g *Gateway) addTaskMethods() error {
	for _, err := range []error{
		mcp.AddReceivingCustomMethod(g.server, "tasks/get", func(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*handleResult, error) {
			h, err := g.findTask(p)
			if err != nil {
				return nil, err
			}
			return &handleResult{taskHandle: h.handle()}, nil
		}),
		mcp.AddReceivingCustomMethod(g.server, "tasks/result", g.taskResult),
		mcp.AddReceivingCustomMethod(g.server, "tasks/list", func(ctx context.Context, _ *mcp.ServerSession, _ *cursorParams) (*taskListResult, error) {
			return &taskListResult{Tasks: g.listTasks()}, nil
		}),
		mcp.AddReceivingCustomMethod(g.server, "tasks/cancel", func(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*handleResult, error) {
			h, err := g.findTask(p)
			if err != nil {
				return nil, err
			}
			if h.final() {
				return nil, invalidParams("The task is already %s; there is nothing to cancel.", h.handle().Status)
			}
			return nil, invalidParams("A held call cannot be cancelled: a reviewer may be deciding it. It ends when it is decided, or at its task's deadline.")
		}),
	} {
		if err != nil {
			return fmt.Errorf("gateway: %w", err)
		}
	}
	return nil
}

// invalidParams is the JSON-RPC error -32602 with a sentence.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// taskCall is what the Tasks utility reads of a held call or a local
// handle.
type taskCall interface {
	handle() taskHandle
	final() bool
	wait(ctx context.Context) (*mcp.CallToolResult, error)
}

// findTask returns the call of a tasks/* request's taskId: a held call
// (resumed from the state file after a restart) or a local handle.
func (g *Gateway) findTask(p *taskIDParams) (taskCall, error) {
	if p == nil || p.TaskID == "" {
		return nil, invalidParams("taskId is required: the taskId of the handle tools/call answered.")
	}
	if l := g.local.get(p.TaskID); l != nil {
		return l, nil
	}
	if h := g.resume(p.TaskID); h != nil {
		return heldTask{g, h}, nil
	}
	return nil, invalidParams("No such task: this gateway holds no call with taskId %q.", p.TaskID)
}

// resume returns the held call waiting on task id: held now, or recorded
// in the state file (a restart, another gateway), which it holds again.
func (g *Gateway) resume(id string) *heldCall {
	g.held.mu.Lock()
	h := g.held.byTask[id]
	g.held.mu.Unlock()
	if h != nil || g.cfg.State == nil {
		return h
	}
	e, ok := g.cfg.State.FindTask(id)
	if !ok {
		return nil
	}
	g.held.mu.Lock()
	if h = g.held.byTask[id]; h != nil {
		g.held.mu.Unlock()
		return h
	}
	h = &heldCall{key: e.Key, tool: e.Tool, digest: e.Digest, approve: e.Approve, line: e.Line, taskID: id,
		claimID: "gw-" + randomHex(12), started: time.Now(), ready: make(chan struct{}), done: make(chan struct{})}
	if len(h.approve) == 0 {
		h.approve = g.policy.Ask.ApproveOrDefault()
	}
	close(h.ready)
	g.held.byTask[id] = h
	if _, taken := g.held.byKey[e.Key]; !taken {
		g.held.byKey[e.Key] = h
	}
	g.held.mu.Unlock()
	g.wg.Go(func() { g.decide(h) })
	return h
}

// taskResult answers tasks/result: the call's result once it has one.
func (g *Gateway) taskResult(ctx context.Context, _ *mcp.ServerSession, p *taskIDParams) (*mcp.CallToolResult, error) {
	c, err := g.findTask(p)
	if err != nil {
		return nil, err
	}
	return c.wait(ctx)
}

// listTasks lists the calls held, newest first, and the local handles.
func (g *Gateway) listTasks() []taskHandle {
	out := []taskHandle{}
	seen := map[string]bool{}
	g.held.mu.Lock()
	held := make([]*heldCall, 0, len(g.held.byTask))
	for _, h := range g.held.byTask {
		held = append(held, h)
	}
	g.held.mu.Unlock()
	slices.SortFunc(held, func(a, b *heldCall) int { return b.started.Compare(a.started) })
	for _, h := range held {
		seen[h.taskID] = true
		out = append(out, heldTask{g, h}.handle())
	}
	if g.cfg.State != nil {
		for _, e := range g.cfg.State.All() {
			if !seen[e.TaskID] {
				out = append(out, taskHandle{TaskID: e.TaskID, Status: "working", CreatedAt: rfc3339(e.CreatedAt), LastUpdatedAt: rfc3339(e.CreatedAt),
					StatusMessage: "Held before this gateway started; tasks/get resumes it.", PollInterval: mcptasks.PollInterval.Milliseconds()})
			}
		}
	}
	return append(out, g.local.list()...)
}

// heldTask is a held call seen by the Tasks utility.
type heldTask struct {
	g *Gateway
	h *heldCall
}

func (t heldTask) final() bool {
	select {
	case <-t.h.done:
		return true
	default:
		return false
	}
}

func (t heldTask) handle() taskHandle {
	h := t.h
	out := taskHandle{TaskID: h.taskID, CreatedAt: rfc3339(h.started), LastUpdatedAt: rfc3339(h.started), PollInterval: mcptasks.PollInterval.Milliseconds()}
	if !t.final() {
		out.Status = "working"
		out.StatusMessage = fmt.Sprintf("Held for approval: %s. Poll tasks/get, or call tasks/result, which answers once the call is decided (and run, when approved).", h.status())
		return out
	}
	h.mu.Lock()
	out.LastUpdatedAt = rfc3339(h.doneAt)
	h.mu.Unlock()
	out.Status, out.StatusMessage = resultStatus(h.result)
	return out
}

func (t heldTask) wait(ctx context.Context) (*mcp.CallToolResult, error) {
	select {
	case <-t.h.done:
		t.g.deliver(t.h)
		return t.h.answer(), nil
	case <-ctx.Done():
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The call is not decided yet and the wait ended: call tasks/result again."}
	}
}

// resultStatus is the MCP task status of a call's result: failed for a
// tool error (the protocol's rule for tools/call), completed otherwise,
// with the error's text as the status message.
func resultStatus(res *mcp.CallToolResult) (status, message string) {
	if !res.IsError {
		return "completed", "The call ran; tasks/result answers its result."
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return "failed", t.Text
		}
	}
	return "failed", "The call did not succeed; tasks/result answers why."
}

// callAsTask answers a tools/call made as a task: a handle at once.
func (g *Gateway) callAsTask(ctx context.Context, req *mcp.CallToolRequest) (mcp.Result, error) {
	if g.tool(req.Params.Name) == nil {
		return nil, invalidParams("Unknown tool %q.", req.Params.Name)
	}
	c, res := g.readCall(req)
	if res != nil {
		return &createTaskResult{Task: g.local.add(res).handle()}, nil
	}
	d := g.policy.Decide(c.Call)
	switch d.Kind {
	case Allow:
		l := g.local.add(nil)
		g.wg.Go(func() {
			res, err := g.up.CallTool(g.ctx, &mcp.CallToolParams{Name: c.Tool, Arguments: c.args})
			if err != nil {
				res = toolError("The upstream server failed the call: %s", sentence(err))
			}
			l.set(res)
		})
		return &createTaskResult{Task: l.handle()}, nil
	case Deny:
		g.log.Info("gateway: denied a call", "tool", c.Tool, "rule_line", d.Line)
		return &createTaskResult{Task: g.local.add(toolError("The gateway's policy refuses this call: %s", d.Reason)).handle()}, nil
	}
	h, res := g.attach(ctx, c, d)
	if res != nil {
		return &createTaskResult{Task: g.local.add(res).handle()}, nil
	}
	return &createTaskResult{Task: heldTask{g, h}.handle()}, nil
}

// rfc3339 writes t as the Tasks utility's times.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// localHandles are the handles of calls made as tasks that no Arbiter
// task holds: allowed, denied or refused ones. They are kept in memory
// for localRetention after their answer.
type localHandles struct {
	mu      sync.Mutex
	handles map[string]*localHandle
}

// localRetention is how long a local handle's answer is kept.
const localRetention = time.Hour

// localHandle is one.
type localHandle struct {
	id      string
	created time.Time
	done    chan struct{}
	mu      sync.Mutex
	result  *mcp.CallToolResult
	doneAt  time.Time
}

// add returns a new handle, answered with res when not nil.
func (lh *localHandles) add(res *mcp.CallToolResult) *localHandle {
	l := &localHandle{id: "gwt_" + randomHex(8), created: time.Now(), done: make(chan struct{})}
	lh.mu.Lock()
	if lh.handles == nil {
		lh.handles = map[string]*localHandle{}
	}
	for id, old := range lh.handles {
		old.mu.Lock()
		stale := !old.doneAt.IsZero() && time.Since(old.doneAt) > localRetention
		old.mu.Unlock()
		if stale {
			delete(lh.handles, id)
		}
	}
	lh.handles[l.id] = l
	lh.mu.Unlock()
	if res != nil {
		l.set(res)
	}
	return l
}

func (lh *localHandles) get(id string) *localHandle {
	lh.mu.Lock()
	defer lh.mu.Unlock()
	return lh.handles[id]
}

func (lh *localHandles) list() []taskHandle {
	lh.mu.Lock()
	defer lh.mu.Unlock()
	var out []taskHandle
	for _, l := range lh.handles {
		out = append(out, l.handle())
	}
	return out
}

// set answers the handle with res.
func (l *localHandle) set(res *mcp.CallToolResult) {
	if res.Meta == nil {
		res.Meta = mcp.Meta{}
	}
	res.Meta[mcptasks.RelatedTaskMeta] = map[string]string{"taskId": l.id}
	l.mu.Lock()
	l.result, l.doneAt = res, time.Now()
	l.mu.Unlock()
	close(l.done)
}

func (l *localHandle) final() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

func (l *localHandle) handle() taskHandle {
	out := taskHandle{TaskID: l.id, CreatedAt: rfc3339(l.created), LastUpdatedAt: rfc3339(l.created), PollInterval: mcptasks.PollInterval.Milliseconds()}
	if !l.final() {
		out.Status, out.StatusMessage = "working", "The call is running."
		return out
	}
	l.mu.Lock()
	out.LastUpdatedAt = rfc3339(l.doneAt)
	res := l.result
	l.mu.Unlock()
	out.Status, out.StatusMessage = resultStatus(res)
	return out
}

func (l *localHandle) wait(ctx context.Context) (*mcp.CallToolResult, error) {
	select {
	case <-l.done:
		return l.result, nil
	case <-ctx.Done():
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The call has not ended and the wait ended: call tasks/result again."}
	}
}

// tasksCapability is the Tasks utility in initialize's capabilities.
var tasksCapability = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)

// taskSupport is what tools/list says of every tool: it may run as a
// task.
var taskSupport = json.RawMessage(`{"taskSupport":"optional"}`)

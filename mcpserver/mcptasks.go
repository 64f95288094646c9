package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/internal/mcptasks"
)

// The Tasks utility of MCP (protocol 2025-11-25) for ask_verdict, built on
// top of the Go SDK, which (v1.8.0) does not have it. A client that sends
// tools/call for ask_verdict with a "task" parameter gets a task handle at
// once instead of a call held open for a person: the handle's taskId is
// the Arbiter task's id, its status follows the task (working while it
// waits, completed with a verdict, failed once expired), tasks/result
// answers what ask_verdict would have answered, and tasks/list lists the
// account's tasks. Both transports route these requests through
// TaskUtility.Handle before the SDK, and Amend adds the utility to the
// SDK's answers to initialize and tools/list. Clients that send no "task"
// keep the blocking ask_verdict.

// taskHandle is an MCP task: the protocol's view of an Arbiter task.
type taskHandle = mcptasks.Handle

// handleOf is the MCP task of an Arbiter task: working until it is final,
// then completed when decided or failed when it expired.
func handleOf(t *client.Task) taskHandle {
	h := taskHandle{
		TaskID: t.ID, CreatedAt: rfc3339(&t.CreatedAt), LastUpdatedAt: rfc3339(&t.CreatedAt),
		PollInterval: mcptasks.PollInterval.Milliseconds(), StatusMessage: handleMessage(t),
	}
	switch t.Status {
	case client.StatusCompleted:
		h.Status = "completed"
		h.LastUpdatedAt = rfc3339(t.CompletedAt)
	case client.StatusExpired:
		h.Status = "failed"
		h.LastUpdatedAt = rfc3339(t.ExpiredAt)
	default:
		h.Status = "working"
		if n := len(t.Attempts); n > 0 && t.Attempts[n-1].FinishedAt != nil {
			h.LastUpdatedAt = rfc3339(t.Attempts[n-1].FinishedAt)
		}
	}
	if h.LastUpdatedAt == "" {
		h.LastUpdatedAt = h.CreatedAt
	}
	return h
}

// handleMessage says what the task's state means, in the Tasks utility's
// words: a final task as ask_verdict says it; one still open names the
// requests that follow it (tasks/get, tasks/result), not the get_task tool
// a client of the Tasks utility need not call.
func handleMessage(t *client.Task) string {
	if t.Final() {
		return message(t, 0)
	}
	return fmt.Sprintf("Not decided yet: the task is %s (%s). Poll tasks/get with this taskId (every pollInterval), "+
		"or call tasks/result, which answers with the verdict once the task is decided.", t.Status, waitingFor(t.Status))
}

// TaskUtility answers the requests of the Tasks utility over tasks.
type TaskUtility struct {
	t *tools
}

// NewTaskUtility returns the Tasks utility over tasks, the same Tasks the
// server's tools use.
func NewTaskUtility(tasks Tasks) *TaskUtility {
	return &TaskUtility{t: &tools{tasks: tasks, progressEvery: ProgressEvery}}
}

// Handle answers req when it belongs to the utility: tools/call with a
// "task" parameter, tasks/get, tasks/result, tasks/list and tasks/cancel.
// It returns nil for any other request, which the SDK serves. tasks/result
// waits for the task to be final, until ctx ends.
func (u *TaskUtility) Handle(ctx context.Context, req *jsonrpc.Request) *jsonrpc.Response {
	if req == nil || !req.IsCall() {
		return nil
	}
	var result any
	var err error
	switch req.Method {
	case "tools/call":
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
			Task      json.RawMessage `json:"task"`
		}
		if json.Unmarshal(req.Params, &p) != nil || len(p.Task) == 0 || string(p.Task) == "null" {
			return nil
		}
		result, err = u.callAsTask(ctx, p.Name, p.Arguments)
	case "tasks/get":
		result, err = u.get(ctx, req.Params)
	case "tasks/result":
		result, err = u.result(ctx, req.Params)
	case "tasks/list":
		result, err = u.list(ctx, req.Params)
	case "tasks/cancel":
		result, err = u.cancel(ctx, req.Params)
	default:
		return nil
	}
	res := &jsonrpc.Response{ID: req.ID}
	if err != nil {
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) {
			wire = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		res.Error = wire
		return res
	}
	b, err := json.Marshal(result)
	if err != nil {
		res.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "The answer could not be encoded."}
		return res
	}
	res.Result = b
	return res
}

// invalidParams is the JSON-RPC error -32602 with the sentence of err.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// callAsTask creates the task of an ask_verdict call and answers its
// handle at once (CreateTaskResult).
func (u *TaskUtility) callAsTask(ctx context.Context, name string, args json.RawMessage) (any, error) {
	if name != "ask_verdict" {
		return nil, invalidParams("%s does not run as a task; only ask_verdict does. Call it without \"task\".", name)
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	var in askVerdictInput
	if err := arbiter.DecodeJSONObject(args, &in, askVerdictTypeErrors, "The argument object"); err != nil {
		return nil, invalidParams("%s", arbiter.ErrorMessage(err))
	}
	if _, err := waitSeconds(in.WaitSeconds, DefaultAskWait); err != nil {
		return nil, invalidParams("%s", err.Error())
	}
	task, err := u.t.create(ctx, args, in)
	if err != nil {
		return nil, invalidParams("%s", toolError(err).Error())
	}
	return struct {
		Task taskHandle `json:"task"`
	}{handleOf(task)}, nil
}

// taskID reads the taskId parameter of a tasks/* request.
func taskID(params json.RawMessage) (string, error) {
	var p struct {
		TaskID string `json:"taskId"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.TaskID == "" {
		return "", invalidParams("taskId is required: the taskId of the handle tools/call answered.")
	}
	return p.TaskID, nil
}

// read reads the task of a tasks/* request; an unknown or foreign id is
// -32602, as the protocol asks.
func (u *TaskUtility) read(ctx context.Context, params json.RawMessage) (*client.Task, error) {
	id, err := taskID(params)
	if err != nil {
		return nil, err
	}
	task, err := u.t.tasks.GetTask(ctx, id)
	if err != nil {
		return nil, taskError(err)
	}
	return task, nil
}

// taskError is the JSON-RPC error of a failed read of a task.
func taskError(err error) error {
	var apiErr *client.Error
	if errors.As(err, &apiErr) && (apiErr.StatusCode == 404 || apiErr.StatusCode == 400) {
		return invalidParams("No such task: %s", apiErr.Message)
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: toolError(err).Error()}
}

// get answers tasks/get: the task's handle.
func (u *TaskUtility) get(ctx context.Context, params json.RawMessage) (any, error) {
	task, err := u.read(ctx, params)
	if err != nil {
		return nil, err
	}
	return handleOf(task), nil
}

// result answers tasks/result: once the task is final, what ask_verdict
// answers for it, tied to the task by _meta. It waits until then.
func (u *TaskUtility) result(ctx context.Context, params json.RawMessage) (any, error) {
	id, err := taskID(params)
	if err != nil {
		return nil, err
	}
	task, err := u.t.tasks.WaitTask(ctx, id, nil)
	if err != nil {
		if task == nil || !task.Final() {
			var apiErr *client.Error
			if errors.As(err, &apiErr) {
				return nil, taskError(err)
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
				Message: fmt.Sprintf("The task is not final yet and the wait ended (%v): call tasks/result again.", err)}
		}
	}
	a := answer(task, 0)
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"content":           []map[string]string{{"type": "text", "text": string(b)}},
		"structuredContent": json.RawMessage(b),
		"isError":           task.Status == client.StatusExpired,
		"_meta":             map[string]any{mcptasks.RelatedTaskMeta: map[string]string{"taskId": task.ID}},
	}, nil
}

// list answers tasks/list: the account's tasks, newest first, a page at a
// time; the cursor is the last task's id.
func (u *TaskUtility) list(ctx context.Context, params json.RawMessage) (any, error) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	_ = json.Unmarshal(params, &p)
	page, err := u.t.tasks.ListTasks(ctx, client.ListOptions{StartingAfter: p.Cursor, Limit: arbiter.MaxTaskPageSize})
	if err != nil {
		return nil, taskError(err)
	}
	out := struct {
		Tasks      []taskHandle `json:"tasks"`
		NextCursor string       `json:"nextCursor,omitempty"`
	}{Tasks: []taskHandle{}}
	for i := range page.Tasks {
		out.Tasks = append(out.Tasks, handleOf(page.Tasks[i]))
	}
	if page.HasMore && len(page.Tasks) > 0 {
		out.NextCursor = page.Tasks[len(page.Tasks)-1].ID
	}
	return out, nil
}

// cancel answers tasks/cancel by refusing it: a task may be in a person's
// hands, and Arbiter has no way to withdraw one; it ends when decided or
// at its deadline. Nothing changes.
func (u *TaskUtility) cancel(ctx context.Context, params json.RawMessage) (any, error) {
	task, err := u.read(ctx, params)
	if err != nil {
		return nil, err
	}
	if task.Final() {
		return nil, invalidParams("The task is already %s; there is nothing to cancel.", task.Status)
	}
	return nil, invalidParams("Arbiter tasks cannot be cancelled: a reviewer may be deciding it. It ends when it is decided, or at its deadline (deadline_seconds).")
}

// Amend adds the Tasks utility to the SDK's answer res to a request of
// method: the tasks capability to initialize's, and ask_verdict's
// execution.taskSupport "optional" to tools/list's. Other answers, and
// errors, are left as they are.
func Amend(method string, res *jsonrpc.Response) {
	if res == nil || res.Error != nil || len(res.Result) == 0 {
		return
	}
	var result map[string]json.RawMessage
	if json.Unmarshal(res.Result, &result) != nil {
		return
	}
	switch method {
	case "initialize":
		var caps map[string]json.RawMessage
		if json.Unmarshal(result["capabilities"], &caps) != nil || caps == nil {
			caps = map[string]json.RawMessage{}
		}
		caps["tasks"] = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)
		result["capabilities"], _ = json.Marshal(caps)
	case "tools/list":
		var tools []map[string]json.RawMessage
		if json.Unmarshal(result["tools"], &tools) != nil {
			return
		}
		for _, t := range tools {
			if string(t["name"]) == `"ask_verdict"` {
				t["execution"] = json.RawMessage(`{"taskSupport":"optional"}`)
			}
		}
		result["tools"], _ = json.Marshal(tools)
	default:
		return
	}
	if b, err := json.Marshal(result); err == nil {
		res.Result = b
	}
}

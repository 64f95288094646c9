// Package mcpserver is Arbiter's Model Context Protocol server: the tools
// an agent uses to ask for a verdict (ask_verdict), read a task (get_task)
// and list tasks (list_tasks).
//
// The tools are written once, over Tasks, a small interface of four calls
// that *client.Client satisfies as it is. Both transports serve the same
// tools: `arbiter mcp` (stdio) hands New the Go client of a running server,
// and the server's own Streamable HTTP endpoint, /v1/mcp, hands it an
// in-process adapter over the store (handlers.MCP), so that both speak the
// API's JSON forms, sentences and limits.
package mcpserver

import (
	"context"
	"runtime/debug"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter/client"
)

// Tasks is what the tools need of an Arbiter server, with the meaning the
// Go client gives these methods; *client.Client implements it. Failures the
// server answers are *client.Error values carrying the HTTP status, the
// API's sentence and, for 429 and 409, when to try again.
type Tasks interface {
	// CreateTask stores a task, or with an IdempotencyKey the server has
	// seen with the same task, returns the task made first.
	CreateTask(ctx context.Context, in client.TaskCreate) (*client.Task, error)
	// GetTask reads a task of the key's account.
	GetTask(ctx context.Context, id string) (*client.Task, error)
	// WaitTask waits until the task is final. When ctx ends first it
	// returns the last task it read (nil if none) and an error wrapping
	// ctx's.
	WaitTask(ctx context.Context, id string, opts *client.WaitOptions) (*client.Task, error)
	// ListTasks reads one page of the account's tasks, newest first.
	ListTasks(ctx context.Context, opts client.ListOptions) (*client.TaskPage, error)
}

var _ Tasks = (*client.Client)(nil)

// Name is the server's name in the MCP handshake.
const Name = "arbiter"

// instructions tell the model what the server is for; clients show them
// to the model beside the tools.
const instructions = `Arbiter gets a verdict on a closed question before you act: an automated ` +
	`verifier answers first, and when it is not confident enough a human reviewer decides. ` +
	`Call ask_verdict before an action that needs approval or a judgment you should not make alone, ` +
	`and follow the verdict. If it answers that the task is not decided yet, keep its task_id and ` +
	`call get_task later instead of asking again.`

// New returns the MCP server of the tools over tasks.
func New(tasks Tasks) *mcp.Server {
	return newServer(&tools{tasks: tasks, progressEvery: ProgressEvery})
}

// newServer returns the MCP server of the tools t.
func newServer(t *tools) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: Name, Title: "Arbiter", Version: version()},
		&mcp.ServerOptions{Instructions: instructions})
	addTool(s, askVerdictTool(), askVerdictTypeErrors, t.askVerdict)
	addTool(s, getTaskTool(), getTaskTypeErrors, t.getTask)
	addTool(s, listTasksTool(), listTasksTypeErrors, t.listTasks)
	return s
}

// version is the module's version as the Go toolchain recorded it in the
// binary, or "devel".
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

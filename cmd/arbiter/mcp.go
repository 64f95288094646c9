package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/mcpserver"
)

// mcpRequestTimeout bounds each API request of `arbiter mcp`: the longest
// long-poll a tool asks for, and time for the answer.
const mcpRequestTimeout = client.MaxLongPoll + 30*time.Second

// runMCP runs `arbiter mcp`: the MCP server of the agents' tools on stdin
// and stdout (the stdio transport, for agents that launch a command),
// calling a running server's API through the Go client. It serves until
// the agent closes stdin or the process is stopped; its one line of log
// goes to stderr, as stdout carries the protocol.
func runMCP(ctx context.Context, c *command, p *process, args []string) error {
	if err := c.parse(c.flagSet(p), p, args); err != nil {
		return err
	}
	if p.stdin == nil {
		return errors.New("mcp: there is no standard input to serve on")
	}
	cl, err := taskClient(c, p, client.WithHTTPClient(&http.Client{Timeout: mcpRequestTimeout}))
	if err != nil {
		return err
	}
	base := p.getenv(envBaseURL)
	if base == "" {
		base = client.DefaultBaseURL
	}
	fmt.Fprintf(p.stderr, "arbiter mcp: serving ask_verdict, get_task and list_tasks on stdin and stdout for %s\n", base)
	err = mcpserver.New(cl).Run(ctx, &mcpserver.StdioTransport{In: p.stdin, Out: p.stdout, Tasks: mcpserver.NewTaskUtility(cl)})
	if ctx.Err() != nil {
		return nil // stopped
	}
	return err
}

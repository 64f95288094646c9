package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// callTool answers a tools/call of an upstream tool: the policy decides,
// then the call passes through, is refused, or is held.
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	c, res := g.readCall(req)
	if res != nil {
		return res, nil
	}
	d := g.policy.Decide(c.Call)
	switch d.Kind {
	case Allow:
		return g.passThrough(ctx, req, c.args)
	case Deny:
		g.log.Info("gateway: denied a call", "tool", c.Tool, "rule_line", d.Line)
		return toolError("The gateway's policy refuses this call: %s", d.Reason), nil
	}
	return g.hold(ctx, req, c, d)
}

// incomingCall is a tool call as the gateway reads it.
type incomingCall struct {
	Call
	// args are the arguments as the agent sent them: a JSON object.
	args json.RawMessage
	// session and requestID identify the call for Arbiter's idempotency
	// key; version is the client's version, for the task's context.
	session, requestID, version string
}

// readCall reads req's tool, arguments and client. A call whose
// arguments are not a JSON object is answered with a tool error.
func (g *Gateway) readCall(req *mcp.CallToolRequest) (incomingCall, *mcp.CallToolResult) {
	c := incomingCall{Call: Call{Tool: req.Params.Name}, args: bytes.TrimSpace(req.Params.Arguments)}
	if len(c.args) == 0 || string(c.args) == "null" {
		c.args = json.RawMessage("{}")
	}
	if c.args[0] != '{' || json.Unmarshal(c.args, &c.Args) != nil {
		return c, toolError("The arguments of %s must be a JSON object.", c.Tool)
	}
	if ss := req.Session; ss != nil {
		if p := ss.InitializeParams(); p != nil && p.ClientInfo != nil {
			c.Client, c.version = p.ClientInfo.Name, p.ClientInfo.Version
		}
	}
	c.session = g.sessions.of(req.Session)
	c.requestID = metaString(req.Params.Meta, metaRequestID)
	return c, nil
}

// passThrough calls the upstream tool as the agent asked, and answers
// what it answered; the agent's progress token is carried both ways.
func (g *Gateway) passThrough(ctx context.Context, req *mcp.CallToolRequest, args json.RawMessage) (*mcp.CallToolResult, error) {
	params := &mcp.CallToolParams{Name: req.Params.Name, Arguments: args}
	if token := req.Params.GetProgressToken(); token != nil && req.Session != nil {
		upToken, done := g.progress.route(req.Session, token)
		defer done()
		params.SetProgressToken(upToken)
	}
	return g.up.CallTool(ctx, params)
}

// toolError is a tool result that is an error the model reads.
func toolError(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

// progressTokens carry the progress of allowed calls from the upstream to
// the agent: each call the agent asked progress of gets a token of the
// gateway's own upstream, as two sessions may use the same token.
type progressTokens struct {
	next   atomic.Int64
	routes sync.Map // the gateway's token (string) → progressRoute
}

// progressRoute is where a token's progress goes.
type progressRoute struct {
	session *mcp.ServerSession
	token   any
}

// route returns the upstream token of the agent's token on ss, and the
// function that forgets it when the call ends.
func (p *progressTokens) route(ss *mcp.ServerSession, token any) (string, func()) {
	up := "gw-" + strconv.FormatInt(p.next.Add(1), 10)
	p.routes.Store(up, progressRoute{ss, token})
	return up, func() { p.routes.Delete(up) }
}

// forward passes an upstream progress notification to the agent's call.
func (p *progressTokens) forward(ctx context.Context, req *mcp.ProgressNotificationClientRequest) {
	token, ok := req.Params.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := p.routes.Load(token)
	if !ok {
		return
	}
	r := v.(progressRoute)
	params := *req.Params
	params.ProgressToken = r.token
	_ = r.session.NotifyProgress(ctx, &params)
}

// metaString reads a string member of a request's _meta.
func metaString(m mcp.Meta, key string) string {
	switch v := m[key].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case json.Number:
		return v.String()
	}
	return ""
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// elapsed rounds a wait for logs: to the millisecond.
func elapsed(since time.Time) time.Duration { return time.Since(since).Round(time.Millisecond) }

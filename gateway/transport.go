package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter/mcpserver"
)

// middleware adds to the SDK's server what it lacks: the Tasks utility in
// initialize's and tools/list's answers, tools/call made as a task, and
// resources/read of any URI the upstream serves (listed or not).
func (g *Gateway) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/call":
			if r, ok := req.(*mcp.CallToolRequest); ok {
				if _, asTask := r.Params.Meta[metaTask]; asTask {
					return g.callAsTask(ctx, r)
				}
			}
		case "resources/read":
			if r, ok := req.(*mcp.ReadResourceRequest); ok {
				return g.up.ReadResource(ctx, r.Params)
			}
		case "initialize", "tools/list":
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			return amend(method, res), nil
		}
		return next(ctx, method, req)
	}
}

// amend adds the Tasks utility to the answer res of method: the tasks
// capability to initialize's, and execution.taskSupport "optional" to
// every tool of tools/list's, since any call may be held.
func amend(method string, res mcp.Result) mcp.Result {
	b, err := json.Marshal(res)
	if err != nil {
		return res
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return res
	}
	switch method {
	case "initialize":
		var caps map[string]json.RawMessage
		if json.Unmarshal(obj["capabilities"], &caps) != nil || caps == nil {
			caps = map[string]json.RawMessage{}
		}
		caps["tasks"] = tasksCapability
		obj["capabilities"], _ = json.Marshal(caps)
	case "tools/list":
		var tools []map[string]json.RawMessage
		if json.Unmarshal(obj["tools"], &tools) != nil {
			return res
		}
		for _, t := range tools {
			t["execution"] = taskSupport
		}
		obj["tools"], _ = json.Marshal(tools)
	}
	out := &rawResult{}
	if meta, ok := obj["_meta"]; ok {
		_ = json.Unmarshal(meta, &out.Meta)
		delete(obj, "_meta")
	}
	out.raw, _ = json.Marshal(obj)
	return out
}

// rawResult is a result given as JSON, with what the SDK adds after the
// middleware apart: its _meta, and on a connection of protocol 2026-07-28
// or later its resultType "complete", which the SDK sets only on a
// result that has its hook for it. The embedded ListToolsResult lends
// that hook (and the _meta); its other fields are unused.
type rawResult struct {
	mcp.ListToolsResult
	raw json.RawMessage
}

// MarshalJSON writes the result with its _meta and resultType.
func (r *rawResult) MarshalJSON() ([]byte, error) {
	if len(r.Meta) == 0 && r.ResultType == "" {
		return r.raw, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(r.raw, &obj); err != nil {
		return nil, err
	}
	if len(r.Meta) > 0 {
		obj["_meta"], _ = json.Marshal(r.Meta)
	}
	if r.ResultType != "" {
		obj["resultType"], _ = json.Marshal(r.ResultType)
	}
	return json.Marshal(obj)
}

// rewriteCall prepares a tools/call for the SDK, which drops what its
// params type does not name: its "task" parameter moves into _meta
// (metaTask), and its JSON-RPC id joins it (metaRequestID). A _meta the
// client sent with these keys loses them first.
func rewriteCall(req *jsonrpc.Request) {
	if req == nil || req.Method != "tools/call" || !req.IsCall() {
		return
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(req.Params, &p) != nil || p == nil {
		return // the SDK answers params that are not an object
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := p["_meta"]; ok && json.Unmarshal(raw, &meta) != nil {
		return
	}
	if meta == nil {
		meta = map[string]json.RawMessage{}
	}
	delete(meta, metaTask)
	if task, ok := p["task"]; ok && !bytes.Equal(bytes.TrimSpace(task), []byte("null")) {
		meta[metaTask] = task
	}
	delete(p, "task")
	id, _ := json.Marshal(idString(req.ID))
	meta[metaRequestID] = id
	p["_meta"], _ = json.Marshal(meta)
	if b, err := json.Marshal(p); err == nil {
		req.Params = b
	}
}

// idString writes a JSON-RPC id as a string.
func idString(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case string:
		return "s:" + v
	case int64:
		return "n:" + strconv.FormatInt(v, 10)
	case float64:
		return "n:" + strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(id.Raw())
}

// ServeStdio serves the gateway on in and out, one JSON-RPC message a
// line, until in ends or ctx is done.
func (g *Gateway) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	return g.server.Run(ctx, rewritingTransport{&mcpserver.StdioTransport{In: in, Out: out}})
}

// rewritingTransport is a transport whose incoming tools/call requests
// are rewritten (rewriteCall).
type rewritingTransport struct{ mcp.Transport }

// Connect connects the transport.
func (t rewritingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return rewritingConn{conn}, nil
}

// rewritingConn rewrites the tools/call requests it reads.
type rewritingConn struct{ mcp.Connection }

// Read reads the next message.
func (c rewritingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok {
		rewriteCall(req)
	}
	return msg, err
}

// MaxHTTPBodyBytes bounds one request body of the streamable HTTP
// transport.
const MaxHTTPBodyBytes = 4 << 20

// HTTPHandler returns the gateway's streamable HTTP transport, one
// session per client, answering with JSON or a stream of events as the
// SDK does. A JSON-RPC batch is refused whole, as on /v1/mcp.
func (g *Gateway) HTTPHandler() http.Handler {
	stream := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: MaxHTTPBodyBytes,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			stream.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxHTTPBodyBytes+1))
		if err != nil {
			http.Error(w, "The request body could not be read.", http.StatusBadRequest)
			return
		}
		if len(body) > MaxHTTPBodyBytes {
			http.Error(w, fmt.Sprintf("The request body is over %d bytes.", MaxHTTPBodyBytes), http.StatusRequestEntityTooLarge)
			return
		}
		if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(mcpserver.BatchRefusalJSON)
			return
		}
		if msg, err := jsonrpc.DecodeMessage(body); err == nil {
			req, _ := msg.(*jsonrpc.Request)
			if res := mcpserver.RefuseMalformedParams(req); res != nil {
				b, _ := jsonrpc.EncodeMessage(res)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(b)
				return
			}
			if req != nil && req.Method == "tools/call" {
				rewriteCall(req)
				if b, err := jsonrpc.EncodeMessage(req); err == nil {
					body = b
				}
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		stream.ServeHTTP(w, r)
	})
}

package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter"
)

// handlerFor is a tool's handler over its decoded arguments.
type handlerFor[In, Out any] func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, Out, error)

// addTool adds tool to s, served by h. Unlike the SDK's mcp.AddTool, which
// checks the arguments against the input schema and answers its
// validator's text (`maximum: 61/1 is greater than 60.000000`), in an
// order that varies between calls, the arguments are decoded as the API
// decodes a request body: the first problem in the order of the
// arguments, told in the API's sentence (typeErrors, per argument, for a
// wrong JSON type), and the same every time. The input schema is still
// served, for the model; the rules it states are checked by the handlers
// and the server.
func addTool[In, Out any](s *mcp.Server, tool *mcp.Tool, typeErrors map[string]string, h handlerFor[In, Out]) {
	out, err := jsonschema.For[Out](nil)
	if err != nil {
		panic(fmt.Sprintf("mcpserver: the output schema of %s: %v", tool.Name, err))
	}
	tool.OutputSchema = out
	s.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args json.RawMessage
		if req.Params != nil {
			args = req.Params.Arguments
		}
		if trimmed := bytes.TrimSpace(args); len(trimmed) == 0 || string(trimmed) == "null" {
			args = json.RawMessage("{}")
		}
		var in In
		if err := arbiter.DecodeJSONObject(args, &in, typeErrors, "The argument object"); err != nil {
			return failed(fmt.Errorf("%s", arbiter.ErrorMessage(err))), nil
		}
		res, outValue, err := h(ctx, req, in)
		if err != nil {
			if wire, ok := err.(*jsonrpc.Error); ok {
				return nil, wire
			}
			return failed(err), nil
		}
		b, err := json.Marshal(outValue)
		if err != nil {
			return nil, fmt.Errorf("encoding the answer of %s: %w", tool.Name, err)
		}
		if res == nil {
			res = &mcp.CallToolResult{}
		}
		res.StructuredContent = json.RawMessage(b)
		if res.Content == nil {
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(b)}}
		}
		return res, nil
	})
}

// failed is the tool error answering err.
func failed(err error) *mcp.CallToolResult {
	var res mcp.CallToolResult
	res.SetError(err)
	return &res
}

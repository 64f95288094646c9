package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// paramsOf are the params each request this server answers takes, as the
// types the SDK (or the Tasks utility) reads them into: a request whose
// params do not fit is refused before it reaches them, with the API's
// sentence instead of the decoder's, which quotes the request back.
var paramsOf = map[string]func() any{
	"initialize":               func() any { return new(mcp.InitializeParams) },
	"ping":                     func() any { return new(mcp.PingParams) },
	"tools/list":               func() any { return new(mcp.ListToolsParams) },
	"tools/call":               func() any { return new(mcp.CallToolParamsRaw) },
	"prompts/list":             func() any { return new(mcp.ListPromptsParams) },
	"prompts/get":              func() any { return new(mcp.GetPromptParams) },
	"resources/list":           func() any { return new(mcp.ListResourcesParams) },
	"resources/templates/list": func() any { return new(mcp.ListResourceTemplatesParams) },
	"resources/read":           func() any { return new(mcp.ReadResourceParams) },
	"resources/subscribe":      func() any { return new(mcp.SubscribeParams) },
	"resources/unsubscribe":    func() any { return new(mcp.UnsubscribeParams) },
	"logging/setLevel":         func() any { return new(mcp.SetLoggingLevelParams) },
	"completion/complete":      func() any { return new(mcp.CompleteParams) },
	"tasks/get":                func() any { return new(taskParams) },
	"tasks/result":             func() any { return new(taskParams) },
	"tasks/cancel":             func() any { return new(taskParams) },
	"tasks/list":               func() any { return new(taskListParams) },
}

// taskParams are the params of tasks/get, tasks/result and tasks/cancel.
type taskParams struct {
	TaskID string `json:"taskId"`
}

// taskListParams are the params of tasks/list.
type taskListParams struct {
	Cursor string `json:"cursor"`
}

// RefuseMalformedParams answers a call whose params are not what its
// method takes (not an object, or a member of the wrong type) with
// JSON-RPC's invalid params (-32602) and a sentence naming the member and
// the type it takes, and nothing of what was sent. It returns nil for any
// other request, which goes on to be served. Both transports ask it first.
func RefuseMalformedParams(req *jsonrpc.Request) *jsonrpc.Response {
	if req == nil || !req.IsCall() {
		return nil
	}
	if err := checkParams(req.Method, req.Params); err != nil {
		return &jsonrpc.Response{ID: req.ID, Error: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}}
	}
	return nil
}

// checkParams is RefuseMalformedParams's rule: the error to answer, or nil.
func checkParams(method string, params json.RawMessage) error {
	newParams, known := paramsOf[method]
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil // absent: the method says whether it needs them
	}
	if trimmed[0] != '{' {
		return fmt.Errorf("The params of %.64s must be a JSON object.", method)
	}
	if !known {
		return nil
	}
	err := json.Unmarshal(trimmed, newParams())
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Errorf("The params of %s are not valid: %s must be %s.", method, typeErr.Field, kindName(typeErr.Type))
	default:
		return fmt.Errorf("The params of %s are not valid: a member has a value of the wrong type.", method)
	}
}

// kindName says, for a person, what JSON a Go type is read from.
func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another type"
}

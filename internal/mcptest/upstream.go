// Package mcptest is a small MCP server, written with the MCP Go SDK, for
// the gateway's tests and benchmark to stand behind `arbiter gateway`: a
// bank's tools (a read, a transfer, a deletion), a resource, a resource
// template and a prompt. Every call of a tool that changes something is
// appended to a log file, one JSON line each, so that a test counts how
// often the upstream really ran a call and with which arguments.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Upstream configures the server.
type Upstream struct {
	// Log is the file each executed call is appended to ("" for none).
	Log string
	// Hold, when set, makes transfer wait, after logging its call, until
	// a file of this name exists: a test stops the gateway while the
	// upstream is running an approved call.
	Hold string
}

// Execution is one line of the log: a call the server ran.
type Execution struct {
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// ReadLog returns the calls the server at log ran, in order.
func ReadLog(path string) ([]Execution, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var out []Execution
	dec := json.NewDecoder(bytes.NewReader(b))
	for dec.More() {
		var e Execution
		if err := dec.Decode(&e); err != nil {
			return out, err
		}
		out = append(out, e)
	}
	return out, nil
}

// Transfer are transfer's arguments.
type Transfer struct {
	To     string  `json:"to" jsonschema:"the account to pay"`
	Amount float64 `json:"amount" jsonschema:"the amount, in euros"`
	Memo   string  `json:"memo,omitempty" jsonschema:"a note for the payee"`
}

// Account names an account.
type Account struct {
	Account string `json:"account" jsonschema:"the account's id"`
}

// Echo are echo's arguments.
type Echo struct {
	Message string `json:"message"`
}

// NewServer returns the server.
func (u *Upstream) NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "bank", Title: "A test bank", Version: "1.0.0"},
		&mcp.ServerOptions{Instructions: "The bank's tools: read a balance, transfer money, delete an account."})
	var mu sync.Mutex
	record := func(tool string, args any) error {
		if u.Log == "" {
			return nil
		}
		b, err := json.Marshal(Execution{Tool: tool, Args: mustJSON(args)})
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		f, err := os.OpenFile(u.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.Write(append(b, '\n'))
		return err
	}
	mcp.AddTool(s, &mcp.Tool{Name: "get_balance", Description: "Read an account's balance.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in Account) (*mcp.CallToolResult, map[string]any, error) {
			return nil, map[string]any{"account": in.Account, "balance": 100}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "transfer", Description: "Transfer money to another account."},
		func(ctx context.Context, req *mcp.CallToolRequest, in Transfer) (*mcp.CallToolResult, map[string]any, error) {
			if err := record("transfer", in); err != nil {
				return nil, nil, err
			}
			if u.Hold != "" {
				for {
					if _, err := os.Stat(u.Hold); err == nil {
						break
					}
					select {
					case <-ctx.Done():
						return nil, nil, ctx.Err()
					case <-time.After(20 * time.Millisecond):
					}
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("Transferred %g EUR to %s.", in.Amount, in.To)}}},
				map[string]any{"to": in.To, "amount": in.Amount, "memo": in.Memo}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "delete_account", Description: "Delete an account and everything in it."},
		func(ctx context.Context, req *mcp.CallToolRequest, in Account) (*mcp.CallToolResult, any, error) {
			if err := record("delete_account", in); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Deleted " + in.Account + "."}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Answer the message."},
		func(ctx context.Context, req *mcp.CallToolRequest, in Echo) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "open_branch", Description: "Open a branch: the bank gains the tool close_branch."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(s, &mcp.Tool{Name: "close_branch", Description: "Close the branch."},
				func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
					return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Closed."}}}, nil, nil
				})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "Opened."}}}, nil, nil
		})
	s.AddResource(&mcp.Resource{URI: "bank://terms", Name: "terms", MIMEType: "text/plain", Description: "The bank's terms."},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: "No overdrafts."}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "bank://accounts/{id}", Name: "account", MIMEType: "application/json"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: `{"balance":100}`}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: "statement", Description: "Ask for an account's statement.",
		Arguments: []*mcp.PromptArgument{{Name: "account", Required: true}}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: "Write the statement of account " + req.Params.Arguments["account"] + "."}}}}, nil
		})
	return s
}

// Serve serves the server on in and out (stdio) until in ends.
func (u *Upstream) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	return u.NewServer().Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

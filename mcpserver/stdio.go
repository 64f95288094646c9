package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxStdioMessageBytes bounds one message read on stdio: a line longer
// than this ends the session.
const MaxStdioMessageBytes = mcp.DefaultMaxLineLength

// BatchRefusal is the message of the JSON-RPC error (-32600, id null) that
// answers a batch on either transport.
const BatchRefusal = "JSON-RPC batches are not accepted: send each message on its own (MCP 2025-06-18 removed batching)."

// BatchRefusalJSON is the whole JSON-RPC error answering a batch.
var BatchRefusalJSON = []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"` + BatchRefusal + `"}}`)

// StdioTransport is the stdio transport of `arbiter mcp`: newline-delimited
// JSON-RPC messages on In and Out, as the SDK's IOTransport, except that
//
//   - a JSON-RPC batch is answered with one JSON-RPC error (-32600, id null)
//     and nothing in it runs, as on /v1/mcp, whatever protocol version the
//     client negotiated; a line that is not JSON is answered with a parse
//     error (-32700); the session goes on after both;
//   - at the end of In, every request already read is answered before the
//     session ends, so that `echo '…' | arbiter mcp` gets its answer;
//   - with Tasks set, the requests of the MCP Tasks utility are answered by
//     it, beside the SDK (see TaskUtility), and the SDK's answers to
//     initialize and tools/list say so.
type StdioTransport struct {
	In    io.Reader
	Out   io.Writer
	Tasks *TaskUtility
}

// Connect starts reading In.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	ctx, cancel := context.WithCancel(context.Background())
	c := &stdioConn{out: t.Out, lines: make(chan []byte), closed: make(chan struct{}), drained: make(chan struct{}),
		tasks: t.Tasks, ctx: ctx, cancel: cancel, amend: map[jsonrpc.ID]string{}}
	go c.readLines(t.In)
	return c, nil
}

// stdioConn is a connection of StdioTransport.
type stdioConn struct {
	out     io.Writer
	writeMu sync.Mutex

	lines   chan []byte // the lines read, closed at the end of the input
	readErr error       // why the input ended, set before lines is closed

	mu      sync.Mutex
	pending int           // requests read and not yet answered
	ended   bool          // the input ended
	drained chan struct{} // closed when the input ended and pending is 0

	closeOnce sync.Once
	closed    chan struct{}

	// tasks answers the Tasks utility's requests, each in its own
	// goroutine under ctx, which ends when the connection closes.
	tasks  *TaskUtility
	ctx    context.Context
	cancel context.CancelFunc
	amend  map[jsonrpc.ID]string // the requests whose answers Amend edits, by id; under mu
}

// readLines sends the lines of in to c.lines until in ends or c closes.
func (c *stdioConn) readLines(in io.Reader) {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), MaxStdioMessageBytes)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		select {
		case c.lines <- bytes.Clone(line):
		case <-c.closed:
			return
		}
	}
	c.readErr = sc.Err()
	if errors.Is(c.readErr, bufio.ErrTooLong) {
		c.readErr = fmt.Errorf("a message on stdin is longer than %d bytes", MaxStdioMessageBytes)
	}
	close(c.lines)
}

// Read returns the next message of the input. It answers batches and
// lines that are not JSON-RPC itself and reads on. At the end of the input
// it returns io.EOF once every request read has been answered.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		var line []byte
		select {
		case l, ok := <-c.lines:
			if !ok {
				return nil, c.endOfInput(ctx)
			}
			line = l
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		}
		if line[0] == '[' {
			if err := c.writeLine(BatchRefusalJSON); err != nil {
				return nil, err
			}
			continue
		}
		msg, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			if err := c.writeLine([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"The message is not a JSON-RPC 2.0 message."}}`)); err != nil {
				return nil, err
			}
			continue
		}
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			c.mu.Lock()
			c.pending++
			c.mu.Unlock()
			if res := RefuseMalformedParams(req); res != nil {
				if err := c.Write(ctx, res); err != nil {
					return nil, err
				}
				continue
			}
			c.mu.Lock()
			if req.Method == "initialize" || req.Method == "tools/list" {
				c.amend[req.ID] = req.Method
			}
			c.mu.Unlock()
			if c.tasks != nil && c.serveTask(req) {
				continue
			}
		}
		return msg, nil
	}
}

// endOfInput waits until every request read has been answered (or the
// connection closes, or ctx ends), then reports why the input ended.
func (c *stdioConn) endOfInput(ctx context.Context) error {
	c.mu.Lock()
	if !c.ended {
		c.ended = true
		if c.pending == 0 {
			close(c.drained)
		}
	}
	c.mu.Unlock()
	select {
	case <-c.drained:
	case <-c.closed:
	case <-ctx.Done():
		return ctx.Err()
	}
	if c.readErr != nil {
		return c.readErr
	}
	return io.EOF
}

// serveTask answers req in its own goroutine when it is the Tasks
// utility's, and reports whether it was.
func (c *stdioConn) serveTask(req *jsonrpc.Request) bool {
	switch req.Method {
	case "tools/call", "tasks/get", "tasks/result", "tasks/list", "tasks/cancel":
	default:
		return false
	}
	if req.Method == "tools/call" {
		var p struct {
			Task json.RawMessage `json:"task"`
		}
		if json.Unmarshal(req.Params, &p) != nil || len(p.Task) == 0 || string(p.Task) == "null" {
			return false
		}
	}
	go func() {
		if res := c.tasks.Handle(c.ctx, req); res != nil {
			_ = c.Write(c.ctx, res)
		}
	}()
	return true
}

// Write writes msg as one line; a response counts its request answered.
func (c *stdioConn) Write(_ context.Context, msg jsonrpc.Message) error {
	if res, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		method, found := c.amend[res.ID]
		delete(c.amend, res.ID)
		c.mu.Unlock()
		if found {
			Amend(method, res)
		}
	}
	b, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("encoding a message: %w", err)
	}
	err = c.writeLine(b)
	if _, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		if c.pending > 0 {
			c.pending--
		}
		if c.ended && c.pending == 0 {
			select {
			case <-c.drained:
			default:
				close(c.drained)
			}
		}
		c.mu.Unlock()
	}
	return err
}

// writeLine writes b and a newline, whole, between other writes.
func (c *stdioConn) writeLine(b []byte) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closed:
		return io.ErrClosedPipe
	default:
	}
	if _, err := c.out.Write(append(b[:len(b):len(b)], '\n')); err != nil {
		return fmt.Errorf("writing to stdout: %w", err)
	}
	return nil
}

// Close ends the connection; a Read waiting for input returns.
func (c *stdioConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		if c.cancel != nil {
			c.cancel()
		}
	})
	return nil
}

// SessionID is empty: stdio has one session.
func (c *stdioConn) SessionID() string { return "" }

// Package gateway is `arbiter gateway`: an MCP server for an agent that
// stands in front of one upstream MCP server and holds the tool calls a
// person must approve.
//
// The gateway is a client of the upstream server (over stdio or
// streamable HTTP) and lists its tools, resources and prompts as its own,
// unchanged, following the upstream's list changes. Each tool call meets
// the policy file's rules (policy.go): allowed calls pass through, denied
// ones get the rule's reason, and held ones become Arbiter tasks whose
// action is the call (held.go). Once a task approves the call, the
// gateway claims its execution in Arbiter and calls the upstream tool
// once, with the approved (perhaps edited) arguments; a rejection or an
// expiry is a tool error the model can read. A client that declared MCP
// Tasks gets a task handle at once (tasks.go); any other waits, with
// progress notifications, up to the gateway's wait.
package gateway

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter/client"
)

// Defaults of Config.
const (
	// DefaultWait is how long a call that is not an MCP task waits for a
	// decision before it answers "still waiting".
	DefaultWait = 10 * time.Minute
	// DefaultProgressEvery is how often a waiting call tells the client
	// it is still waiting, when the client asked for progress.
	DefaultProgressEvery = 10 * time.Second
)

// Arbiter is what the gateway needs of an Arbiter server, with the
// meaning the Go client gives these methods; *client.Client implements it.
type Arbiter interface {
	// CreateTask stores a task, or with an IdempotencyKey the server has
	// seen with the same task, returns the task made first.
	CreateTask(ctx context.Context, in client.TaskCreate) (*client.Task, error)
	// GetTask reads a task of the key's account.
	GetTask(ctx context.Context, id string) (*client.Task, error)
	// WaitTask waits until the task is final, or ctx ends.
	WaitTask(ctx context.Context, id string, opts *client.WaitOptions) (*client.Task, error)
	// ClaimExecution claims the execution of the task's approved action.
	ClaimExecution(ctx context.Context, id string, in client.ExecutionClaim) (*client.Execution, error)
}

var _ Arbiter = (*client.Client)(nil)

// Config configures a Gateway.
type Config struct {
	// Upstream connects to the upstream MCP server.
	Upstream mcp.Transport
	// UpstreamName names the upstream server in tasks' prompts and in
	// the logs: its command's program, or its URL without credentials.
	UpstreamName string
	// UpstreamID tells upstream servers apart in the state file: the same
	// for the same command or URL, across restarts.
	UpstreamID string
	// Policy decides each call; nil: every call gets the default, ask.
	Policy *Policy
	// Arbiter is the Arbiter server the held calls' tasks go to.
	Arbiter Arbiter
	// State is the state file of held calls; nil keeps them in memory.
	State *State
	// Wait is how long a call that is not an MCP task waits for a
	// decision (DefaultWait when zero).
	Wait time.Duration
	// ProgressEvery is how often a waiting call reports progress
	// (DefaultProgressEvery when zero).
	ProgressEvery time.Duration
	// Executor says who runs approved calls, in Arbiter's record of their
	// execution: "arbiter gateway on host-1 (pid 4711)".
	Executor string
	// Version is the gateway's version, for the upstream's handshake.
	Version string
	// Logger receives the log of held calls (never arguments' values);
	// nil logs nowhere.
	Logger *slog.Logger
}

// Gateway is a running gateway: the MCP server the agent talks to, over
// the upstream's client session.
type Gateway struct {
	cfg    Config
	policy *Policy
	log    *slog.Logger
	server *mcp.Server
	up     *mcp.ClientSession

	// ctx lives as long as the gateway: held calls wait and run under it
	// when the request that made them is gone (MCP tasks, calls that
	// answered "still waiting").
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	tools map[string]*mcp.Tool // the upstream's tools, by name
	// prompts, resources and templates are the upstream's, by name, URI
	// and URI template.
	prompts   map[string]string
	resources map[string]string
	templates map[string]string

	held     heldCalls
	sessions sessionIDs
	progress progressTokens
	local    localHandles
}

// New connects to the upstream server and returns the gateway serving
// its tools, resources and prompts. Close ends it.
func New(ctx context.Context, cfg Config) (*Gateway, error) {
	if cfg.Upstream == nil || cfg.Arbiter == nil {
		return nil, errors.New("gateway: an upstream and an Arbiter server are required")
	}
	cfg.Wait = cmp.Or(cfg.Wait, DefaultWait)
	cfg.ProgressEvery = cmp.Or(cfg.ProgressEvery, DefaultProgressEvery)
	cfg.Executor = cmp.Or(cfg.Executor, "arbiter gateway")
	cfg.Version = cmp.Or(cfg.Version, "devel")
	policy := cfg.Policy
	if policy == nil {
		policy = &Policy{Default: Ask}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, policy: policy, log: logger,
		tools: map[string]*mcp.Tool{}, prompts: map[string]string{}, resources: map[string]string{}, templates: map[string]string{}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.held.init()

	up := mcp.NewClient(&mcp.Implementation{Name: "arbiter-gateway", Version: cfg.Version}, &mcp.ClientOptions{
		Capabilities:                &mcp.ClientCapabilities{},
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { g.resync(g.syncTools) },
		PromptListChangedHandler:    func(context.Context, *mcp.PromptListChangedRequest) { g.resync(g.syncPrompts) },
		ResourceListChangedHandler:  func(context.Context, *mcp.ResourceListChangedRequest) { g.resync(g.syncResources) },
		ResourceUpdatedHandler:      g.resourceUpdated,
		ProgressNotificationHandler: g.progress.forward,
	})
	session, err := up.Connect(ctx, cfg.Upstream, nil)
	if err != nil {
		g.cancel()
		return nil, fmt.Errorf("connect to the upstream server %s: %w", cfg.UpstreamName, err)
	}
	g.up = session
	init := session.InitializeResult()
	g.server = mcp.NewServer(serverInfo(init), &mcp.ServerOptions{
		Instructions:       instructions(init.Instructions),
		Capabilities:       capabilities(init.Capabilities),
		SubscribeHandler:   g.subscribe,
		UnsubscribeHandler: g.unsubscribe,
		CompletionHandler:  g.complete(init.Capabilities),
	})
	g.server.AddReceivingMiddleware(g.middleware)
	if err := g.addTaskMethods(); err != nil {
		g.Close()
		return nil, err
	}
	for _, sync := range []func(context.Context) error{g.syncTools, g.syncPrompts, g.syncResources} {
		if err := sync(ctx); err != nil {
			g.Close()
			return nil, err
		}
	}
	return g, nil
}

// Server returns the MCP server the agent talks to.
func (g *Gateway) Server() *mcp.Server { return g.server }

// UpstreamDone returns a channel closed when the upstream session ends:
// its process exited, or its server closed the session.
func (g *Gateway) UpstreamDone() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		_ = g.up.Wait()
		close(done)
	}()
	return done
}

// Close stops the calls the gateway holds (their tasks stay in Arbiter,
// and the state file, for a restart) and closes the upstream session.
func (g *Gateway) Close() error {
	g.cancel()
	g.wg.Wait()
	if g.up != nil {
		return g.up.Close()
	}
	return nil
}

// serverInfo is the gateway's name to the agent: the upstream's, which
// the agent's configuration knows it by.
func serverInfo(init *mcp.InitializeResult) *mcp.Implementation {
	if init != nil && init.ServerInfo != nil && init.ServerInfo.Name != "" {
		impl := *init.ServerInfo
		return &impl
	}
	return &mcp.Implementation{Name: "arbiter-gateway"}
}

// heldInstructions tell the model what a held call looks like.
const heldInstructions = `Some tool calls on this server wait for a person's approval (Arbiter). ` +
	`A call that answers "Still waiting: task tsk_…" has not run: call the same tool with the same arguments again later to keep waiting; ` +
	`it runs once, after it is approved. A call a person rejected answers the reviewer's reason and did not run.`

// instructions are the upstream's instructions and the gateway's.
func instructions(upstream string) string {
	if strings.TrimSpace(upstream) == "" {
		return heldInstructions
	}
	return upstream + "\n\n" + heldInstructions
}

// capabilities are the gateway's: the upstream's tools, resources,
// prompts and completions, each with list changes announced.
func capabilities(up *mcp.ServerCapabilities) *mcp.ServerCapabilities {
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	if up == nil {
		return caps
	}
	if up.Prompts != nil {
		caps.Prompts = &mcp.PromptCapabilities{ListChanged: true}
	}
	if up.Resources != nil {
		caps.Resources = &mcp.ResourceCapabilities{ListChanged: true, Subscribe: up.Resources.Subscribe}
	}
	if up.Completions != nil {
		caps.Completions = &mcp.CompletionCapabilities{}
	}
	return caps
}

// resync runs sync in the background, after an upstream list change.
func (g *Gateway) resync(sync func(context.Context) error) {
	g.wg.Go(func() {
		ctx, cancel := context.WithTimeout(g.ctx, time.Minute)
		defer cancel()
		if err := sync(ctx); err != nil && g.ctx.Err() == nil {
			g.log.Warn("gateway: reading the upstream's lists after a change failed", "error", err)
		}
	})
}

// syncTools lists the upstream's tools and serves the same ones: tools
// added or changed are (re)added, tools gone are removed; the server
// announces the change to the agent's sessions.
func (g *Gateway) syncTools(ctx context.Context) error {
	seen := map[string]bool{}
	for tool, err := range g.up.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the upstream's tools: %w", err)
		}
		if !objectSchema(tool.InputSchema) {
			g.log.Warn("gateway: the upstream's tool has an input schema that is not an object; it is left out", "tool", tool.Name)
			continue
		}
		seen[tool.Name] = true
		g.mu.Lock()
		old := g.tools[tool.Name]
		g.tools[tool.Name] = tool
		g.mu.Unlock()
		if old == nil || !sameJSON(old, tool) {
			g.server.AddTool(tool, g.callTool)
		}
	}
	g.mu.Lock()
	var gone []string
	for name := range g.tools {
		if !seen[name] {
			gone = append(gone, name)
			delete(g.tools, name)
		}
	}
	g.mu.Unlock()
	if len(gone) > 0 {
		g.server.RemoveTools(gone...)
	}
	return nil
}

// objectSchema reports whether schema is a JSON Schema of type object, as
// MCP requires of a tool's input schema.
func objectSchema(schema any) bool {
	m, ok := schema.(map[string]any)
	return ok && m["type"] == "object"
}

// sameJSON reports whether a and b encode the same.
func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}

// syncPrompts serves the upstream's prompts, each answered by the
// upstream.
func (g *Gateway) syncPrompts(ctx context.Context) error {
	if caps := g.up.InitializeResult().Capabilities; caps == nil || caps.Prompts == nil {
		return nil
	}
	seen := map[string]bool{}
	for p, err := range g.up.Prompts(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the upstream's prompts: %w", err)
		}
		seen[p.Name] = true
		b, _ := json.Marshal(p)
		g.mu.Lock()
		changed := g.prompts[p.Name] != string(b)
		g.prompts[p.Name] = string(b)
		g.mu.Unlock()
		if changed {
			g.server.AddPrompt(p, func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
				return g.up.GetPrompt(ctx, req.Params)
			})
		}
	}
	g.server.RemovePrompts(g.forget(g.prompts, seen)...)
	return nil
}

// syncResources serves the upstream's resources and resource templates;
// reads go to the upstream (middleware), whatever the URI.
func (g *Gateway) syncResources(ctx context.Context) error {
	if caps := g.up.InitializeResult().Capabilities; caps == nil || caps.Resources == nil {
		return nil
	}
	read := func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return g.up.ReadResource(ctx, req.Params)
	}
	seen := map[string]bool{}
	for r, err := range g.up.Resources(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the upstream's resources: %w", err)
		}
		seen[r.URI] = true
		b, _ := json.Marshal(r)
		g.mu.Lock()
		changed := g.resources[r.URI] != string(b)
		g.resources[r.URI] = string(b)
		g.mu.Unlock()
		if changed {
			g.server.AddResource(r, read)
		}
	}
	g.server.RemoveResources(g.forget(g.resources, seen)...)
	seen = map[string]bool{}
	for t, err := range g.up.ResourceTemplates(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the upstream's resource templates: %w", err)
		}
		seen[t.URITemplate] = true
		b, _ := json.Marshal(t)
		g.mu.Lock()
		changed := g.templates[t.URITemplate] != string(b)
		g.templates[t.URITemplate] = string(b)
		g.mu.Unlock()
		if changed {
			g.server.AddResourceTemplate(t, read)
		}
	}
	g.server.RemoveResourceTemplates(g.forget(g.templates, seen)...)
	return nil
}

// forget removes from known the names not seen, and returns them.
func (g *Gateway) forget(known map[string]string, seen map[string]bool) []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var gone []string
	for name := range known {
		if !seen[name] {
			gone = append(gone, name)
			delete(known, name)
		}
	}
	return gone
}

// subscribe passes an agent's subscription to a resource on.
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	return g.up.Subscribe(ctx, req.Params)
}

// unsubscribe passes an agent's unsubscription on.
func (g *Gateway) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	return g.up.Unsubscribe(ctx, req.Params)
}

// resourceUpdated tells the agent's sessions subscribed to a resource
// that the upstream changed it.
func (g *Gateway) resourceUpdated(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	_ = g.server.ResourceUpdated(ctx, req.Params)
}

// complete passes completion requests on, when the upstream offers them.
func (g *Gateway) complete(caps *mcp.ServerCapabilities) func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	if caps == nil || caps.Completions == nil {
		return nil
	}
	return func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		return g.up.Complete(ctx, req.Params)
	}
}

// tool returns the upstream's tool name.
func (g *Gateway) tool(name string) *mcp.Tool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tools[name]
}

// UpstreamID returns an id of an upstream named by its command or URL:
// the same one across restarts.
func UpstreamID(commandOrURL string) string {
	sum := sha256.Sum256([]byte(commandOrURL))
	return hex.EncodeToString(sum[:8])
}

// sessionIDs gives each agent session an id: the transport's (streamable
// HTTP's Mcp-Session-Id), or one made up for a session that has none
// (stdio's).
type sessionIDs struct {
	mu  sync.Mutex
	ids map[*mcp.ServerSession]string
}

// of returns the id of ss.
func (s *sessionIDs) of(ss *mcp.ServerSession) string {
	if ss == nil {
		return ""
	}
	if id := ss.ID(); id != "" {
		return id
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[*mcp.ServerSession]string{}
	}
	id, ok := s.ids[ss]
	if !ok {
		id = "stdio-" + randomHex(8)
		s.ids[ss] = id
	}
	return id
}

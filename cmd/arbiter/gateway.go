package main

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/gateway"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// The gateway's environment, beside the client's.
const (
	envGatewayToken = "ARBITER_GATEWAY_TOKEN"
)

// gatewayEnv is the environment `arbiter gateway` reads.
var gatewayEnv = append([]envVar{
	{name: envAPIKey, help: "the API key the held calls' tasks are created with (required; --api-key overrides it)"},
	{name: envBaseURL, help: "the Arbiter server's origin (--arbiter-url overrides it)", def: client.DefaultBaseURL},
	{name: envGatewayToken, help: "with --listen: the bearer token every HTTP request must carry (Authorization: Bearer …); unset, none is asked"},
	{name: "XDG_STATE_HOME", help: "where the default --state file goes (else ~/.local/state)"},
}, tracingEnv...)

// gatewayFlags are the command line of `arbiter gateway`.
type gatewayFlags struct {
	upstreamCmd, upstreamURL string
	headers                  []string
	policy, defaultKind      string
	listen                   string
	wait, progressEvery      time.Duration
	state                    string
	arbiterURL, apiKey       string
}

// define defines the flags on fs.
func (f *gatewayFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.upstreamCmd, "upstream-cmd", "", "the upstream MCP server's command, run by sh -c, spoken to on its stdin and stdout: 'npx -y @modelcontextprotocol/server-github' (this or --upstream-url)")
	fs.StringVar(&f.upstreamURL, "upstream-url", "", "the upstream MCP server's streamable HTTP endpoint, such as https://mcp.example.com/mcp (this or --upstream-cmd)")
	fs.Func("upstream-header", "a header sent with every request to --upstream-url, as 'Name: value'; repeat for each", func(v string) error {
		name, value, ok := strings.Cut(v, ":")
		if !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(name, " \t") {
			return errors.New("give a header as 'Name: value'")
		}
		f.headers = append(f.headers, strings.TrimSpace(name)+": "+strings.TrimSpace(value))
		return nil
	})
	fs.StringVar(&f.policy, "policy", "", "the policy file: rules in order that allow, deny or ask about each tool call (docs/gateway.md); without one, every call gets --default")
	fs.StringVar(&f.defaultKind, "default", gateway.Ask, "what a call no rule matches gets: ask (a task; fail closed), allow or deny")
	fs.StringVar(&f.listen, "listen", "", "serve the agent over streamable HTTP at http://ADDR/mcp, such as 127.0.0.1:8765, instead of on stdin and stdout")
	fs.DurationVar(&f.wait, "wait", gateway.DefaultWait, "how long a held call that is not an MCP task waits for its decision before answering \"still waiting\"")
	fs.DurationVar(&f.progressEvery, "progress-every", gateway.DefaultProgressEvery, "how often a held call sends the client a progress notification, when it asked for them")
	fs.StringVar(&f.state, "state", "", "the state file of held calls, so that a call sent again after a restart finds its task (default: $XDG_STATE_HOME/arbiter/gateway-ID.json, ID from the upstream)")
	fs.StringVar(&f.arbiterURL, "arbiter-url", "", "the Arbiter server's origin (default: "+envBaseURL+", else "+client.DefaultBaseURL+")")
	fs.StringVar(&f.apiKey, "api-key", "", "the API key of the held calls' tasks (default: "+envAPIKey+")")
}

// gatewayCommand is one run of `arbiter gateway`: the gateway over its
// upstream and its Arbiter server, and what closes them, in order.
type gatewayCommand struct {
	c       *command
	p       *process
	f       gatewayFlags
	logger  *slog.Logger
	gw      *gateway.Gateway
	closers []func() error
}

// runGateway runs `arbiter gateway`: an MCP server for the agent in front
// of one upstream MCP server, which holds the calls its policy asks
// about until an Arbiter task approves them. It serves until the agent
// closes stdin (or, with --listen, until stopped), or the upstream ends.
// Its log goes to stderr, as stdout carries the protocol.
func runGateway(ctx context.Context, c *command, p *process, args []string) error {
	g := &gatewayCommand{c: c, p: p}
	fs := c.flagSet(p)
	g.f.define(fs)
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	defer g.close()
	for _, step := range []func(context.Context) error{g.check, g.startTracing, g.start} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	return g.serve(ctx)
}

// check checks the command line.
func (g *gatewayCommand) check(context.Context) error {
	f := &g.f
	switch {
	case (f.upstreamCmd == "") == (f.upstreamURL == ""):
		return g.c.usage(g.p, "give the upstream server: --upstream-cmd 'COMMAND' or --upstream-url URL, one of them")
	case f.upstreamCmd != "" && len(f.headers) > 0:
		return g.c.usage(g.p, "--upstream-header goes with --upstream-url")
	case f.defaultKind != gateway.Ask && f.defaultKind != gateway.Allow && f.defaultKind != gateway.Deny:
		return g.c.usage(g.p, "--default must be ask, allow or deny, not %q", f.defaultKind)
	case f.wait <= 0 || f.progressEvery <= 0:
		return g.c.usage(g.p, "--wait and --progress-every must be positive durations, such as 10m and 10s")
	}
	if f.upstreamURL != "" {
		u, err := url.Parse(f.upstreamURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return g.c.usage(g.p, "--upstream-url must be an http:// or https:// URL")
		}
	}
	g.logger = slog.New(slog.NewTextHandler(g.p.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return nil
}

// startTracing exports traces when the OTEL_* variables ask for them.
func (g *gatewayCommand) startTracing(ctx context.Context) error {
	shutdown, err := telemetry.Setup(ctx, g.p.getenv, cmp.Or(stampedVersion, "(devel)"))
	if err != nil || shutdown == nil {
		return err
	}
	g.closers = append(g.closers, func() error {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return shutdown(flush)
	})
	return nil
}

// start reads the policy, opens the state file and the Arbiter client,
// and connects to the upstream.
func (g *gatewayCommand) start(ctx context.Context) error {
	f := &g.f
	var policy *gateway.Policy
	if f.policy != "" {
		var err error
		if policy, err = gateway.LoadPolicy(f.policy); err != nil {
			return err
		}
	} else {
		policy = &gateway.Policy{}
	}
	policy.Default = f.defaultKind

	key := cmp.Or(f.apiKey, g.p.getenv(envAPIKey))
	if key == "" {
		return fmt.Errorf("gateway: no API key: set %s or give --api-key; create one with `arbiter admin create-key --email E`", envAPIKey)
	}
	base := cmp.Or(f.arbiterURL, g.p.getenv(envBaseURL), client.DefaultBaseURL)
	arbiterClient := client.New(client.WithAPIKey(key), client.WithBaseURL(base),
		client.WithHTTPClient(&http.Client{Timeout: mcpRequestTimeout, Transport: telemetry.Transport(http.DefaultTransport)}))

	upstream, name, id, err := g.upstream()
	if err != nil {
		return err
	}
	statePath := f.state
	if statePath == "" {
		statePath = defaultStatePath(g.p.getenv, id)
	}
	state, err := gateway.OpenState(statePath)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	host, _ := os.Hostname()
	gw, err := gateway.New(ctx, gateway.Config{
		Upstream: upstream, UpstreamName: name, UpstreamID: id,
		Policy: policy, Arbiter: arbiterClient, State: state,
		Wait: f.wait, ProgressEvery: f.progressEvery,
		Executor: fmt.Sprintf("arbiter gateway on %s (pid %d)", cmp.Or(host, "a host"), os.Getpid()),
		Version:  cmp.Or(stampedVersion, "devel"),
		Logger:   g.logger,
	})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	g.gw = gw
	g.closers = append([]func() error{gw.Close}, g.closers...)
	g.logger.Info("gateway: serving", "upstream", name, "arbiter", base, "rules", len(policy.Rules), "default", f.defaultKind, "state", statePath)
	return nil
}

// upstream returns the transport to the upstream server, its name for
// people (its program, or its URL without credentials or query) and its
// id in the state file.
func (g *gatewayCommand) upstream() (mcp.Transport, string, string, error) {
	f := &g.f
	if f.upstreamCmd != "" {
		name := f.upstreamCmd
		if fields := strings.Fields(f.upstreamCmd); len(fields) > 0 {
			name = filepath.Base(fields[0])
			if name == "npx" || name == "uvx" || name == "docker" {
				name = strings.Join(fields[:min(len(fields), 3)], " ")
			}
		}
		cmd := upstreamCommand(f.upstreamCmd)
		cmd.Stderr = g.p.stderr
		return &mcp.CommandTransport{Command: cmd}, name, gateway.UpstreamID("cmd:" + f.upstreamCmd), nil
	}
	u, _ := url.Parse(f.upstreamURL)
	shown := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}
	header := http.Header{}
	for _, h := range f.headers {
		name, value, _ := strings.Cut(h, ": ")
		header.Add(name, value)
	}
	hc := &http.Client{Transport: headerTransport{header: header, base: telemetry.Transport(http.DefaultTransport)}}
	return &mcp.StreamableClientTransport{Endpoint: f.upstreamURL, HTTPClient: hc}, shown.String(), gateway.UpstreamID("url:" + shown.String()), nil
}

// upstreamCommand runs line by the system's shell.
func upstreamCommand(line string) *exec.Cmd {
	if runtime.GOOS == "windows" {
		return exec.Command("cmd", "/C", line)
	}
	return exec.Command("sh", "-c", "exec "+line)
}

// headerTransport adds the upstream's headers to each request.
type headerTransport struct {
	header http.Header
	base   http.RoundTripper
}

// RoundTrip sends req with the headers.
func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for name, values := range t.header {
		req.Header[name] = values
	}
	return t.base.RoundTrip(req)
}

// defaultStatePath is where the state file of the upstream id goes.
func defaultStatePath(getenv func(string) string, id string) string {
	dir := getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "arbiter", "gateway-"+id+".json")
}

// serve serves the agent: on stdin and stdout, or over streamable HTTP
// with --listen, until the agent leaves, ctx ends or the upstream ends.
func (g *gatewayCommand) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	errUpstream := errors.New("gateway: the upstream server ended its session")
	upstreamDone := g.gw.UpstreamDone()
	go func() {
		select {
		case <-upstreamDone:
			cancel(errUpstream)
		case <-ctx.Done():
		}
	}()
	var err error
	if g.f.listen == "" {
		if g.p.stdin == nil {
			return errors.New("gateway: there is no standard input to serve on; give --listen ADDR to serve over HTTP")
		}
		err = g.gw.ServeStdio(ctx, g.p.stdin, g.p.stdout)
	} else {
		err = g.serveHTTP(ctx)
	}
	if cause := context.Cause(ctx); errors.Is(cause, errUpstream) {
		return cause
	}
	if ctx.Err() != nil {
		return nil // stopped
	}
	return err
}

// serveHTTP serves the streamable HTTP transport at /mcp on --listen.
func (g *gatewayCommand) serveHTTP(ctx context.Context) error {
	ln, err := net.Listen("tcp", g.f.listen)
	if err != nil {
		return fmt.Errorf("gateway: listen on %s: %w", g.f.listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", requireToken(g.p.getenv(envGatewayToken), g.gw.HTTPHandler()))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	g.logger.Info("gateway: listening", "url", "http://"+ln.Addr().String()+"/mcp")
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// requireToken answers 401 to a request without the bearer token, when
// there is one. It compares the SHA-256 digests of the two in constant
// time, so that neither the time taken nor the token's length tells a
// caller how close a guess came.
func requireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(bearerOf(r)))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="arbiter-gateway"`)
			http.Error(w, "This gateway needs its token: Authorization: Bearer …", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerOf returns the request's bearer token.
func bearerOf(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// close closes what start opened, in order.
func (g *gatewayCommand) close() {
	for _, c := range g.closers {
		if err := c(); err != nil && g.logger != nil {
			g.logger.Warn("gateway: closing", "error", err)
		}
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/config"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/metrics"
	"github.com/arbiterhq/arbiter/web"
)

// runServe runs `arbiter serve` or, without the HTTP server, `arbiter
// worker` until ctx ends, then shuts down gracefully.
func runServe(ctx context.Context, c *command, p *process, args []string) error {
	s := &server{api: c.name == "serve", worker: true, stderr: p.stderr}
	fs := c.flagSet(p)
	getenv := c.settingFlags(fs, p.getenv)
	s.getenv = getenv
	if s.api {
		fs.BoolVar(&s.worker, "worker", true, "also run the worker in this process")
	}
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	var err error
	if s.cfg, err = config.FromEnv(getenv, c.scopes...); err != nil {
		return err
	}
	if s.logger, err = newLogger(p.stderr, s.cfg.LogLevel); err != nil {
		return err
	}
	defer s.Close()
	return s.Run(ctx)
}

// MaxHeaderBytes bounds a request's header; a larger one is answered 431,
// by the routes as they answer failures (web.MaxHeaderBytes), or past
// web.ServerMaxHeaderBytes by net/http.
const MaxHeaderBytes = web.MaxHeaderBytes

// listen opens the HTTP listener on addr, holding at most maxConns
// connections at once and perIP from one client address (trusted proxies
// excepted), so that neither a flood of connections can use up the
// process's file descriptors nor one client every slot: see
// web.ConnLimiter.
func listen(addr string, maxConns, perIP int, trusted []netip.Prefix) (*web.ConnLimiter, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return web.LimitConnections(ln, maxConns, perIP, trusted), nil
}

// newHTTPServer returns the server of handler on ln with the limits every
// connection lives under: a header of at most MaxHeaderBytes read within 10
// seconds, a request within 30, an answer within 30, and an idle keep-alive
// connection closed after 60. It tells ln which connections are idle, and
// the requests which connection they came on.
func newHTTPServer(handler http.Handler, ln *web.ConnLimiter, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ConnState:         ln.ConnState,
		ConnContext:       ln.ConnContext,
		MaxHeaderBytes:    web.ServerMaxHeaderBytes,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// metricsCountEvery is how often a process serving metrics counts the
// open tasks for the arbiter_tasks gauge.
const metricsCountEvery = 15 * time.Second

// metricsMux serves the metrics at /metrics, and the process's probes at
// /livez and /readyz, which is where a worker, that serves no HTTP else,
// answers Kubernetes' probes.
func metricsMux(m *metrics.Metrics, ready arbiter.ReadinessService) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.Handle("GET /livez", handlers.Livez())
	mux.Handle("GET /readyz", handlers.Readyz(ready))
	return mux
}

// listenAside opens the listener of a side server (the metrics, the
// profiler), which answers anyone who reaches it: it logs where it
// listens, with a warning when that is beyond loopback.
func listenAside(name, addr string, logger *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", name, addr, err)
	}
	if beyondLoopback(ln.Addr()) {
		logger.Warn(name+" listening beyond loopback: anyone who can reach this address can read it; "+
			"listen on 127.0.0.1 or [::1], or firewall it", "addr", ln.Addr().String())
	} else {
		logger.Info(name+" listening", "addr", ln.Addr().String())
	}
	return ln, nil
}

// beyondLoopback reports whether a listener on addr can be reached from
// another machine: it listens on every interface (0.0.0.0, [::]) or on an
// address that is not a loopback one.
func beyondLoopback(addr net.Addr) bool {
	ip := parseAddrIP(addr.String())
	return !ip.IsValid() || !ip.IsLoopback()
}

// parseAddrIP returns the IP of a "host:port" address, or the zero Addr.
func parseAddrIP(hostPort string) netip.Addr {
	ap, err := netip.ParseAddrPort(hostPort)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// servePprof serves the profiler on ln, apart from the public router, and
// returns its server.
func servePprof(ln net.Listener, logger *slog.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("profiler", "error", err.Error())
		}
	}()
	return srv
}

// newLogger returns a text logger at the named level.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("ARBITER_LOG_LEVEL must be debug, info, warn or error, not %q", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// runMigrate runs `arbiter migrate`, the deploy step: it migrates
// whatever ARBITER_MIGRATE says.
func runMigrate(ctx context.Context, c *command, p *process, args []string) error {
	if err := c.parse(c.flagSet(p), p, args); err != nil {
		return err
	}
	s, err := newStoreServer(ctx, func(name string) string {
		if name == "ARBITER_MIGRATE" {
			return "auto"
		}
		return p.getenv(name)
	})
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(p.stderr, "arbiter: %s store migrated\n", s.store.Dialect())
	return nil
}

// newStoreServer opens the store for a command that does no more with it
// than its own work (migrate, admin), migrating it unless ARBITER_MIGRATE
// is off: it reads the settings of config.ScopeStore only, and seeds
// nothing.
func newStoreServer(ctx context.Context, getenv func(string) string) (*server, error) {
	cfg, err := config.FromEnv(getenv, config.ScopeStore)
	if err != nil {
		return nil, err
	}
	s := &server{cfg: cfg}
	if err := s.openStore(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

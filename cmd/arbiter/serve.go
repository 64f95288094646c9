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
	"sync"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/mail"
	"github.com/arbiterhq/arbiter/metrics"
	"github.com/arbiterhq/arbiter/web"
	"github.com/arbiterhq/arbiter/worker"
)

// runServe runs `arbiter serve` or, without the HTTP server, `arbiter
// worker` until ctx ends, then shuts down gracefully.
func runServe(ctx context.Context, c *command, p *process, args []string) error {
	api, stderr := c.name == "serve", p.stderr
	fs := c.flagSet(p)
	getenv := c.settingFlags(fs, p.getenv)
	runWorker := true
	if api {
		fs.BoolVar(&runWorker, "worker", true, "also run the worker in this process")
	}
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	cfg, err := web.ConfigFromEnv(getenv, c.scopes...)
	if err != nil {
		return err
	}
	logger, err := newLogger(stderr, cfg.LogLevel)
	if err != nil {
		return err
	}

	store, err := db.Open(ctx, cfg.DatabaseURL, db.Options{
		DailyTaskCap: cfg.DailyTaskCap, MaxOpenConns: cfg.DatabaseMaxConns, Timeout: cfg.DatabaseTimeout,
		IdempotencyTTL:    cfg.IdempotencyTTL,
		Logger:            logger,
		AllowDotlessEmail: cfg.EmailAllowDotless, SessionIdle: cfg.SessionIdleTimeout,
	})
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Migrate(ctx); err != nil {
		return err
	}
	if err := store.SeedDemo(ctx); err != nil {
		return err
	}

	// The key-use flusher stops when stop is called, after the HTTP server
	// has drained, so no request's last use is lost.
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { tuneGC(bg) })
	// Metrics, when asked for, on their own listener; the open tasks are
	// counted by one process of each kind that serves them.
	var m *metrics.Metrics
	var observer worker.Observer
	var webhookObserver worker.WebhookObserver
	if cfg.MetricsAddr != "" {
		m = metrics.New()
		observer, webhookObserver = m, m
		metricsLn, err := listenAside("metrics", cfg.MetricsAddr, logger)
		if err != nil {
			return err
		}
		metricsSrv := &http.Server{Handler: metricsMux(m), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := metricsSrv.Serve(metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics", "error", err.Error())
			}
		}()
		defer metricsSrv.Close()
		wg.Go(func() { m.CountOpenTasksEvery(bg, store, metricsCountEvery, logger) })
	}
	// serve listens before its worker starts, so that the origins left
	// unset follow the address listened on before the worker's digests
	// link to the reviewer site.
	var ln *web.ConnLimiter
	var fileLimit uint64
	if api {
		if fileLimit, err = raiseOpenFileLimit(); err != nil {
			logger.Warn("could not raise the open file limit", "error", err.Error())
		}
		if ln, err = listen(cfg.Addr, cfg.MaxConnections, cfg.MaxConnectionsPerIP, cfg.TrustedProxies); err != nil {
			return err
		}
		defer ln.Close()
		for _, warning := range cfg.DeriveOrigins(ln.Addr().String()) {
			logger.Warn(warning)
		}
	}
	notify := func(int) {}
	if runWorker {
		verifier, err := agent.New(cfg.Agent)
		if err != nil {
			return err
		}
		wcfg := worker.Config{
			Queue: store, Verifier: verifier, Health: store, Demo: store, Keys: store, Logger: logger, Observer: observer,
			Created:     store.TasksCreated(),
			Concurrency: cfg.Workers, AttemptTimeout: cfg.AgentTimeout, Grace: cfg.ShutdownGrace,
		}
		mailer, err := mail.New(cfg.SMTPURL, cfg.MailFrom, logger, stderr)
		if err != nil {
			return err
		}
		// Reviewers' digests go out by the sign-in links' mail path and
		// link to the reviewer site: serve knows its address, a worker
		// alone only when ARBITER_REVIEW_URL is set, and without it claims
		// no digest it could not link.
		sender, ok := mailer.(arbiter.MailSender)
		switch {
		case ok && cfg.ReviewURL != "":
			wcfg.Digests, wcfg.Mail, wcfg.QueueURL = store, sender, cfg.ReviewURL+"/review"
			if cfg.AppURL != "" {
				wcfg.ReportURL = cfg.AppURL + "/calibration"
			}
		case !api:
			logger.Info("this worker sends no reviewer digests: ARBITER_REVIEW_URL is not set")
		}
		w := worker.New(wcfg)
		notify = func(int) { w.Notify() }
		// The worker stops claiming at the signal, while the HTTP server
		// drains; both have the grace period.
		wg.Go(func() {
			w.Run(ctx)
		})
		deliverer := worker.NewDeliverer(worker.WebhookConfig{
			Store: store, Queued: store.WebhooksQueued(), AllowPrivate: cfg.WebhookAllowPrivate,
			Mailer: mailer, Logger: logger, Observer: webhookObserver,
		})
		wg.Go(func() {
			deliverer.Run(ctx)
		})
	}
	if !api {
		logger.Info("worker started", "store", store.Dialect(), "agent", cfg.Agent.Backend, "concurrency", cfg.Workers)
		<-ctx.Done()
		stop()
		wg.Wait()
		return nil
	}

	keys := web.NewKeyChecker(store, nil)
	created := notify
	if m != nil {
		keys.Observe = m.KeyChecked
		created = func(n int) {
			m.TasksCreated(n)
			notify(n)
		}
	}
	wg.Go(func() {
		keys.Run(bg, func(err error) { logger.Error("flush key use", "error", err.Error()) })
	})
	// Requests waiting for a task are answered when shutdown begins.
	shuttingDown := make(chan struct{})
	router := &web.Router{
		Services: web.Services{
			Tasks: store, Keys: store, Demo: store, Health: store, Queue: store, Watcher: store,
			Accounts: store, Logins: store, Identities: store, Audit: store, Members: store, Reservations: store, Stats: store, Webhooks: store,
			Calibration: store, Agreement: store,
		},
		KeyChecker:     keys,
		Logger:         logger,
		TaskCreated:    created,
		ShuttingDown:   shuttingDown,
		TrustedProxies: cfg.TrustedProxies,

		WebhookAllowPrivate: cfg.WebhookAllowPrivate,
	}
	if m != nil {
		router.Metrics = m
	}
	if err := router.ConfigureSignIn(ctx, cfg, store, logger, stderr); err != nil {
		return err
	}
	srv := newHTTPServer(router.Routes(), ln, logger)
	srv.RegisterOnShutdown(func() { close(shuttingDown) })
	if cfg.PprofAddr != "" {
		pprofLn, err := listenAside("profiler", cfg.PprofAddr, logger)
		if err != nil {
			return err
		}
		pprofSrv := servePprof(pprofLn, logger)
		defer pprofSrv.Close()
	}
	if fileLimit > 0 && uint64(cfg.MaxConnections) > fileLimit {
		logger.Warn("ARBITER_MAX_CONNECTIONS is above the open file limit; connections past the limit will fail to be accepted",
			"max_connections", cfg.MaxConnections, "open_file_limit", fileLimit)
	}
	logger.Info("listening", "addr", ln.Addr().String(), "store", store.Dialect(), "worker", runWorker,
		"max_connections", cfg.MaxConnections, "max_connections_per_ip", min(cfg.MaxConnectionsPerIP, cfg.MaxConnections),
		"open_file_limit", fileLimit)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		cancel()
		stop()
		wg.Wait()
		return err
	case <-ctx.Done():
	}

	logger.Info("shutting down", "grace", cfg.ShutdownGrace)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownGrace)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	stop()
	wg.Wait()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
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
// connection closed after 60. It tells ln which connections are idle.
func newHTTPServer(handler http.Handler, ln *web.ConnLimiter, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ConnState:         ln.ConnState,
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

// metricsMux serves the metrics at /metrics.
func metricsMux(m *metrics.Metrics) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
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

// runMigrate runs `arbiter migrate`.
func runMigrate(ctx context.Context, c *command, p *process, args []string) error {
	if err := c.parse(c.flagSet(p), p, args); err != nil {
		return err
	}
	store, err := openStore(ctx, p.getenv)
	if err != nil {
		return err
	}
	defer store.Close()
	fmt.Fprintf(p.stderr, "arbiter: %s store migrated\n", store.Dialect())
	return nil
}

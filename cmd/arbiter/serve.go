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
	"sync"
	"time"

	"golang.org/x/net/netutil"

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
		metricsLn, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			return fmt.Errorf("metrics: listen on %s: %w", cfg.MetricsAddr, err)
		}
		metricsSrv := &http.Server{Handler: metricsMux(m), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := metricsSrv.Serve(metricsLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("metrics", "error", err.Error())
			}
		}()
		defer metricsSrv.Close()
		wg.Go(func() { m.CountOpenTasksEvery(bg, store, metricsCountEvery, logger) })
		logger.Info("metrics listening; keep it off public networks", "addr", metricsLn.Addr().String())
	}
	// serve listens before its worker starts, so that the origins left
	// unset follow the address listened on before the worker's digests
	// link to the reviewer site.
	var ln net.Listener
	var fileLimit uint64
	if api {
		if fileLimit, err = raiseOpenFileLimit(); err != nil {
			logger.Warn("could not raise the open file limit", "error", err.Error())
		}
		if ln, err = listen(cfg.Addr, cfg.MaxConnections); err != nil {
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
			Calibration: store,
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
	srv := newHTTPServer(router.Routes(), logger)
	srv.RegisterOnShutdown(func() { close(shuttingDown) })
	if cfg.PprofAddr != "" {
		go servePprof(cfg.PprofAddr, logger)
	}
	if fileLimit > 0 && uint64(cfg.MaxConnections) > fileLimit {
		logger.Warn("ARBITER_MAX_CONNECTIONS is above the open file limit; connections past the limit will fail to be accepted",
			"max_connections", cfg.MaxConnections, "open_file_limit", fileLimit)
	}
	logger.Info("listening", "addr", ln.Addr().String(), "store", store.Dialect(), "worker", runWorker,
		"max_connections", cfg.MaxConnections, "open_file_limit", fileLimit)

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

// MaxHeaderBytes bounds a request's header; a larger one is answered 431.
const MaxHeaderBytes = 64 << 10

// listen opens the HTTP listener on addr, accepting at most maxConns
// connections at once: past them, new connections wait in the kernel's
// queue until one closes, so a flood of idle connections cannot use up the
// process's file descriptors.
func listen(addr string, maxConns int) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return netutil.LimitListener(ln, maxConns), nil
}

// newHTTPServer returns the server of handler with the limits every
// connection lives under: a header of at most MaxHeaderBytes read within 10
// seconds, a request within 30, an answer within 30, and an idle keep-alive
// connection closed after 60.
func newHTTPServer(handler http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		MaxHeaderBytes:    MaxHeaderBytes,
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

// servePprof serves the profiler on its own listener, apart from the
// public router.
func servePprof(addr string, logger *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	logger.Warn("profiler listening; keep it off public networks", "addr", addr)
	if err := http.ListenAndServe(addr, mux); err != nil {
		logger.Error("profiler", "error", err.Error())
	}
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

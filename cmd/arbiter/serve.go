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

	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/db"
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

	store, err := db.Open(ctx, cfg.DatabaseURL, db.Options{DailyTaskCap: cfg.DailyTaskCap, MaxOpenConns: cfg.DatabaseMaxConns})
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
	notify := func() {}
	if runWorker {
		verifier, err := agent.New(cfg.Agent)
		if err != nil {
			return err
		}
		w := worker.New(worker.Config{
			Queue: store, Verifier: verifier, Health: store, Demo: store, Logger: logger,
			Concurrency: cfg.Workers, AttemptTimeout: cfg.AgentTimeout, Grace: cfg.ShutdownGrace,
		})
		notify = w.Notify
		// The worker stops claiming at the signal, while the HTTP server
		// drains; both have the grace period.
		wg.Go(func() {
			w.Run(ctx)
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
	wg.Go(func() {
		keys.Run(bg, func(err error) { logger.Error("flush key use", "error", err.Error()) })
	})
	router := &web.Router{
		Services: web.Services{
			Tasks: store, Keys: store, Demo: store, Health: store, Queue: store,
			Accounts: store, Logins: store, Identities: store, Audit: store,
		},
		KeyChecker:     keys,
		Logger:         logger,
		TaskCreated:    notify,
		TrustedProxies: cfg.TrustedProxies,
	}
	if err := router.ConfigureSignIn(ctx, cfg, store, logger); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{
		Handler:           router.Routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if cfg.PprofAddr != "" {
		go servePprof(cfg.PprofAddr, logger)
	}
	logger.Info("listening", "addr", ln.Addr().String(), "store", store.Dialect(), "worker", runWorker)

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

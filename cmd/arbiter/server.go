package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/config"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/internal/limits"
	"github.com/arbiterhq/arbiter/internal/telemetry"
	"github.com/arbiterhq/arbiter/mail"
	"github.com/arbiterhq/arbiter/metrics"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/teams"
	"github.com/arbiterhq/arbiter/web"
	"github.com/arbiterhq/arbiter/worker"
)

// server is one process of Arbiter: `arbiter serve` (the HTTP server and,
// unless --worker=false, the worker), `arbiter worker` (the worker alone),
// or an admin command (the store alone). Run opens it step by step and
// runs it until its context ends; Close closes what the steps opened, in
// the reverse order.
type server struct {
	cfg config.Config
	// getenv reads the OTEL_* variables (startTracing; nil, no traces)
	// and the keys a verifiers file's api_key_env names.
	getenv func(string) string
	logger *slog.Logger // nil for the commands that only open the store
	stderr io.Writer    // where the mailer writes sign-in links without SMTP
	// api serves HTTP (serve); worker runs the worker tier in this process.
	api, worker bool

	store   *db.DB
	metrics *metrics.Metrics // nil unless ARBITER_METRICS_ADDR is set
	// ln is the HTTP listener (serve), fileLimit the open file limit in
	// force once raised for it.
	ln        *web.ConnLimiter
	fileLimit uint64
	// notify tells the worker of n tasks created, so it claims them at
	// once; it does nothing without a worker in this process.
	notify func(n int)
	// slack calls Slack's Web API (ARBITER_SLACK_API_URL).
	slack *slack.Client
	// teams calls the Bot Connector with the bots' tokens
	// (ARBITER_TEAMS_LOGIN_URL).
	teams *teams.Connector
	// stopping is closed when the stop signal comes: the process drains
	// and is no longer ready (Ready).
	stopping <-chan struct{}
	// beating is set once this process's worker stored its first
	// heartbeat: until then a process that runs one is not ready.
	beating atomic.Bool
	// endDrain, when not nil, ends ARBITER_DRAIN_DELAY early (tests).
	endDrain <-chan struct{}
	// tracing is set when the process exports traces (startTracing).
	tracing bool
	// mailer sends the process's mail (ARBITER_SMTP_URL, or the log):
	// sign-in links, webhook notices and the mail outbox.
	mailer mail.Mailer

	// background is the context of the loops that must outlive the stop
	// signal (the key-use flusher, the collector's tuning, the metrics'
	// count): Close ends it after the HTTP server has drained, so no
	// request's last key use is lost.
	background     context.Context
	stopBackground context.CancelFunc
	// loops are the goroutines Close waits for: the background loops, and
	// the worker and the deliverer, which stop claiming at the signal and
	// finish within the grace period.
	loops sync.WaitGroup
	// closers close the listeners and side servers, in the reverse order
	// of their opening, once the loops are done.
	closers []func() error
	// agentVerifiers are the verifiers the worker of this process asks,
	// once startWorkers built them; the dashboard's backtests ask them
	// too, paced by the same limiters.
	agentVerifiers *agent.Verifiers
}

// Run runs the process until ctx ends, then shuts down gracefully: the
// HTTP server drains its requests and the worker its verifier calls,
// within ARBITER_SHUTDOWN_GRACE. Call Close after it, whatever it returns.
func (s *server) Run(ctx context.Context) (err error) {
	if err := s.startTracing(ctx); err != nil {
		return err
	}
	if err := s.openStore(ctx); err != nil {
		return err
	}
	if err := s.store.SeedDemo(ctx); err != nil {
		return err
	}
	if err := resealSecrets(ctx, s.store, s.logger); err != nil {
		return err
	}
	s.slack = slack.NewClient(s.cfg.SlackAPIURL, nil)
	if s.mailer, err = mail.New(s.cfg.SMTPURL, s.cfg.MailFrom, s.logger, s.stderr); err != nil {
		return err
	}
	s.closers = append(s.closers, s.mailer.Close)
	s.teams = &teams.Connector{Tokens: &teams.Tokens{LoginURL: s.cfg.TeamsLoginURL}}
	s.background, s.stopBackground = context.WithCancel(context.WithoutCancel(ctx))
	s.stopping = ctx.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.loops.Go(func() { tuneGC(s.background) })
	if err := s.startMetrics(); err != nil {
		return err
	}
	if s.api {
		// serve listens before its worker starts, so that the origins left
		// unset follow the address listened on before the worker's digests
		// link to the reviewer site.
		if err := s.listenHTTP(); err != nil {
			return err
		}
	}
	s.notify = func(int) {}
	if s.worker {
		if err := s.startWorkers(ctx); err != nil {
			return err
		}
	}
	if !s.api {
		s.logger.Info("worker started", "store", s.store.Dialect(), "agent", s.cfg.Agent.Backend, "concurrency", s.cfg.Workers)
		<-ctx.Done()
		return nil
	}
	return s.serveHTTP(ctx)
}

// Close ends the background loops and waits for them, the worker and the
// deliverer, then closes the listeners, the side servers and the store.
// The process is ending: what fails to close is not reported.
func (s *server) Close() {
	if s.stopBackground != nil {
		s.stopBackground()
	}
	s.loops.Wait()
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	if s.store != nil {
		s.store.Close()
	}
}

// startTracing, when the OTEL_* variables ask for traces, exports them by
// OTLP over HTTP (internal/telemetry); Close flushes what is left, last.
func (s *server) startTracing(ctx context.Context) error {
	if s.getenv == nil {
		return nil
	}
	version := stampedVersion
	if version == "" {
		version = "(devel)"
	}
	shutdown, err := telemetry.Setup(ctx, s.getenv, version)
	if err != nil || shutdown == nil {
		return err
	}
	s.tracing = true
	s.closers = append(s.closers, func() error {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return shutdown(flush)
	})
	s.logger.Info("exporting traces by OTLP over HTTP")
	return nil
}

// openStore opens the store ARBITER_DATABASE_URL names, migrates it
// unless ARBITER_MIGRATE=off, and refuses a schema this release cannot
// serve.
func (s *server) openStore(ctx context.Context) error {
	store, err := db.Open(ctx, s.cfg.DatabaseURL, db.Options{
		DailyTaskCap: s.cfg.DailyTaskCap, MaxOpenConns: s.cfg.DatabaseMaxConns, Timeout: s.cfg.DatabaseTimeout,
		IdempotencyTTL:    s.cfg.IdempotencyTTL,
		Logger:            s.logger,
		AllowDotlessEmail: s.cfg.EmailAllowDotless, SessionIdle: s.cfg.SessionIdleTimeout,
		Secrets:   s.cfg.SecretKey,
		ListenURL: s.cfg.DatabaseListenURL, TransactionPooler: s.cfg.DatabaseTransactionPooler,
		ReadURL: s.cfg.DatabaseReadURL,
	})
	if err != nil {
		return err
	}
	s.store = store
	if s.cfg.MigrateAtStart {
		if err := store.Migrate(ctx); err != nil {
			return err
		}
	}
	return s.checkSchema(ctx)
}

// checkSchema refuses a schema older than this release needs, or newer
// by a change that is not additive, with a sentence that says what to do;
// it logs the additive migrations of a later release it serves on.
func (s *server) checkSchema(ctx context.Context) error {
	state, err := s.store.CheckSchema(ctx)
	if err != nil {
		return err
	}
	if err := state.Err(); err != nil {
		return err
	}
	if len(state.Newer) > 0 && s.logger != nil {
		s.logger.Info("the schema has additive migrations of a later release", "migrations", fmt.Sprint(state.Newer))
	}
	return nil
}

// Ready reports whether this process should be sent traffic (/readyz):
// not once the stop signal came, not before its worker, when it runs one,
// stored its first heartbeat, and not while the store does not answer or
// its schema is one this release cannot serve.
func (s *server) Ready(ctx context.Context) error {
	select {
	case <-s.stopping:
		return arbiter.Errorf(arbiter.EUNAVAILABLE, "This process is shutting down.")
	default:
	}
	if s.worker && !s.beating.Load() {
		return arbiter.Errorf(arbiter.EUNAVAILABLE, "This process's worker has not started.")
	}
	return s.store.Ready(ctx)
}

// firstBeat passes the worker's heartbeats to the store and marks the
// process's worker started at the first one stored.
type firstBeat struct {
	worker.Heartbeater
	beating *atomic.Bool
}

// Heartbeat records the beat and, once stored, that the worker started.
func (b firstBeat) Heartbeat(ctx context.Context, workerID string) error {
	err := b.Heartbeater.Heartbeat(ctx, workerID)
	if err == nil {
		b.beating.Store(true)
	}
	return err
}

// startMetrics, when ARBITER_METRICS_ADDR is set, serves the metrics on
// their own listener and counts the open tasks for them (one process of
// each kind that serves them counts).
func (s *server) startMetrics() error {
	if s.cfg.MetricsAddr == "" {
		return nil
	}
	s.metrics = metrics.New()
	ln, err := listenAside("metrics", s.cfg.MetricsAddr, s.logger)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: metricsMux(s.metrics, s), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("metrics", "error", err.Error())
		}
	}()
	s.closers = append(s.closers, srv.Close)
	s.loops.Go(func() { s.metrics.CountOpenTasksEvery(s.background, s.store, metricsCountEvery, s.logger) })
	return nil
}

// listenHTTP raises the open file limit, opens the HTTP listener at
// ARBITER_ADDR and fills the origins left unset from the address it
// listens on.
func (s *server) listenHTTP() error {
	var err error
	if s.fileLimit, err = raiseOpenFileLimit(); err != nil {
		s.logger.Warn("could not raise the open file limit", "error", err.Error())
	}
	if s.ln, err = listen(s.cfg.Addr, s.cfg.MaxConnections, s.cfg.MaxConnectionsPerIP, s.cfg.TrustedProxies); err != nil {
		return err
	}
	s.closers = append(s.closers, s.ln.Close)
	for _, warning := range s.cfg.DeriveOrigins(s.ln.Addr().String()) {
		s.logger.Warn(warning)
	}
	return nil
}

// startWorkers starts the worker, which claims pending tasks and asks the
// verifier, fires reminders and queues digests, and the deliverer of each
// outbound channel (one line each below, its own deliver_<channel>.go).
// All stop claiming when ctx ends, while the HTTP server drains; all have
// the grace period.
func (s *server) startWorkers(ctx context.Context) error {
	verifiers, err := s.verifiers()
	if err != nil {
		return err
	}
	s.agentVerifiers = verifiers
	var observer worker.Observer
	if s.metrics != nil {
		observer = s.metrics
	}
	wcfg := worker.Config{
		Queue: s.store, Verifiers: verifiers, Policies: s.store, Certificates: s.store, Health: firstBeat{s.store, &s.beating}, Demo: s.store, Keys: s.store, Logger: s.logger, Observer: observer,
		Created:     s.store.TasksCreated(),
		Concurrency: s.cfg.Workers, AttemptTimeout: s.cfg.AgentTimeout, Grace: s.cfg.ShutdownGrace,
		Version: s.cfg.AgentVersion, Backend: s.cfg.Agent.Backend,
		// Reminders and escalation fire wherever the worker runs; their
		// webhooks, Slack questions and mails go through the outboxes.
		Alerts: s.store,
	}
	// Reviewers' digests link to the reviewer site: serve knows its
	// address, a worker alone only when ARBITER_REVIEW_URL is set, and
	// without it queues no digest.
	if s.cfg.ReviewURL != "" {
		wcfg.Digests = s.store
	} else {
		s.logger.Info("this worker sends no reviewer digests: ARBITER_REVIEW_URL is not set")
	}
	w := worker.New(wcfg)
	s.notify = func(int) { w.Notify() }
	s.loops.Go(func() { w.Run(ctx) })

	s.deliverWebhooks(ctx)
	s.deliverSlack(ctx)
	s.deliverMail(ctx)
	s.deliverTeams(ctx)
	return nil
}

// verifiers builds the agent tier's verifiers: the verifiers file's
// (ARBITER_VERIFIERS), or the one ARBITER_AGENT and ARBITER_AGENT_*
// configure, a cascade of one named after its backend. A bad file, a
// rules file that does not compile or a key variable that is not set
// stops the process at start, saying where.
func (s *server) verifiers() (*agent.Verifiers, error) {
	getenv := s.getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if s.cfg.Verifiers != "" {
		set, err := agent.LoadVerifiers(s.cfg.Verifiers)
		if err != nil {
			return nil, err
		}
		return agent.Build(set, getenv, nil, s.verifierLimiter)
	}
	cfg := agentConfig(s.cfg.Agent)
	if _, err := agent.New(cfg); err != nil {
		return nil, err
	}
	return agent.Build(agent.SetOf(cfg, "ARBITER_AGENT_API_KEY"), func(string) string { return cfg.APIKey }, nil, s.verifierLimiter)
}

// verifierLimiter returns the limiter of the verifier name at maxRPS:
// on Postgres, shared by every worker process of the deployment
// (agent.SharedLimiter), so that ARBITER_AGENT_MAX_RPS, or a verifier's
// max_rps, is the deployment's budget and a cut after a 429 paces every
// process; nil on SQLite, whose one process paces its calls itself. It is
// an agent.LimiterOf.
func (s *server) verifierLimiter(name string, maxRPS float64) agent.RateLimiter {
	state := s.store.LimitState()
	if state == nil {
		return nil
	}
	return agent.NewSharedLimiter(state, name, maxRPS, s.logger)
}

// agentConfig is the verifier's part of the configuration, as agent.New
// takes it.
func agentConfig(a config.Agent) agent.Config {
	return agent.Config{Backend: a.Backend, BaseURL: a.BaseURL, APIKey: a.APIKey, Model: a.Model, RulesFile: a.RulesFile, MaxRPS: a.MaxRPS}
}

// serveHTTP serves the API, the dashboard and the reviewer site on the
// listener until ctx ends or the server fails, then shuts the server down:
// the requests waiting for a task are answered at once (the parked ones
// too, before it returns), the others have the grace period.
func (s *server) serveHTTP(ctx context.Context) error {
	// Requests waiting for a task are answered when shutdown begins.
	shuttingDown := make(chan struct{})
	router, err := s.router(ctx, shuttingDown)
	if err != nil {
		return err
	}
	srv := newHTTPServer(router.Routes(), s.ln, s.logger)
	srv.RegisterOnShutdown(func() { close(shuttingDown) })
	if err := s.startPprof(); err != nil {
		return err
	}
	if s.fileLimit > 0 && uint64(s.cfg.MaxConnections) > s.fileLimit {
		s.logger.Warn("ARBITER_MAX_CONNECTIONS is above the open file limit; connections past the limit will fail to be accepted",
			"max_connections", s.cfg.MaxConnections, "open_file_limit", s.fileLimit)
	}
	s.logger.Info("listening", "addr", s.ln.Addr().String(), "store", s.store.Dialect(), "worker", s.worker,
		"max_connections", s.cfg.MaxConnections, "max_connections_per_ip", min(s.cfg.MaxConnectionsPerIP, s.cfg.MaxConnections),
		"open_file_limit", s.fileLimit)

	served := make(chan error, 1)
	go func() { served <- srv.Serve(s.ln) }()
	// The connections answered from the parking lot come back through its
	// listener.
	parked := router.Parking
	go func() { _ = srv.Serve(parked.Listener()) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}

	s.drain()
	s.logger.Info("shutting down", "grace", s.cfg.ShutdownGrace)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownGrace)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	// Parked waiters are answered as the others: at once, and closed.
	parked.Wait(shutdownCtx)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// drain goes on serving for ARBITER_DRAIN_DELAY after the stop signal,
// /readyz answering 503 all the while (Ready), so that a load balancer
// stops sending requests before the listener closes.
func (s *server) drain() {
	if s.cfg.DrainDelay <= 0 {
		return
	}
	s.logger.Info("draining", "delay", s.cfg.DrainDelay)
	timer := time.NewTimer(s.cfg.DrainDelay)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-s.endDrain:
	}
}

// router returns the routes' configuration: the store's services, the
// key checker (whose flusher runs in the background), the metrics, and
// what signing in needs.
func (s *server) router(ctx context.Context, shuttingDown <-chan struct{}) (*web.Router, error) {
	keys := web.NewKeyChecker(s.store, nil)
	// Every limit stated per client, key, account or workspace holds
	// across the deployment's processes on Postgres (internal/limits).
	keys.CountFailuresIn(s.store.Limits())
	created := s.notify
	if s.metrics != nil {
		keys.Observe = s.metrics.KeyChecked
		created = func(n int) {
			s.metrics.TasksCreated(n)
			s.notify(n)
		}
	}
	s.loops.Go(func() {
		keys.Run(s.background, func(err error) { s.logger.Error("refresh or flush API keys", "error", err.Error()) })
	})
	store := s.store
	router := &web.Router{
		Services: web.Services{
			Tasks: store, Keys: store, Demo: store, Health: store, Ready: s, Queue: store, Watcher: store,
			Accounts: store, Logins: store, Identities: store, Audit: store, Members: store, Reservations: store, Stats: store, Webhooks: store,
			Calibration: store, Policies: store, Slack: store, DecisionLinks: store, ChatLinks: store, Agreement: store,
			Receipts: store, AuditExport: store, Executions: store,
		},
		KeyChecker:     keys,
		Logger:         s.logger,
		TaskCreated:    created,
		ShuttingDown:   shuttingDown,
		Parking:        web.NewParkingLot(shuttingDown, s.logger),
		Waiters:        limits.Waiters(store.Limits(), s.cfg.MaxWaitersPerKey, s.cfg.MaxWaitersPerAccount),
		TrustedProxies: s.cfg.TrustedProxies,
		Tracing:        s.tracing,
		Limits:         store.Limits(),

		WebhookAllowPrivate: s.cfg.WebhookAllowPrivate,
	}
	if s.metrics != nil {
		router.Metrics = s.metrics
	}
	// Slack: the settings page, the interactions of apps in HTTP mode, and
	// a socket per account in Socket Mode; interactions in flight finish
	// before the store closes.
	review := cmp.Or(s.cfg.ReviewURL, config.DefaultOrigin)
	interactions := &slack.Interactions{Store: store, Slack: s.slack, Logger: s.logger,
		LinkURL: func(token string) string { return review + "/review/chat-links/" + token }}
	router.SlackTeams, router.SlackSealed = s.slack, s.cfg.SecretKey != nil
	if s.cfg.SecretKey != nil {
		router.Slack = interactions
		socket := &slack.SocketMode{Store: store, Slack: s.slack, In: interactions, Logger: s.logger}
		s.loops.Go(func() { socket.Run(ctx) })
	}
	s.closers = append(s.closers, func() error { interactions.Wait(); return nil })
	// Teams: the settings page, and the bots' messaging endpoint.
	router.Services.Teams, router.TeamsCredentials, router.TeamsSealed = store, s.teams.Tokens, s.cfg.SecretKey != nil
	if s.cfg.SecretKey != nil {
		verifier := &teams.Verifier{MetadataURL: s.cfg.TeamsOpenIDURL}
		router.TeamsVerifier = verifier
		router.Teams = &teams.Bot{Store: store, Connector: s.teams, Logger: s.logger,
			DeskURL: func(id string) string { return review + "/review/tasks/" + id },
			LinkURL: func(token string) string { return review + "/review/chat-links/" + token }}
		s.closers = append(s.closers, func() error { verifier.Close(); return nil })
	}
	if err := s.configureBacktests(ctx, router); err != nil {
		return nil, err
	}
	if err := router.ConfigureSignIn(ctx, s.cfg, store, s.mailer); err != nil {
		return nil, err
	}
	return router, nil
}

// configureBacktests lets the calibration page's owners backtest the
// verifiers of the verifiers file (ARBITER_VERIFIERS): the worker's
// verifiers when this process runs one, built otherwise. The runs stop
// when ctx ends (what they asked is stored), before the store closes.
// Without a file the page offers no backtest.
func (s *server) configureBacktests(ctx context.Context, router *web.Router) error {
	router.Services.Backtests = s.store
	if s.cfg.Verifiers == "" {
		return nil
	}
	verifiers := s.agentVerifiers
	if verifiers == nil {
		var err error
		if verifiers, err = s.verifiers(); err != nil {
			return err
		}
	}
	b := agent.NewBacktester(ctx, verifiers, s.store, cmp.Or(s.cfg.AgentTimeout, config.DefaultAgentTimeout), s.logger)
	router.Backtester = b
	s.closers = append(s.closers, func() error { b.Wait(); return nil })
	return nil
}

// startPprof, when ARBITER_PPROF_ADDR is set, serves the profiler on its
// own listener, apart from the public router.
func (s *server) startPprof() error {
	if s.cfg.PprofAddr == "" {
		return nil
	}
	ln, err := listenAside("profiler", s.cfg.PprofAddr, s.logger)
	if err != nil {
		return err
	}
	s.closers = append(s.closers, servePprof(ln, s.logger).Close)
	return nil
}

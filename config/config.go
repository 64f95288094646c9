// Package config is the configuration of a server process: every setting
// declared once in Settings, with its environment variable, default, scope
// and help, read by FromEnv and listed by `arbiter COMMAND --help`. It
// imports none of the packages it configures (the store, the worker, the
// verifier backends, the HTTP server): cmd/arbiter reads a Config and hands
// each its part, so a command that only opens the store links no more.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/secretbox"
)

// Config is the whole configuration of a server process, built once from the
// environment in cmd/arbiter and passed down. Flags override the environment.
type Config struct {
	// Addr is the listen address of the HTTP server (ARBITER_ADDR).
	Addr string
	// DatabaseURL selects the store (ARBITER_DATABASE_URL, then DATABASE_URL).
	DatabaseURL string
	// DatabaseListenURL is a direct connection to Postgres for LISTEN and
	// the migration lock (ARBITER_DATABASE_LISTEN_URL; empty means
	// DatabaseURL); needed behind a transaction pooler.
	DatabaseListenURL string
	// DatabaseReadURL is a Postgres read replica for the heavy reads that
	// may lag (ARBITER_DATABASE_READ_URL; empty means they read the
	// primary): calibration, agreement, stats, task lists, the audit log.
	DatabaseReadURL string
	// DatabaseTransactionPooler says DatabaseURL reaches Postgres through
	// a pooler in transaction mode (ARBITER_DATABASE_POOLER=transaction):
	// no statement is prepared on the server.
	DatabaseTransactionPooler bool
	// DatabaseMaxConns bounds the store's connection pool
	// (ARBITER_DATABASE_MAX_CONNS; 0 means the store's default).
	DatabaseMaxConns int
	// DatabaseTimeout bounds each call to the store, waits for locks and
	// for a connection included (ARBITER_DB_TIMEOUT); a call that runs out
	// is answered 503.
	DatabaseTimeout time.Duration
	// MigrateAtStart applies the store's migrations when a process starts
	// (ARBITER_MIGRATE=auto, the default); off (ARBITER_MIGRATE=off), a
	// process only checks the schema, and refuses to start on one older
	// than it needs: `arbiter migrate` is then a deploy step of its own.
	MigrateAtStart bool
	// SecretKey seals the secrets the store keeps (webhook secrets, Slack
	// tokens) at rest (ARBITER_SECRET_KEY: base64 32-byte keys, comma
	// separated, the sealing key first); nil without one.
	SecretKey *secretbox.Keyring
	// DailyTaskCap is the default per-account daily task cap
	// (ARBITER_DAILY_TASK_CAP).
	DailyTaskCap int
	// Workers is the number of concurrent verifier calls (ARBITER_WORKERS).
	Workers int
	// DrainDelay is how long serve goes on answering after a stop signal,
	// /readyz answering 503, before it stops taking connections
	// (ARBITER_DRAIN_DELAY), so that a load balancer sees it leave first.
	DrainDelay time.Duration
	// ShutdownGrace bounds how long in-flight requests and verifier calls
	// may finish after a stop signal (ARBITER_SHUTDOWN_GRACE).
	ShutdownGrace time.Duration
	// LogLevel is debug, info, warn or error (ARBITER_LOG_LEVEL).
	LogLevel string
	// MetricsAddr, when set, serves Prometheus metrics at /metrics on
	// this separate address (ARBITER_METRICS_ADDR), for serve and worker
	// alike. Keep it off public networks.
	MetricsAddr string
	// PprofAddr, when set, serves /debug/pprof on this separate address
	// (ARBITER_PPROF_ADDR). Keep it on loopback: it is never public.
	PprofAddr string
	// MaxConnections caps the HTTP connections open at once
	// (ARBITER_MAX_CONNECTIONS); past it, a new connection closes the one
	// idle in keep-alive the longest, or, when none is idle, ends the
	// longest wait of the API key with the most requests waiting for a
	// task, or else is answered 429 and closed.
	MaxConnections int
	// MaxWaitersPerKey and MaxWaitersPerAccount cap the requests waiting
	// for a task (GET /v1/tasks/{id}?wait=N) of one API key and of one
	// account at once (ARBITER_MAX_WAITERS_PER_KEY,
	// ARBITER_MAX_WAITERS_PER_ACCOUNT); past them, a wait is answered 429.
	MaxWaitersPerKey, MaxWaitersPerAccount int
	// MaxConnectionsPerIP caps the HTTP connections one client address
	// holds at once (ARBITER_MAX_CONNECTIONS_PER_IP; an IPv6 client by its
	// /64, a trusted proxy not at all); past it, a new connection replaces
	// the client's longest-idle one, or is answered 429 and closed.
	MaxConnectionsPerIP int
	// IdempotencyTTL is how long an idempotency key is remembered after
	// its first use (ARBITER_IDEMPOTENCY_TTL); the worker forgets it after.
	IdempotencyTTL time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed (ARBITER_TRUSTED_PROXIES, comma-separated CIDRs; default
	// none): behind one, the client is the right-most address of
	// X-Forwarded-For that is not a trusted proxy.
	TrustedProxies []netip.Prefix
	// Agent selects the verifier backend (ARBITER_AGENT and
	// ARBITER_AGENT_*).
	Agent Agent
	// AgentTimeout bounds one verifier call (ARBITER_AGENT_TIMEOUT); the
	// worker applies it, the call's one time limit.
	AgentTimeout time.Duration
	// Verifiers is the verifiers file (ARBITER_VERIFIERS): named
	// verifiers and the default cascade. When set, the ARBITER_AGENT_*
	// settings are not read for the verifier.
	Verifiers string
	// AgentVersion is the verifier version label the worker records on
	// each agent attempt (ARBITER_AGENT_VERSION), so that the calibration
	// report starts a new series when the prompt or model changes.
	AgentVersion string
	// WebhookAllowPrivate lets webhook URLs be http:// and reach loopback,
	// private and link-local addresses (ARBITER_WEBHOOK_ALLOW_PRIVATE),
	// for development and tests.
	WebhookAllowPrivate bool
	// SlackAPIURL is Slack's Web API (ARBITER_SLACK_API_URL; default
	// https://slack.com/api/), to reach it through a proxy, or a fake in
	// tests.
	SlackAPIURL string
	// TeamsOpenIDURL is the Bot Framework's OpenID metadata, whose keys
	// sign the activities Teams posts (ARBITER_TEAMS_OPENID_URL), and
	// TeamsLoginURL the token service's root the bots' tokens come from
	// (ARBITER_TEAMS_LOGIN_URL): Microsoft's by default, a fake in tests.
	TeamsOpenIDURL, TeamsLoginURL string

	// BaseURL, AppURL and ReviewURL are the origins of the API, the account
	// dashboard and the reviewer site (ARBITER_BASE_URL, ARBITER_APP_URL,
	// ARBITER_REVIEW_URL), without a trailing slash. When they name
	// different hosts, requests are dispatched by host. Left unset, they
	// are "" until DeriveOrigins fills them from the listen address.
	BaseURL, AppURL, ReviewURL string
	// EmailAllowDotless lets sign-in and invitations use addresses at a
	// domain without a dot, such as you@localhost
	// (ARBITER_EMAIL_ALLOW_DOTLESS), for development; domain literals such
	// as x@[10.0.0.5] are refused whatever it says.
	EmailAllowDotless bool
	// SessionIdleTimeout ends a session unused for that long
	// (ARBITER_SESSION_IDLE_TIMEOUT; default arbiter.DefaultSessionIdle).
	SessionIdleTimeout time.Duration
	// CookieDomain, when set, is the Domain of the session cookie, so one
	// sign-in covers the dashboard and the reviewer site on sibling hosts
	// (ARBITER_COOKIE_DOMAIN).
	CookieDomain string
	// SessionSecret signs and encrypts session cookies
	// (ARBITER_SESSION_SECRET); when empty, a secret generated once and kept
	// in the store is used.
	SessionSecret string
	// SMTPURL is the mail server for sign-in links and webhook notices
	// (ARBITER_SMTP_URL); empty means they are written to the log. MailFrom is their
	// sender (ARBITER_MAIL_FROM).
	SMTPURL, MailFrom string
	// GitHub, Google and OIDC are the sign-in providers; each is offered
	// only when its client id and secret are set (ARBITER_GITHUB_CLIENT_ID,
	// ARBITER_GITHUB_CLIENT_SECRET, ARBITER_GOOGLE_CLIENT_ID, …,
	// ARBITER_OIDC_ISSUER).
	GitHub, Google, OIDC OAuthClient
}

// Agent selects and configures the verifier backend; cmd/arbiter hands it
// to agent.New as an agent.Config, whose fields it mirrors.
type Agent struct {
	Backend   string // ARBITER_AGENT: none (default), openai or rules
	BaseURL   string // ARBITER_AGENT_BASE_URL, e.g. http://127.0.0.1:11434/v1
	APIKey    string // ARBITER_AGENT_API_KEY, sent as a bearer token when set
	Model     string // ARBITER_AGENT_MODEL
	RulesFile string // ARBITER_AGENT_RULES
	// MaxRPS, when above zero, is the most calls a second a model backend
	// makes (ARBITER_AGENT_MAX_RPS): on Postgres, from every worker
	// process of the deployment together.
	MaxRPS float64
}

// OAuthClient is the registration of Arbiter with one identity provider.
type OAuthClient struct {
	ClientID, ClientSecret string
	// Issuer is the OpenID Connect issuer URL; its discovery document is
	// read at Issuer + "/.well-known/openid-configuration".
	Issuer string
}

// Configured reports whether the client id and secret are both set.
func (c OAuthClient) Configured() bool { return c.ClientID != "" && c.ClientSecret != "" }

// Default configuration values. Those of the store, the worker and the
// verifier are the defaults those packages apply themselves to a zero
// value (db.DefaultURL, db.DefaultTimeout, worker.DefaultConcurrency,
// worker.DefaultAttemptTimeout, worker.DefaultGrace, agent.BackendNone),
// repeated here so that reading the settings links none of them; a test
// keeps the two equal.
const (
	DefaultDatabaseURL     = "sqlite:arbiter.db"
	DefaultDatabaseTimeout = 5 * time.Second
	DefaultWorkers         = 8
	DefaultAgentTimeout    = 30 * time.Second
	DefaultShutdownGrace   = 10 * time.Second
	DefaultAgentBackend    = "none"

	DefaultAddr           = ":8080"
	DefaultOrigin         = "http://localhost:8080"
	DefaultMaxConnections = 4096
	// DefaultMaxConnectionsPerIP is a sixteenth of DefaultMaxConnections:
	// it takes sixteen addresses to fill the server, and it leaves room
	// for what one address needs honestly (a browser opens at most six
	// connections to a host, an SDK's pool tens, a backend some hundreds
	// of long-polls).
	DefaultMaxConnectionsPerIP = 256
)

// Scope names the part of the program that reads a setting, and so the
// commands whose help lists it.
type Scope int

// The scopes, in the order help lists them.
const (
	// ScopeStore settings are read by every command that opens the store.
	ScopeStore Scope = iota
	// ScopeWorker settings are read by the long-running processes, serve
	// and worker: the verifier, logging and shutdown.
	ScopeWorker
	// ScopeHTTP settings are read by the HTTP server alone (serve).
	ScopeHTTP
)

// Title names the scope in help.
func (s Scope) Title() string {
	switch s {
	case ScopeStore:
		return "Store"
	case ScopeWorker:
		return "Worker, logging and shutdown"
	case ScopeHTTP:
		return "HTTP server, sign-in and mail"
	}
	return fmt.Sprintf("Scope(%d)", int(s))
}

// A Setting is one value of Config read from the environment. Each is
// declared once, in Settings, with its variable, default and help:
// FromEnv reads it from there and `arbiter COMMAND --help` prints it
// from there, so the two cannot drift apart.
type Setting struct {
	// Env is the environment variable, e.g. ARBITER_ADDR.
	Env string
	// Fallback, when set, is a variable read when Env is unset.
	Fallback string
	// Default is the value used when the variable is unset, written as it
	// would be in the environment; empty means the field's zero value.
	Default string
	// Help says in a few words what the setting does; help prints it with
	// the variable and the default.
	Help string
	// Flag, when set, is the name of the command-line flag that overrides
	// the variable (without dashes).
	Flag string
	// Scope is the part of the program that reads the setting.
	Scope Scope
	// Secret hides the value from error messages.
	Secret bool
	// Set parses a non-empty value into c. Its error completes a sentence
	// that starts with the variable's or the flag's name, e.g. "must be a
	// whole number of at least 1".
	Set func(c *Config, value string) error
}

// Settings are every setting of a server process, in the order help lists
// them within their scope. To add one, add its Config field and an entry
// here (the stringSetting, intSetting, durationSetting and originSetting
// helpers cover most), and a row in the server table of docs/configuration.md; a test
// checks that every variable read is listed here and there.
var Settings = []Setting{
	{Env: "ARBITER_DATABASE_URL", Fallback: "DATABASE_URL", Default: DefaultDatabaseURL, Scope: ScopeStore,
		Help: "the store: postgres://… for Postgres, sqlite:PATH for SQLite",
		Set:  stringSetting(func(c *Config) *string { return &c.DatabaseURL })},
	{Env: "ARBITER_DATABASE_LISTEN_URL", Scope: ScopeStore,
		Help: "a direct postgres://… connection for LISTEN and migrations, bypassing a pooler (unset: the store's URL)",
		Set:  stringSetting(func(c *Config) *string { return &c.DatabaseListenURL })},
	{Env: "ARBITER_DATABASE_READ_URL", Scope: ScopeStore,
		Help: "a postgres://… read replica (a streaming standby) for calibration, agreement, stats, task lists and the audit log, which may lag it by its replication lag (unset: the primary)",
		Set: func(c *Config, v string) error {
			if !strings.HasPrefix(v, "postgres://") && !strings.HasPrefix(v, "postgresql://") {
				return errors.New("must be a postgres:// URL of a read replica")
			}
			c.DatabaseReadURL = v
			return nil
		}},
	{Env: "ARBITER_DATABASE_POOLER", Default: "none", Scope: ScopeStore,
		Help: "transaction: the store's URL goes through a pooler in transaction mode (PgBouncer); statements are not prepared on the server, and ARBITER_DATABASE_LISTEN_URL is required",
		Set: func(c *Config, v string) error {
			switch v {
			case "none":
				c.DatabaseTransactionPooler = false
			case "transaction":
				c.DatabaseTransactionPooler = true
			default:
				return errors.New("must be none or transaction")
			}
			return nil
		}},
	{Env: "ARBITER_DATABASE_MAX_CONNS", Scope: ScopeStore,
		Help: "the store's connection pool (unset: the store's default, 8)",
		Set:  intSetting(func(c *Config) *int { return &c.DatabaseMaxConns }, 0)},
	{Env: "ARBITER_DB_TIMEOUT", Default: DefaultDatabaseTimeout.String(), Scope: ScopeStore,
		Help: "the limit on one call to the store, lock and pool waits included; past it, 503",
		Set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 10*time.Millisecond {
				return errors.New("must be a duration of at least 10ms, such as 5s")
			}
			c.DatabaseTimeout = d
			return nil
		}},
	{Env: "ARBITER_MIGRATE", Default: "auto", Scope: ScopeStore,
		Help: "auto: apply the store's migrations at start; off: only check the schema and refuse an older one (run `arbiter migrate` as a deploy step)",
		Set: func(c *Config, v string) error {
			switch v {
			case "auto":
				c.MigrateAtStart = true
			case "off":
				c.MigrateAtStart = false
			default:
				return errors.New("must be auto or off")
			}
			return nil
		}},
	{Env: "ARBITER_SECRET_KEY", Scope: ScopeStore, Secret: true,
		Help: "base64 32-byte keys, comma-separated, that seal stored secrets (first seals, all open); needed for Slack",
		Set: func(c *Config, v string) error {
			k, err := secretbox.Parse(v)
			if err != nil {
				return errors.New(err.Error() + "; generate one with: openssl rand -base64 32")
			}
			c.SecretKey = k
			return nil
		}},
	{Env: "ARBITER_DAILY_TASK_CAP", Default: strconv.Itoa(arbiter.DefaultDailyTaskCap), Scope: ScopeStore,
		Help: "tasks an account may create per UTC day, unless it has its own cap",
		Set: func(c *Config, v string) error {
			// 0 is for an account's own cap only: here it would mean the
			// store's default.
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || arbiter.CheckDailyCap(n) != nil {
				return fmt.Errorf("must be a whole number from 1 to %d", arbiter.MaxDailyTaskCap)
			}
			c.DailyTaskCap = n
			return nil
		}},

	{Env: "ARBITER_WORKERS", Default: strconv.Itoa(DefaultWorkers), Scope: ScopeWorker,
		Help: "concurrent verifier calls per worker process",
		Set:  intSetting(func(c *Config) *int { return &c.Workers }, 1)},
	{Env: "ARBITER_AGENT", Default: DefaultAgentBackend, Scope: ScopeWorker,
		Help: "the verifier backend: none, openai, anthropic or rules",
		Set:  stringSetting(func(c *Config) *string { return &c.Agent.Backend })},
	{Env: "ARBITER_VERIFIERS", Scope: ScopeWorker,
		Help: "a verifiers file (YAML): named verifiers and the cascade a task's claims ask them in; replaces ARBITER_AGENT and ARBITER_AGENT_* but the timeout and version",
		Set:  stringSetting(func(c *Config) *string { return &c.Verifiers })},
	{Env: "ARBITER_AGENT_BASE_URL", Scope: ScopeWorker,
		Help: "openai: the model server's API root, e.g. https://api.openai.com/v1",
		Set:  stringSetting(func(c *Config) *string { return &c.Agent.BaseURL })},
	{Env: "ARBITER_AGENT_API_KEY", Scope: ScopeWorker, Secret: true,
		Help: "openai: sent as Authorization: Bearer … when set",
		Set:  stringSetting(func(c *Config) *string { return &c.Agent.APIKey })},
	{Env: "ARBITER_AGENT_MODEL", Scope: ScopeWorker,
		Help: "openai: the model name",
		Set:  stringSetting(func(c *Config) *string { return &c.Agent.Model })},
	{Env: "ARBITER_AGENT_VERSION", Scope: ScopeWorker,
		Help: "a label of the verifier's version (prompt, model), recorded on each agent attempt; the calibration report splits by it",
		Set: func(c *Config, v string) error {
			if utf8.RuneCountInString(v) > arbiter.MaxLabelChars || !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
				return fmt.Errorf("must be valid text of at most %d characters", arbiter.MaxLabelChars)
			}
			c.AgentVersion = v
			return nil
		}},
	{Env: "ARBITER_AGENT_TIMEOUT", Default: DefaultAgentTimeout.String(), Scope: ScopeWorker,
		Help: "the limit on one verifier call",
		Set:  durationSetting(func(c *Config) *time.Duration { return &c.AgentTimeout })},
	{Env: "ARBITER_AGENT_MAX_RPS", Scope: ScopeWorker,
		Help: "openai, anthropic: the most calls a second (e.g. 5 or 0.5), on Postgres from every worker process together; unset, as many as the workers make, slowed only while the provider throttles",
		Set: func(c *Config, v string) error {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || !(n > 0) || math.IsInf(n, 0) {
				return errors.New("must be a number of calls a second above 0, e.g. 5 or 0.5")
			}
			c.Agent.MaxRPS = n
			return nil
		}},
	{Env: "ARBITER_AGENT_RULES", Scope: ScopeWorker,
		Help: "rules: the rules file",
		Set:  stringSetting(func(c *Config) *string { return &c.Agent.RulesFile })},
	{Env: "ARBITER_SHUTDOWN_GRACE", Default: DefaultShutdownGrace.String(), Scope: ScopeWorker,
		Help: "how long requests and verifier calls in flight may finish after SIGTERM",
		Set:  durationSetting(func(c *Config) *time.Duration { return &c.ShutdownGrace })},
	{Env: "ARBITER_SLACK_API_URL", Default: "https://slack.com/api/", Scope: ScopeWorker,
		Help: "Slack's Web API, which Slack messages and Socket Mode go through",
		Set:  urlSetting(func(c *Config) *string { return &c.SlackAPIURL })},
	{Env: "ARBITER_TEAMS_OPENID_URL", Default: "https://login.botframework.com/v1/.well-known/openidconfiguration", Scope: ScopeWorker,
		Help: "the Bot Framework's OpenID metadata, whose keys sign what Teams posts to the bots",
		Set:  urlSetting(func(c *Config) *string { return &c.TeamsOpenIDURL })},
	{Env: "ARBITER_TEAMS_LOGIN_URL", Default: "https://login.microsoftonline.com", Scope: ScopeWorker,
		Help: "Microsoft's token service, which gives the Teams bots their access tokens",
		Set:  urlSetting(func(c *Config) *string { return &c.TeamsLoginURL })},
	{Env: "ARBITER_WEBHOOK_ALLOW_PRIVATE", Default: "0", Scope: ScopeWorker,
		Help: "1 lets webhooks reach http:// URLs and loopback, private and link-local addresses: for development and tests only",
		Set: func(c *Config, v string) error {
			switch v {
			case "0", "false":
				c.WebhookAllowPrivate = false
			case "1", "true":
				c.WebhookAllowPrivate = true
			default:
				return errors.New("must be 1 or 0")
			}
			return nil
		}},
	{Env: "ARBITER_SMTP_URL", Scope: ScopeWorker, Secret: true,
		Help: "smtp://user:password@host:587 for sign-in links and webhook notices (unset: they go to the log)",
		Set:  stringSetting(func(c *Config) *string { return &c.SMTPURL })},
	{Env: "ARBITER_MAIL_FROM", Scope: ScopeWorker,
		Help: "the sender of that mail",
		Set:  stringSetting(func(c *Config) *string { return &c.MailFrom })},
	{Env: "ARBITER_REVIEW_URL", Scope: ScopeWorker,
		Help: "the reviewer site's origin; reviewers' digests link there (unset: serve uses http://localhost and the port it listens on; a worker sends no digests)",
		Set:  originSetting(func(c *Config) *string { return &c.ReviewURL })},
	{Env: "ARBITER_LOG_LEVEL", Default: "info", Scope: ScopeWorker,
		Help: "debug, info, warn or error; logs go to stderr",
		Set: func(c *Config, v string) error {
			var l slog.Level
			if err := l.UnmarshalText([]byte(v)); err != nil {
				return errors.New("must be debug, info, warn or error")
			}
			c.LogLevel = v
			return nil
		}},

	{Env: "ARBITER_ADDR", Flag: "addr", Default: DefaultAddr, Scope: ScopeHTTP,
		Help: "listen address",
		Set:  stringSetting(func(c *Config) *string { return &c.Addr })},
	{Env: "ARBITER_DRAIN_DELAY", Default: "0s", Scope: ScopeHTTP,
		Help: "how long serve goes on answering after SIGTERM, /readyz not ready, before it stops taking connections; behind a load balancer, a few of its health-check periods",
		Set:  durationSetting(func(c *Config) *time.Duration { return &c.DrainDelay })},
	{Env: "ARBITER_METRICS_ADDR", Flag: "metrics-addr", Scope: ScopeWorker,
		Help: "serve Prometheus metrics at /metrics on this separate address; never a public one",
		Set:  stringSetting(func(c *Config) *string { return &c.MetricsAddr })},
	{Env: "ARBITER_PPROF_ADDR", Flag: "pprof-addr", Scope: ScopeHTTP,
		Help: "serve /debug/pprof on this separate address; never a public one",
		Set:  stringSetting(func(c *Config) *string { return &c.PprofAddr })},
	{Env: "ARBITER_MAX_CONNECTIONS", Default: strconv.Itoa(DefaultMaxConnections), Scope: ScopeHTTP,
		Help: "HTTP connections open at once; past it, the longest-idle one closes, or the longest wait of the key with the most waiting ends, or else 429",
		Set:  intSetting(func(c *Config) *int { return &c.MaxConnections }, 1)},
	{Env: "ARBITER_MAX_WAITERS_PER_KEY", Default: strconv.Itoa(arbiter.DefaultMaxWaitersPerKey), Scope: ScopeHTTP,
		Help: "requests of one API key waiting for a task (GET /v1/tasks/{id}?wait=N) at once; past it, 429",
		Set:  intSetting(func(c *Config) *int { return &c.MaxWaitersPerKey }, 1)},
	{Env: "ARBITER_MAX_WAITERS_PER_ACCOUNT", Default: strconv.Itoa(arbiter.DefaultMaxWaitersPerAccount), Scope: ScopeHTTP,
		Help: "requests of one account waiting for a task at once, all its keys together; past it, 429",
		Set:  intSetting(func(c *Config) *int { return &c.MaxWaitersPerAccount }, 1)},
	{Env: "ARBITER_MAX_CONNECTIONS_PER_IP", Default: strconv.Itoa(DefaultMaxConnectionsPerIP), Scope: ScopeHTTP,
		Help: "HTTP connections one client address may hold (IPv6: a /64; trusted proxies: no limit); past it, 429",
		Set:  intSetting(func(c *Config) *int { return &c.MaxConnectionsPerIP }, 1)},
	{Env: "ARBITER_IDEMPOTENCY_TTL", Default: "24h", Scope: ScopeHTTP,
		Help: "how long an Idempotency-Key is remembered after its first use (at least 1s)",
		Set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Second {
				return errors.New("must be a duration of at least 1s, such as 24h")
			}
			c.IdempotencyTTL = d
			return nil
		}},
	{Env: "ARBITER_TRUSTED_PROXIES", Scope: ScopeHTTP,
		Help: "comma-separated networks of reverse proxies whose X-Forwarded-For names the client",
		Set: func(c *Config, v string) error {
			nets, err := ParseTrustedProxies(v)
			if err != nil {
				return fmt.Errorf("must be comma-separated networks such as 10.0.0.0/8 or addresses such as 192.168.1.5; %w", err)
			}
			c.TrustedProxies = nets
			return nil
		}},
	{Env: "ARBITER_BASE_URL", Scope: ScopeHTTP,
		Help: "the API's origin (/v1, /demo, /healthz) (unset: http://localhost:PORT, PORT from ARBITER_ADDR)",
		Set:  originSetting(func(c *Config) *string { return &c.BaseURL })},
	{Env: "ARBITER_APP_URL", Scope: ScopeHTTP,
		Help: "the dashboard's origin; sign-in links and OAuth callbacks point here (unset: http://localhost:PORT, PORT from ARBITER_ADDR)",
		Set:  originSetting(func(c *Config) *string { return &c.AppURL })},
	{Env: "ARBITER_COOKIE_DOMAIN", Scope: ScopeHTTP,
		Help: "the session cookie's Domain, to share a sign-in between sibling hosts",
		Set:  stringSetting(func(c *Config) *string { return &c.CookieDomain })},
	{Env: "ARBITER_SESSION_SECRET", Scope: ScopeHTTP, Secret: true,
		Help: "32 or more characters that sign session cookies (unset: generated and stored)",
		Set: func(c *Config, v string) error {
			if len(v) < 32 {
				return errors.New("must be at least 32 characters; leave it unset to have one generated and stored")
			}
			c.SessionSecret = v
			return nil
		}},
	{Env: "ARBITER_SESSION_IDLE_TIMEOUT", Default: "336h", Scope: ScopeHTTP,
		Help: "a session unused for this long is ended (at least 1m; sessions last 30 days at most)",
		Set: func(c *Config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < time.Minute {
				return errors.New("must be a duration of at least 1m, such as 336h (14 days)")
			}
			c.SessionIdleTimeout = d
			return nil
		}},
	{Env: "ARBITER_EMAIL_ALLOW_DOTLESS", Default: "0", Scope: ScopeHTTP,
		Help: "1 lets sign-in and invitations use addresses such as you@localhost: for development only",
		Set:  boolSetting(func(c *Config) *bool { return &c.EmailAllowDotless })},
	{Env: "ARBITER_GITHUB_CLIENT_ID", Scope: ScopeHTTP,
		Help: "a GitHub OAuth app's client id",
		Set:  stringSetting(func(c *Config) *string { return &c.GitHub.ClientID })},
	{Env: "ARBITER_GITHUB_CLIENT_SECRET", Scope: ScopeHTTP, Secret: true,
		Help: "its client secret",
		Set:  stringSetting(func(c *Config) *string { return &c.GitHub.ClientSecret })},
	{Env: "ARBITER_GOOGLE_CLIENT_ID", Scope: ScopeHTTP,
		Help: "a Google OAuth client's id",
		Set:  stringSetting(func(c *Config) *string { return &c.Google.ClientID })},
	{Env: "ARBITER_GOOGLE_CLIENT_SECRET", Scope: ScopeHTTP, Secret: true,
		Help: "its client secret",
		Set:  stringSetting(func(c *Config) *string { return &c.Google.ClientSecret })},
	{Env: "ARBITER_OIDC_ISSUER", Scope: ScopeHTTP,
		Help: "an OpenID Connect issuer URL",
		Set: func(c *Config, v string) error {
			c.OIDC.Issuer = strings.TrimSuffix(v, "/")
			return nil
		}},
	{Env: "ARBITER_OIDC_CLIENT_ID", Scope: ScopeHTTP,
		Help: "the client id at that issuer",
		Set:  stringSetting(func(c *Config) *string { return &c.OIDC.ClientID })},
	{Env: "ARBITER_OIDC_CLIENT_SECRET", Scope: ScopeHTTP, Secret: true,
		Help: "its client secret",
		Set:  stringSetting(func(c *Config) *string { return &c.OIDC.ClientSecret })},
}

// FromEnv reads the settings of the given scopes (all of them when
// none is given) from getenv, applying defaults. A value that cannot be
// parsed is an error naming the variable.
func FromEnv(getenv func(string) string, scopes ...Scope) (Config, error) {
	var c Config
	for _, s := range Settings {
		if len(scopes) > 0 && !slices.Contains(scopes, s.Scope) {
			continue
		}
		name, v := s.Env, getenv(s.Env)
		if v == "" && s.Fallback != "" {
			name, v = s.Fallback, getenv(s.Fallback)
		}
		if v == "" {
			name, v = s.Env+"'s default", s.Default
		}
		if v == "" {
			continue
		}
		if err := s.Set(&c, v); err != nil {
			if s.Secret {
				return Config{}, fmt.Errorf("%s %v", name, err)
			}
			return Config{}, fmt.Errorf("%s %v, not %q", name, err, v)
		}
	}
	if c.OIDC.Configured() && c.OIDC.Issuer == "" {
		return Config{}, fmt.Errorf("ARBITER_OIDC_ISSUER must be set with ARBITER_OIDC_CLIENT_ID and ARBITER_OIDC_CLIENT_SECRET")
	}
	return c, nil
}

// stringSetting sets a string field to the value as it is.
func stringSetting(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		*field(c) = v
		return nil
	}
}

// urlSetting sets a string field to an http(s) URL with a host.
func urlSetting(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return errors.New("must be an http(s) URL such as https://example.com/path")
		}
		*field(c) = v
		return nil
	}
}

// intSetting sets an int field to a whole number of at least min.
func intSetting(field func(*Config) *int, min int) func(*Config, string) error {
	return func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return fmt.Errorf("must be a whole number of at least %d", min)
		}
		*field(c) = n
		return nil
	}
}

// boolSetting sets a bool field from 1 or true, and 0 or false.
func boolSetting(field func(*Config) *bool) func(*Config, string) error {
	return func(c *Config, v string) error {
		switch v {
		case "0", "false":
			*field(c) = false
		case "1", "true":
			*field(c) = true
		default:
			return errors.New("must be 1 or 0")
		}
		return nil
	}
}

// durationSetting sets a time.Duration field to a duration of at least 0.
func durationSetting(field func(*Config) *time.Duration) func(*Config, string) error {
	return func(c *Config, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return errors.New("must be a duration such as 10s or 1m")
		}
		*field(c) = d
		return nil
	}
}

// originSetting sets a string field to an origin such as
// https://app.example.com: a scheme, a host and nothing after them but an
// optional slash. The host is lowercased and the slash dropped.
func originSetting(field func(*Config) *string) func(*Config, string) error {
	return func(c *Config, v string) error {
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return errors.New("must be an origin such as https://app.example.com")
		}
		*field(c) = u.Scheme + "://" + strings.ToLower(u.Host)
		return nil
	}
}

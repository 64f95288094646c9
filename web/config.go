package web

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/agent"
)

// Config is the whole configuration of a server process, built once from the
// environment in cmd/arbiter and passed down. Flags override the environment.
type Config struct {
	// Addr is the listen address of the HTTP server (ARBITER_ADDR).
	Addr string
	// DatabaseURL selects the store (ARBITER_DATABASE_URL, then DATABASE_URL).
	DatabaseURL string
	// DatabaseMaxConns bounds the store's connection pool
	// (ARBITER_DATABASE_MAX_CONNS; 0 means the store's default).
	DatabaseMaxConns int
	// DailyTaskCap is the default per-account daily task cap
	// (ARBITER_DAILY_TASK_CAP).
	DailyTaskCap int
	// Workers is the number of concurrent verifier calls (ARBITER_WORKERS).
	Workers int
	// ShutdownGrace bounds how long in-flight requests and verifier calls
	// may finish after a stop signal (ARBITER_SHUTDOWN_GRACE).
	ShutdownGrace time.Duration
	// LogLevel is debug, info, warn or error (ARBITER_LOG_LEVEL).
	LogLevel string
	// PprofAddr, when set, serves /debug/pprof on this separate address
	// (ARBITER_PPROF_ADDR). Keep it on loopback: it is never public.
	PprofAddr string
	// Agent selects the verifier backend (ARBITER_AGENT and
	// ARBITER_AGENT_*).
	Agent agent.Config

	// BaseURL, AppURL and ReviewURL are the origins of the API, the account
	// dashboard and the reviewer site (ARBITER_BASE_URL, ARBITER_APP_URL,
	// ARBITER_REVIEW_URL), without a trailing slash. When they name
	// different hosts, requests are dispatched by host.
	BaseURL, AppURL, ReviewURL string
	// CookieDomain, when set, is the Domain of the session cookie, so one
	// sign-in covers the dashboard and the reviewer site on sibling hosts
	// (ARBITER_COOKIE_DOMAIN).
	CookieDomain string
	// SessionSecret signs and encrypts session cookies
	// (ARBITER_SESSION_SECRET); when empty, a secret generated once and kept
	// in the store is used.
	SessionSecret string
	// SMTPURL is the mail server for sign-in links (ARBITER_SMTP_URL);
	// empty means the links are written to the log. MailFrom is their
	// sender (ARBITER_MAIL_FROM).
	SMTPURL, MailFrom string
	// GitHub, Google and OIDC are the sign-in providers; each is offered
	// only when its client id and secret are set (ARBITER_GITHUB_CLIENT_ID,
	// ARBITER_GITHUB_CLIENT_SECRET, ARBITER_GOOGLE_CLIENT_ID, …,
	// ARBITER_OIDC_ISSUER).
	GitHub, Google, OIDC OAuthClient
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

// Default configuration values.
const (
	DefaultAddr          = ":8080"
	DefaultDailyTaskCap  = 1000
	DefaultWorkers       = 8
	DefaultShutdownGrace = 10 * time.Second
	DefaultOrigin        = "http://localhost:8080"
)

// ConfigFromEnv reads the configuration from getenv, applying defaults.
// A value that cannot be parsed is an error naming the variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Addr:        or(getenv("ARBITER_ADDR"), DefaultAddr),
		DatabaseURL: or(getenv("ARBITER_DATABASE_URL"), getenv("DATABASE_URL")),
		LogLevel:    or(getenv("ARBITER_LOG_LEVEL"), "info"),
		PprofAddr:   getenv("ARBITER_PPROF_ADDR"),
	}
	var err error
	if c.DailyTaskCap, err = envInt(getenv, "ARBITER_DAILY_TASK_CAP", DefaultDailyTaskCap, 0); err != nil {
		return Config{}, err
	}
	if c.DatabaseMaxConns, err = envInt(getenv, "ARBITER_DATABASE_MAX_CONNS", 0, 0); err != nil {
		return Config{}, err
	}
	if c.Workers, err = envInt(getenv, "ARBITER_WORKERS", DefaultWorkers, 1); err != nil {
		return Config{}, err
	}
	if c.ShutdownGrace, err = envDuration(getenv, "ARBITER_SHUTDOWN_GRACE", DefaultShutdownGrace); err != nil {
		return Config{}, err
	}
	c.Agent = agent.Config{
		Backend:   or(getenv("ARBITER_AGENT"), agent.BackendNone),
		BaseURL:   getenv("ARBITER_AGENT_BASE_URL"),
		APIKey:    getenv("ARBITER_AGENT_API_KEY"),
		Model:     getenv("ARBITER_AGENT_MODEL"),
		RulesFile: getenv("ARBITER_AGENT_RULES"),
	}
	if c.Agent.Timeout, err = envDuration(getenv, "ARBITER_AGENT_TIMEOUT", agent.DefaultTimeout); err != nil {
		return Config{}, err
	}
	for _, o := range []struct {
		dst  *string
		name string
	}{{&c.BaseURL, "ARBITER_BASE_URL"}, {&c.AppURL, "ARBITER_APP_URL"}, {&c.ReviewURL, "ARBITER_REVIEW_URL"}} {
		if *o.dst, err = envOrigin(getenv, o.name); err != nil {
			return Config{}, err
		}
	}
	c.CookieDomain = getenv("ARBITER_COOKIE_DOMAIN")
	c.SessionSecret = getenv("ARBITER_SESSION_SECRET")
	if c.SessionSecret != "" && len(c.SessionSecret) < 32 {
		return Config{}, fmt.Errorf("ARBITER_SESSION_SECRET must be at least 32 characters; leave it unset to have one generated and stored")
	}
	c.SMTPURL = getenv("ARBITER_SMTP_URL")
	c.MailFrom = getenv("ARBITER_MAIL_FROM")
	c.GitHub = OAuthClient{ClientID: getenv("ARBITER_GITHUB_CLIENT_ID"), ClientSecret: getenv("ARBITER_GITHUB_CLIENT_SECRET")}
	c.Google = OAuthClient{ClientID: getenv("ARBITER_GOOGLE_CLIENT_ID"), ClientSecret: getenv("ARBITER_GOOGLE_CLIENT_SECRET")}
	c.OIDC = OAuthClient{
		ClientID: getenv("ARBITER_OIDC_CLIENT_ID"), ClientSecret: getenv("ARBITER_OIDC_CLIENT_SECRET"),
		Issuer: strings.TrimSuffix(getenv("ARBITER_OIDC_ISSUER"), "/"),
	}
	if c.OIDC.Configured() && c.OIDC.Issuer == "" {
		return Config{}, fmt.Errorf("ARBITER_OIDC_ISSUER must be set with ARBITER_OIDC_CLIENT_ID and ARBITER_OIDC_CLIENT_SECRET")
	}
	return c, nil
}

// envOrigin reads an origin such as https://app.example.com: a scheme, a
// host and nothing after them but an optional slash.
func envOrigin(getenv func(string) string, name string) (string, error) {
	s := getenv(name)
	if s == "" {
		return DefaultOrigin, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("%s must be an origin such as https://app.example.com, not %q", name, s)
	}
	return u.Scheme + "://" + strings.ToLower(u.Host), nil
}

func or(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

func envInt(getenv func(string) string, name string, def, min int) (int, error) {
	s := getenv(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min {
		return 0, fmt.Errorf("%s must be a whole number of at least %d, not %q", name, min, s)
	}
	return n, nil
}

func envDuration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	s := getenv(name)
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s must be a duration such as 10s or 1m, not %q", name, s)
	}
	return d, nil
}

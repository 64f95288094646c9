package web

import (
	"fmt"
	"strconv"
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
}

// Default configuration values.
const (
	DefaultAddr          = ":8080"
	DefaultDailyTaskCap  = 1000
	DefaultWorkers       = 8
	DefaultShutdownGrace = 10 * time.Second
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
	return c, nil
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

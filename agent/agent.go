// Package agent holds the verifier backends of the agent tier, chosen by
// ARBITER_AGENT: none (every task goes to a human), openai (any
// OpenAI-compatible Chat Completions server) and rules (CEL expressions).
package agent

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter"
)

// Backend names.
const (
	BackendNone   = "none"
	BackendOpenAI = "openai"
	BackendRules  = "rules"
)

// DefaultTimeout bounds one call to a model server.
const DefaultTimeout = 30 * time.Second

// Config selects and configures a backend.
type Config struct {
	Backend   string        // ARBITER_AGENT: none (default), openai or rules
	BaseURL   string        // ARBITER_AGENT_BASE_URL, e.g. http://127.0.0.1:11434/v1
	APIKey    string        // ARBITER_AGENT_API_KEY, sent as a bearer token when set
	Model     string        // ARBITER_AGENT_MODEL
	Timeout   time.Duration // ARBITER_AGENT_TIMEOUT (default 30s)
	RulesFile string        // ARBITER_AGENT_RULES

	// HTTPClient is used by the openai backend (default: a new client).
	HTTPClient *http.Client
}

// New returns the configured backend. Bad configuration, including a rules
// file that does not compile, is an error at start.
func New(cfg Config) (arbiter.Verifier, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch cfg.Backend {
	case "", BackendNone:
		return None{}, nil
	case BackendOpenAI:
		return NewOpenAI(cfg)
	case BackendRules:
		if cfg.RulesFile == "" {
			return nil, fmt.Errorf("ARBITER_AGENT=rules needs ARBITER_AGENT_RULES, the rules file")
		}
		return LoadRules(cfg.RulesFile)
	}
	return nil, fmt.Errorf("ARBITER_AGENT must be none, openai or rules, not %q", cfg.Backend)
}

// None decides nothing, so every task goes to a human.
type None struct{}

// Verify declines.
func (None) Verify(context.Context, *arbiter.Task) (arbiter.Verification, error) {
	return arbiter.Verification{Model: BackendNone, Rationale: "No automated verifier is configured."}, nil
}

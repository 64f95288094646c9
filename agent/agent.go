// Package agent holds the verifier backends of the agent tier: none (every
// task goes to a human), openai (any OpenAI-compatible Chat Completions
// server), anthropic (Anthropic's Messages API) and rules (CEL expressions
// read from a file). Each implements arbiter.Verifier; New builds the one
// ARBITER_AGENT configures, and Build every verifier of a verifiers file
// (LoadVerifiers), at start, so bad configuration stops the process before
// it serves. A model backend's confidence source (confidence.go) says how
// many answers to ask for and how to combine them.
//
// # Confidence tempered by logprobs
//
// The openai backend's default source, logprobs, asks for token
// log-probabilities. When the server
// returns them, the log-probabilities of the tokens that spell the verdict
// value are summed and exponentiated, p = exp(Σ logprob), which is the
// model's own probability of having produced that verdict, and the
// confidence used is the smaller of p and the self-reported confidence. A
// model that claims 0.95 while its verdict tokens had probability 0.6 is
// taken at 0.6. When the server returns no logprobs, or its tokens cannot be
// lined up with the answer, the self-reported confidence stands.
//
// # Rules file
//
// The rules backend reads one rule per line; blank lines and lines starting
// with # are ignored. A rule is a verdict (a bare word, or a JSON string when
// it has spaces), a confidence between 0 and 1, and a boolean CEL expression,
// separated by spaces or tabs:
//
//	# verdict  confidence  expression
//	approve    0.95        task.task_type == "refund" && context.amount < 50
//	reject     0.9         context.customer.chargebacks > 2
//	"needs legal" 0.99     task.prompt.contains("lawsuit")
//
// Expressions see task (a map of prompt, task_type, touchpoint, source,
// allowed_verdicts and confidence_threshold) and context (the task's context
// JSON, null when absent), with CEL's standard functions. The first matching
// rule whose verdict the task allows decides; an expression that fails to
// evaluate (a missing field, say) or yields no bool does not match; when no
// rule matches, the task goes to a human. A rule that does not compile, is
// not boolean, has no verdict or has a confidence outside [0, 1] fails
// loading with the file and line.
package agent

import (
	"context"
	"fmt"
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// Backend names, the values of Config.Backend.
const (
	BackendNone      = arbiter.BackendNone
	BackendOpenAI    = arbiter.BackendOpenAI
	BackendAnthropic = arbiter.BackendAnthropic
	BackendRules     = arbiter.BackendRules
)

// Config selects and configures a backend. The comments name the
// environment variables config.Config reads them from, for the one
// verifier they configure; a verifiers file configures each of its
// verifiers the same way (Build).
type Config struct {
	Backend   string // ARBITER_AGENT: none (default), openai, anthropic or rules
	BaseURL   string // ARBITER_AGENT_BASE_URL, e.g. http://127.0.0.1:11434/v1
	APIKey    string // ARBITER_AGENT_API_KEY, sent as a bearer token (x-api-key to Anthropic) when set
	Model     string // ARBITER_AGENT_MODEL
	RulesFile string // ARBITER_AGENT_RULES
	// MaxRPS, when above zero, is the most calls a second a model backend
	// makes (ARBITER_AGENT_MAX_RPS): from this process with its own
	// Limiter, from every worker process with a SharedLimiter; the limiter
	// slows it further while the provider throttles.
	MaxRPS float64
	// Confidence is a model backend's confidence source; the zero value
	// is logprobs for openai (today's signal) and self for anthropic.
	Confidence arbiter.ConfidenceSpec
	// Limiter, when set, paces a model backend's requests instead of a
	// new Limiter at MaxRPS (one shared by several processes).
	Limiter RateLimiter

	// HTTPClient is used by the model backends (default: a new client).
	// A call's one time limit is its context's deadline, which the worker
	// sets from ARBITER_AGENT_TIMEOUT, not the client's timeout.
	HTTPClient *http.Client
}

// New returns the configured backend. Bad configuration, including a rules
// file that does not compile, is an error at start.
func New(cfg Config) (arbiter.Verifier, error) {
	switch cfg.Backend {
	case "", BackendNone:
		return None{}, nil
	case BackendOpenAI:
		return NewOpenAI(cfg)
	case BackendAnthropic:
		return NewAnthropic(cfg)
	case BackendRules:
		if cfg.RulesFile == "" {
			return nil, fmt.Errorf("ARBITER_AGENT=rules needs ARBITER_AGENT_RULES, the rules file")
		}
		return LoadRules(cfg.RulesFile)
	}
	return nil, fmt.Errorf("ARBITER_AGENT must be %s, %s, %s or %s, not %q", BackendNone, BackendOpenAI, BackendAnthropic, BackendRules, cfg.Backend)
}

// None decides nothing, so every task goes to a human.
type None struct{}

// InProcess reports that None answers in the process
// (worker.InProcessVerifier).
func (None) InProcess() bool { return true }

// Verify declines, saying so in the rationale of the attempt.
func (None) Verify(context.Context, *arbiter.Task) (arbiter.Verification, error) {
	return arbiter.Verification{Model: BackendNone, Rationale: "No automated verifier is configured."}, nil
}

package arbiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Verification is a verifier's answer on one task.
type Verification struct {
	// Decided is false when the verifier declines to answer (the none
	// backend, or no rule matched); the task then goes to a human.
	Decided    bool
	Verdict    string
	Confidence float64 // in [0, 1]
	Rationale  string
	Model      string // which backend or model answered, for the attempt record
	// Usage is the tokens the call's requests took (all of them, when the
	// confidence source asked for several answers); zero for a backend
	// that calls no model.
	Usage Usage
}

// Usage is the tokens a verifier call took.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens}
}

// Verifier is the agent tier: an automated verifier backend.
type Verifier interface {
	// Verify asks for a verdict on the task within ctx's deadline, the one
	// limit on the call. An error is a failed attempt that the worker
	// retries; a *VerifierError says why in words fit for API callers.
	Verify(ctx context.Context, t *Task) (Verification, error)
}

// Reasons a verifier call failed, as a failed attempt's error records them
// for API callers: short, and free of addresses, keys and the model
// server's own words, which go to the log with the full error.
const (
	VerifierUnreachable          = "the verifier could not be reached"
	VerifierTimedOut             = "the verifier timed out"
	VerifierUnreadable           = "the verifier's answer could not be read"
	VerifierRefused              = "the verifier refused to answer"
	VerifierVerdictOutsideSet    = "the verifier answered a verdict outside the allowed set"
	VerifierConfidenceOutOfRange = "the verifier's confidence is not between 0 and 1"
	VerifierFailed               = "the verifier failed"
	// VerifierLost is a call whose worker stopped (was killed, or hung
	// past its lease) before it recorded an answer.
	VerifierLost = "the worker making the call stopped before it answered"
	// VerifierThrottled is a task sent to a human because its calls were
	// still throttled (ThrottledError) when its deadline neared.
	VerifierThrottled = "calls to the verifier were throttled until the deadline neared"
)

// VerifierHTTPStatus is the reason for a model server that answered with
// the HTTP status code, e.g. "the verifier answered HTTP 500".
func VerifierHTTPStatus(code int) string { return fmt.Sprintf("the verifier answered HTTP %d", code) }

// VerifierError is a failed verifier call: Reason is one of the reasons
// above, fit for API callers; Err is the full cause, for the log only.
type VerifierError struct {
	Reason string
	Err    error
}

// Error returns the reason and the full cause.
func (e *VerifierError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

// Unwrap returns the full cause.
func (e *VerifierError) Unwrap() error { return e.Err }

// ThrottledError is a call the verifier's provider turned away for now
// (HTTP 429, or 503 with Retry-After), or one the backend's limiter held
// back while the provider throttles. It is not the verifier failing on the
// task: NextAgentStep counts no failure and has the task asked again after
// RetryAfter.
type ThrottledError struct {
	// RetryAfter is how long the task waits before its next call: what
	// the provider's Retry-After asked, or the backend's backoff when it
	// asked nothing.
	RetryAfter time.Duration
	// Err is the full cause, for the log only.
	Err error
}

// Error says that the call was throttled, and why.
func (e *ThrottledError) Error() string {
	msg := fmt.Sprintf("throttled; retry after %s", e.RetryAfter)
	if e.Err == nil {
		return msg
	}
	return msg + ": " + e.Err.Error()
}

// Unwrap returns the full cause.
func (e *ThrottledError) Unwrap() error { return e.Err }

// VerifierFailureReason returns what a failed attempt records for the call
// error err: the reason of a *VerifierError, VerifierTimedOut for a
// deadline that passed, and VerifierFailed for anything else, whose words
// could hold what callers must not see.
func VerifierFailureReason(err error) string {
	var ve *VerifierError
	switch {
	case errors.As(err, &ve):
		return ve.Reason
	case errors.Is(err, context.DeadlineExceeded):
		return VerifierTimedOut
	}
	return VerifierFailed
}

// Named verifiers.
//
// A deployment names its verifiers in a verifiers file
// (ARBITER_VERIFIERS): each a backend with its settings, a confidence
// source and a price, and a default cascade, the order in which a task's
// claims ask them before people decide (cascade.go). The agent package
// reads the file and builds the backends; the rules of what a verifier may
// be are here, so that the file, the environment variables it replaces and
// the tests share them.

// Verifier backends, the values of VerifierSpec.Backend.
const (
	BackendNone      = "none"
	BackendRules     = "rules"
	BackendOpenAI    = "openai"
	BackendAnthropic = "anthropic"
)

// Confidence sources, the values of ConfidenceSpec.Source: how a backend
// that calls a model turns its answers into one confidence.
const (
	// ConfidenceSelf takes the model's stated confidence.
	ConfidenceSelf = "self"
	// ConfidenceLogprobs tempers the stated confidence by the
	// probability of the verdict's tokens (OpenAI-compatible servers that
	// return logprobs): the smaller of the two.
	ConfidenceLogprobs = "logprobs"
	// ConfidenceSampling asks for Samples answers at Temperature and takes
	// the share agreeing with the most frequent verdict.
	ConfidenceSampling = "sampling"
)

// Bounds of a verifier's settings.
const (
	MaxVerifiers       = 16
	MaxVerifierSamples = 20
	// DefaultVerifierSamples and DefaultSamplingTemperature are a
	// sampling source's when the file gives none.
	DefaultVerifierSamples     = 5
	DefaultSamplingTemperature = 0.7
	maxVerifierNameChars       = 40
	maxVerifierTimeout         = 10 * time.Minute
)

// ConfidenceSpec is a verifier's confidence source.
type ConfidenceSpec struct {
	Source      string  // ConfidenceSelf, ConfidenceLogprobs or ConfidenceSampling
	Samples     int     // with sampling: the answers asked for
	Temperature float64 // with sampling: their temperature
}

// Price is what a provider charges for a million tokens, in the currency
// the operator prices in (USD in the examples).
type Price struct {
	InputPerMillion  float64
	OutputPerMillion float64
}

// Cost returns what u costs at p.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.InputTokens)*p.InputPerMillion + float64(u.OutputTokens)*p.OutputPerMillion) / 1e6
}

// VerifierSpec is one named verifier of a verifiers file.
type VerifierSpec struct {
	Name    string
	Backend string
	// BaseURL, Model and APIKeyEnv are a model backend's: the API root,
	// the model, and the environment variable that holds the key (never
	// the key itself). RulesFile is the rules backend's file.
	BaseURL, Model, APIKeyEnv, RulesFile string
	// Version labels the verifier's prompt and model in the calibration
	// report, as ARBITER_AGENT_VERSION does; "" for none.
	Version string
	// Timeout bounds one call (0: the worker's ARBITER_AGENT_TIMEOUT);
	// MaxRPS the calls a second (0: as many as the workers make), on
	// Postgres from every worker process of the deployment together.
	Timeout    time.Duration
	MaxRPS     float64
	Price      Price
	Confidence ConfidenceSpec
}

// CallsModel reports whether the verifier's backend calls a model server.
func (v VerifierSpec) CallsModel() bool {
	return v.Backend == BackendOpenAI || v.Backend == BackendAnthropic
}

// Validate returns an EINVALID error naming the field at fault (as the
// file writes it) unless v is a verifier Arbiter can build.
func (v *VerifierSpec) Validate() error {
	if err := CheckVerifierName(v.Name); err != nil {
		return err
	}
	switch v.Backend {
	case BackendNone, BackendRules, BackendOpenAI, BackendAnthropic:
	case "":
		return FieldErrorf("backend", "backend is required: %s, %s, %s or %s.", BackendRules, BackendOpenAI, BackendAnthropic, BackendNone)
	default:
		return FieldErrorf("backend", "backend must be %s, %s, %s or %s, not %q.", BackendRules, BackendOpenAI, BackendAnthropic, BackendNone, v.Backend)
	}
	modelOnly := map[string]bool{"base_url": v.BaseURL != "", "model": v.Model != "", "api_key_env": v.APIKeyEnv != "",
		"max_rps": v.MaxRPS != 0, "confidence": v.Confidence != (ConfidenceSpec{}),
		"price": v.Price != (Price{})}
	if !v.CallsModel() {
		for _, field := range []string{"base_url", "model", "api_key_env", "max_rps", "confidence", "price"} {
			if modelOnly[field] {
				return FieldErrorf(field, "%s goes only with backend %s or %s.", field, BackendOpenAI, BackendAnthropic)
			}
		}
	}
	switch {
	case v.Backend == BackendRules && v.RulesFile == "":
		return FieldErrorf("rules_file", "backend rules needs rules_file, the rules file.")
	case v.Backend != BackendRules && v.RulesFile != "":
		return FieldErrorf("rules_file", "rules_file goes only with backend rules.")
	case v.Backend == BackendOpenAI && v.BaseURL == "":
		return FieldErrorf("base_url", "backend openai needs base_url, the API root, such as https://api.openai.com/v1.")
	case v.CallsModel() && v.Model == "":
		return FieldErrorf("model", "backend %s needs model, the model name.", v.Backend)
	case v.APIKeyEnv != "" && !validEnvName(v.APIKeyEnv):
		return FieldErrorf("api_key_env", "api_key_env names the environment variable that holds the key (letters, digits and _), not the key itself.")
	case v.Timeout < 0 || v.Timeout > maxVerifierTimeout:
		return FieldErrorf("timeout", "timeout must be a duration from 1s to %s, such as 30s.", maxVerifierTimeout)
	case v.Timeout != 0 && v.Timeout < time.Second:
		return FieldErrorf("timeout", "timeout must be a duration from 1s to %s, such as 30s.", maxVerifierTimeout)
	case math.IsNaN(v.MaxRPS) || math.IsInf(v.MaxRPS, 0) || v.MaxRPS < 0:
		return FieldErrorf("max_rps", "max_rps must be a number of calls a second above 0, such as 5 or 0.5.")
	case !validPrice(v.Price.InputPerMillion) || !validPrice(v.Price.OutputPerMillion):
		return FieldErrorf("price", "price takes input_per_million and output_per_million, numbers from 0 up.")
	}
	if err := checkLabel("version", v.Version); err != nil {
		return err
	}
	if v.CallsModel() {
		return v.Confidence.validate(v.Backend)
	}
	return nil
}

// validate checks the confidence source of a backend.
func (c ConfidenceSpec) validate(backend string) error {
	switch c.Source {
	case "", ConfidenceSelf:
	case ConfidenceLogprobs:
		if backend == BackendAnthropic {
			return FieldErrorf("confidence", "Anthropic's API gives no logprobs: use confidence source self or sampling.")
		}
	case ConfidenceSampling:
	default:
		return FieldErrorf("confidence", "confidence source must be %s, %s or %s, not %q.", ConfidenceSelf, ConfidenceLogprobs, ConfidenceSampling, c.Source)
	}
	if c.Source != ConfidenceSampling && (c.Samples != 0 || c.Temperature != 0) {
		return FieldErrorf("confidence", "samples and temperature go only with confidence source sampling.")
	}
	if c.Samples < 0 || c.Samples == 1 || c.Samples > MaxVerifierSamples {
		return FieldErrorf("confidence", "samples must be a whole number from 2 to %d.", MaxVerifierSamples)
	}
	if math.IsNaN(c.Temperature) || c.Temperature < 0 || c.Temperature > 2 {
		return FieldErrorf("confidence", "temperature must be a number from 0 to 2.")
	}
	return nil
}

// Plan returns how many answers the source asks for, and at what
// temperature: one at 0, or Samples (default DefaultVerifierSamples) at
// Temperature (default DefaultSamplingTemperature).
func (c ConfidenceSpec) Plan() (answers int, temperature float64) {
	if c.Source != ConfidenceSampling {
		return 1, 0
	}
	answers, temperature = c.Samples, c.Temperature
	if answers == 0 {
		answers = DefaultVerifierSamples
	}
	if temperature == 0 {
		temperature = DefaultSamplingTemperature
	}
	return answers, temperature
}

func validPrice(p float64) bool { return !math.IsNaN(p) && !math.IsInf(p, 0) && p >= 0 }

// validEnvName reports whether s can name an environment variable.
func validEnvName(s string) bool {
	if s == "" || len(s) > 128 || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// CheckVerifierName returns EINVALID unless name can name a verifier: 1
// to 40 lower-case letters, digits, - and _, starting with a letter.
func CheckVerifierName(name string) error {
	ok := name != "" && len(name) <= maxVerifierNameChars && name[0] >= 'a' && name[0] <= 'z'
	for _, r := range name {
		ok = ok && (r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}
	if !ok {
		return FieldErrorf("name", "A verifier's name is 1 to %d lower-case letters, digits, - and _, starting with a letter, not %q.", maxVerifierNameChars, name)
	}
	return nil
}

// VerifierSet is a deployment's verifiers and its default cascade.
type VerifierSet struct {
	Verifiers []VerifierSpec
	// Cascade names the verifiers a task's claims ask, in order, when its
	// policy names none.
	Cascade []string
}

// Find returns the verifier named name.
func (s VerifierSet) Find(name string) (VerifierSpec, bool) {
	for _, v := range s.Verifiers {
		if v.Name == name {
			return v, true
		}
	}
	return VerifierSpec{}, false
}

// Names returns the verifiers' names, in the file's order.
func (s VerifierSet) Names() []string {
	out := make([]string, len(s.Verifiers))
	for i, v := range s.Verifiers {
		out[i] = v.Name
	}
	return out
}

// SetError is a verifiers file's error: Path says where, as the file
// writes it ("verifiers[1].max_rps", "cascade[2]"), and Err why.
type SetError struct {
	Path string
	Err  error
}

// Error returns the path and the reason.
func (e *SetError) Error() string { return e.Path + ": " + ErrorMessage(e.Err) }

// Unwrap returns the reason.
func (e *SetError) Unwrap() error { return e.Err }

// Validate returns a *SetError unless s is a set Arbiter can run: at least
// one verifier and at most MaxVerifiers, each valid, with distinct names,
// and a cascade of distinct known names, at least one.
func (s VerifierSet) Validate() error {
	if len(s.Verifiers) == 0 {
		return &SetError{Path: "verifiers", Err: Errorf(EINVALID, "The file names no verifier.")}
	}
	if len(s.Verifiers) > MaxVerifiers {
		return &SetError{Path: "verifiers", Err: Errorf(EINVALID, "The file names %d verifiers; at most %d.", len(s.Verifiers), MaxVerifiers)}
	}
	seen := map[string]bool{}
	for i := range s.Verifiers {
		v := &s.Verifiers[i]
		if err := v.Validate(); err != nil {
			return &SetError{Path: fmt.Sprintf("verifiers[%d].%s", i, errorField(err)), Err: err}
		}
		if seen[v.Name] {
			return &SetError{Path: fmt.Sprintf("verifiers[%d].name", i), Err: Errorf(EINVALID, "Two verifiers are named %q.", v.Name)}
		}
		seen[v.Name] = true
	}
	if err := s.CheckCascade("cascade", s.Cascade); err != nil {
		return err
	}
	return nil
}

// CheckCascade returns a *SetError at path unless names is a cascade of
// s's verifiers: at least one, each known, none twice.
func (s VerifierSet) CheckCascade(path string, names []string) error {
	if len(names) == 0 {
		return &SetError{Path: path, Err: Errorf(EINVALID, "The cascade names no verifier; list them in the order a task asks them, such as [rules, small, large].")}
	}
	for i, n := range names {
		if _, ok := s.Find(n); !ok {
			return &SetError{Path: fmt.Sprintf("%s[%d]", path, i), Err: Errorf(EINVALID, "No verifier is named %q; the file names %s.", n, strings.Join(s.Names(), ", "))}
		}
		if slices.Contains(names[:i], n) {
			return &SetError{Path: fmt.Sprintf("%s[%d]", path, i), Err: Errorf(EINVALID, "The cascade names %q twice.", n)}
		}
	}
	return nil
}

// errorField returns the field an EINVALID error names, "" when none.
func errorField(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

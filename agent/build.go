package agent

import (
	"fmt"
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// Named is one built verifier of a set: what the file says of it, and its
// backend.
type Named struct {
	Spec     arbiter.VerifierSpec
	Verifier arbiter.Verifier
}

// Verifiers are a set's verifiers, built, with the set they came from.
type Verifiers struct {
	Set    arbiter.VerifierSet
	byName map[string]Named
}

// Get returns the verifier named name.
func (v *Verifiers) Get(name string) (Named, bool) {
	n, ok := v.byName[name]
	return n, ok
}

// LimiterOf returns the limiter of the verifier name at maxRPS (0: no
// fixed limit), or nil for a Limiter of its own in this process: a
// deployment of several worker processes returns SharedLimiters, so that
// max_rps is the deployment's budget.
type LimiterOf func(name string, maxRPS float64) RateLimiter

// Build builds each verifier of set, which Validate accepted: getenv
// reads the keys the api_key_env settings name, client (nil for a new
// one) carries the model backends' requests, and each model verifier is
// paced by limiters' limiter at its max_rps (nil limiters, or a nil
// limiter: a Limiter of its own). A rules file that does not compile, or
// a key variable that is not set, is an error naming the verifier.
func Build(set arbiter.VerifierSet, getenv func(string) string, client *http.Client, limiters LimiterOf) (*Verifiers, error) {
	if err := set.Validate(); err != nil {
		return nil, err
	}
	out := &Verifiers{Set: set, byName: make(map[string]Named, len(set.Verifiers))}
	for _, spec := range set.Verifiers {
		cfg := Config{Backend: spec.Backend, BaseURL: spec.BaseURL, Model: spec.Model, RulesFile: spec.RulesFile,
			MaxRPS: spec.MaxRPS, Confidence: spec.Confidence, HTTPClient: client}
		if limiters != nil {
			cfg.Limiter = limiters(spec.Name, spec.MaxRPS)
		}
		if spec.APIKeyEnv != "" {
			if cfg.APIKey = getenv(spec.APIKeyEnv); cfg.APIKey == "" {
				return nil, fmt.Errorf("verifier %s: %s, its api_key_env, is not set", spec.Name, spec.APIKeyEnv)
			}
		}
		v, err := New(cfg)
		if err != nil {
			return nil, fmt.Errorf("verifier %s: %w", spec.Name, err)
		}
		out.byName[spec.Name] = Named{Spec: spec, Verifier: v}
	}
	return out, nil
}

// SetOf returns the one-verifier set the ARBITER_AGENT* variables describe
// (cfg), named after its backend, with the key in envKey: today's
// configuration as a cascade of one.
func SetOf(cfg Config, envKey string) arbiter.VerifierSet {
	backend := cfg.Backend
	if backend == "" {
		backend = BackendNone
	}
	spec := arbiter.VerifierSpec{Name: backend, Backend: backend, BaseURL: cfg.BaseURL, Model: cfg.Model, RulesFile: cfg.RulesFile,
		MaxRPS: cfg.MaxRPS, Confidence: cfg.Confidence}
	if cfg.APIKey != "" {
		spec.APIKeyEnv = envKey
	}
	return arbiter.VerifierSet{Verifiers: []arbiter.VerifierSpec{spec}, Cascade: []string{backend}}
}

// Cascade names the verifiers of the set's default cascade, in order.
func (v *Verifiers) Cascade() []string { return v.Set.Cascade }

// Verifier returns the verifier named name, built, with its spec.
func (v *Verifiers) Verifier(name string) (arbiter.Verifier, arbiter.VerifierSpec, bool) {
	n, ok := v.byName[name]
	return n.Verifier, n.Spec, ok
}

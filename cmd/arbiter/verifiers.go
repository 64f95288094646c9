package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
)

// runVerifiersCheck runs `arbiter verifiers check FILE`: it reads the
// verifiers file as the server would at start, compiles its rules files,
// and says what it found, without starting anything. A key variable that
// is not set here is a warning, not an error: the check may run where the
// secrets are not.
func runVerifiersCheck(_ context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("verifiers check takes one argument, the verifiers file")
	}
	path := fs.Arg(0)
	set, err := agent.LoadVerifiers(path)
	if err != nil {
		return err
	}
	var missing []string
	getenv := func(name string) string {
		if v := p.getenv(name); v != "" {
			return v
		}
		missing = append(missing, name)
		return "unset"
	}
	if _, err := agent.Build(set, getenv, nil, nil); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, v := range set.Verifiers {
		fmt.Fprintf(p.stdout, "%s: %s\n", v.Name, describeVerifier(v))
	}
	fmt.Fprintf(p.stdout, "cascade: %s → people\n", strings.Join(set.Cascade, " → "))
	for _, name := range missing {
		fmt.Fprintf(p.stderr, "arbiter: warning: %s is not set here; the server needs it at start\n", name)
	}
	return nil
}

// describeVerifier says in a line what a verifier is.
func describeVerifier(v arbiter.VerifierSpec) string {
	switch v.Backend {
	case arbiter.BackendRules:
		return "rules from " + v.RulesFile
	case arbiter.BackendNone:
		return "none (declines every task)"
	}
	n, temperature := v.Confidence.Plan()
	source := v.Confidence.Source
	if source == "" {
		source = map[string]string{arbiter.BackendOpenAI: arbiter.ConfidenceLogprobs, arbiter.BackendAnthropic: arbiter.ConfidenceSelf}[v.Backend]
	}
	line := fmt.Sprintf("%s %s, confidence %s", v.Backend, v.Model, source)
	if source == arbiter.ConfidenceSampling {
		line += fmt.Sprintf(" (%d answers at %g)", n, temperature)
	}
	if v.Price != (arbiter.Price{}) {
		line += fmt.Sprintf(", %g in and %g out per million tokens", v.Price.InputPerMillion, v.Price.OutputPerMillion)
	}
	return line
}

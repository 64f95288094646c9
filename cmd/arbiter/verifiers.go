package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/config"
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

// runVerifiersBacktest runs `arbiter verifiers backtest`: it asks one
// verifier of the verifiers file (ARBITER_VERIFIERS, live in the cascade
// or not) on the account's past tasks people labelled, within its
// max_rps, records the calls as a backtest run (never as attempts), and
// prints what its certificate, coverage, error and cost would have been
// beside the current cascade's. It changes no task.
func runVerifiersBacktest(ctx context.Context, c *command, p *process, args []string) error {
	fs := c.flagSet(p)
	getenv := c.settingFlags(fs, p.getenv)
	email := fs.String("email", "", "the account's e-mail address")
	name := fs.String("verifier", "", "the verifier to backtest, as the verifiers file names it")
	taskType := fs.String("task-type", "", "only tasks of this type (default: every type)")
	since := fs.String("since", "30d", "only tasks created in this last span: days (30d) or a duration (12h)")
	limit := fs.Int("limit", arbiter.DefaultBacktestTasks, fmt.Sprintf("ask about at most this many tasks, the newest (at most %d)", arbiter.MaxBacktestTasks))
	target := fs.Float64("target-error-rate", arbiter.DefaultTargetErrorRate, "the certificate's target error rate α")
	confidence := fs.Float64("confidence", arbiter.DefaultCertificationConfidence, "the certificate's confidence 1−δ")
	if err := c.parse(fs, p, args); err != nil {
		return err
	}
	f := arbiter.NewBacktestFilter(*name)
	f.TaskType, f.Limit, f.TargetErrorRate, f.Confidence = *taskType, *limit, *target, *confidence
	var err error
	if f.Since, err = arbiter.ParseBacktestSince(*since); err != nil {
		return adminError(c.name, err)
	}
	if err := f.Validate(); err != nil {
		return adminError(c.name, err)
	}
	cfg, err := config.FromEnv(getenv, c.scopes...)
	if err != nil {
		return err
	}
	s := &server{cfg: cfg, getenv: getenv, logger: slog.New(slog.NewTextHandler(p.stderr, nil))}
	defer s.Close()
	if err := s.openStore(ctx); err != nil {
		return err
	}
	verifiers, err := s.verifiers()
	if err != nil {
		return err
	}
	v, spec, ok := verifiers.Verifier(f.Verifier)
	if !ok {
		return fmt.Errorf("%s: no verifier is named %q; the verifiers file names %s", c.name, f.Verifier, strings.Join(verifiers.Set.Names(), ", "))
	}
	account, err := s.store.FindAccountByEmail(ctx, *email)
	if err != nil {
		return adminError(c.name, err)
	}
	cases, err := s.store.BacktestCases(ctx, account.ID, f)
	if err != nil {
		return adminError(c.name, err)
	}
	timeout := cmp.Or(spec.Timeout, cfg.AgentTimeout, config.DefaultAgentTimeout)
	run := &arbiter.BacktestRun{AccountID: account.ID, Filter: f, StartedAt: arbiter.TimestampOf(time.Now())}
	run.Calls = agent.Backtest(ctx, v, spec, cases, timeout)
	run.FinishedAt = arbiter.TimestampOf(time.Now())
	run.Report = arbiter.Backtest(spec, cases[:len(run.Calls)], run.Calls, f.TargetErrorRate, f.Confidence)
	// The run is stored even when the context ended: what was asked is
	// recorded, and the report says how many tasks it covers.
	id, err := s.store.SaveBacktestRun(context.WithoutCancel(ctx), run)
	if err != nil {
		return adminError(c.name, err)
	}
	writeBacktest(p.stdout, id, run.Report)
	return ctx.Err()
}

// writeBacktest prints a backtest's report: the candidate beside the
// current cascade.
func writeBacktest(w io.Writer, id string, r arbiter.BacktestReport) {
	label := r.Verifier
	if r.Version != "" {
		label += " " + r.Version
	}
	fmt.Fprintf(w, "backtest %s: %s on %d labelled tasks (%d failed, %d declined); no task changed\n", id, label, r.Tasks, r.Failed, r.Declined)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tthreshold\tcoverage\terror\tcost\tcost per decided task")
	for _, side := range []struct {
		name string
		s    arbiter.BacktestSide
	}{{r.Verifier, r.Candidate}, {"current cascade", r.Current}} {
		threshold := "-"
		if side.s.Threshold != nil {
			threshold = arbiter.FormatThreshold(*side.s.Threshold)
		} else if side.name == "current cascade" {
			threshold = "as it ran"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%.4f\t%s\n", side.name, threshold, arbiter.FormatShare(side.s.Coverage),
			shareOrDash(side.s.ErrorRate), side.s.Cost, costOrDash(side.s.CostPerDecided))
	}
	tw.Flush()
	fmt.Fprintf(w, "%s certificate: %s\n", r.Verifier, r.Candidate.Certification.Message)
	fmt.Fprintf(w, "current cascade's certificate: %s\n", r.Current.Certification.Message)
}

func shareOrDash(x *float64) string {
	if x == nil {
		return "-"
	}
	return arbiter.FormatShare(*x)
}

func costOrDash(x *float64) string {
	if x == nil {
		return "-"
	}
	return fmt.Sprintf("%.6f", *x)
}

package arbiter

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Backtests.
//
// A backtest asks one verifier of the verifiers file — live or not — on
// past tasks that people labelled (their decisions on routed tasks, and
// blind audits), and says what its certificate, coverage, error and cost
// would have been, beside the current cascade's on the same tasks. It
// changes no task: its calls are recorded apart, as a backtest run,
// never as attempts.
//
// The labels keep their weights: 1 for a routed task (every one is
// labelled), 1/r for an audit at rate r (one in 1/r of the tasks the
// cascade decided is). Over the tasks the backtest reads, the weighted
// labels stand for every task the cascade answered, whoever decided it,
// so the candidate's answers on them, with the people's verdicts, are a
// weighted sample of what it would have answered: the certificate is
// computed from them as the report computes a verifier's (Certify), each
// sampling rate a stratum.

// Bounds of a backtest.
const (
	// DefaultBacktestTasks and MaxBacktestTasks bound the labelled tasks
	// one run asks the verifier about: the newest.
	DefaultBacktestTasks = 100
	MaxBacktestTasks     = 1000
	// DefaultBacktestSince and MaxBacktestSince bound how far back the
	// tasks are taken, by their creation.
	DefaultBacktestSince = 30 * 24 * time.Hour
	MaxBacktestSince     = 365 * 24 * time.Hour
	// BacktestThrottleRetries is how many times a throttled call is
	// asked again, after the provider's Retry-After, before the task is
	// counted as failed.
	BacktestThrottleRetries = 3
	// MaxBacktestRunTime bounds a run started in the background (the
	// dashboard's): it is stopped after this long, what it asked is
	// kept, and a run still marked running past it was interrupted (its
	// process stopped) and no longer holds the account's one run.
	MaxBacktestRunTime = time.Hour
)

// The states of a backtest run. A run the CLI makes is stored done; one
// started in the background is running until its calls are stored.
const (
	BacktestRunning     = "running"
	BacktestDone        = "done"
	BacktestInterrupted = "interrupted" // shown, never stored: running past MaxBacktestRunTime
)

// BacktestFilter chooses the tasks of a backtest and the verifier asked.
type BacktestFilter struct {
	Verifier string
	TaskType string // "" for every type
	// Since is how far back, by the task's creation.
	Since time.Duration
	Limit int
	// TargetErrorRate and Confidence are the certificate's α and 1−δ.
	TargetErrorRate float64
	Confidence      float64
}

// NewBacktestFilter returns the filter with defaults: the last
// DefaultBacktestSince, DefaultBacktestTasks tasks, the report's default
// target and confidence.
func NewBacktestFilter(verifier string) BacktestFilter {
	return BacktestFilter{Verifier: verifier, Since: DefaultBacktestSince, Limit: DefaultBacktestTasks,
		TargetErrorRate: DefaultTargetErrorRate, Confidence: DefaultCertificationConfidence}
}

// Validate returns an EINVALID error naming the field at fault unless f
// is a backtest Arbiter runs.
func (f BacktestFilter) Validate() error {
	if err := CheckVerifierName(f.Verifier); err != nil {
		return asField("verifier", err)
	}
	if err := checkLabel("task_type", f.TaskType); err != nil {
		return err
	}
	switch {
	case f.Since <= 0 || f.Since > MaxBacktestSince:
		return FieldErrorf("since", "since must be from 1h to %dd, such as 30d.", int(MaxBacktestSince/(24*time.Hour)))
	case f.Limit < 1 || f.Limit > MaxBacktestTasks:
		return FieldErrorf("limit", "limit must be a whole number of tasks from 1 to %d.", MaxBacktestTasks)
	case !(f.TargetErrorRate > 0 && f.TargetErrorRate < 1):
		return FieldErrorf("target_error_rate", "target_error_rate must be a share between 0 and 1, such as 0.02.")
	case !(f.Confidence >= 0.5 && f.Confidence < 1):
		return FieldErrorf("confidence", "confidence must be a share from 0.5 to below 1, such as 0.95.")
	}
	return nil
}

// ParseBacktestSince reads how far back a backtest goes: whole days
// ("30d") or any Go duration ("12h"), from 1h to MaxBacktestSince.
// Returns EINVALID naming since otherwise.
func ParseBacktestSince(s string) (time.Duration, error) {
	bad := FieldErrorf("since", "since must be from 1h to %dd, such as 30d or 12h, not %.32q.", int(MaxBacktestSince/(24*time.Hour)), s)
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 || n > int(MaxBacktestSince/(24*time.Hour)) {
			return 0, bad
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, bad
		}
	}
	if d < time.Hour || d > MaxBacktestSince {
		return 0, bad
	}
	return d, nil
}

// BacktestCase is one past task people labelled: the task as it stands
// (its attempts are the current cascade's), and the label of the
// cascade's answer (LabelledPairOf) with its weight.
type BacktestCase struct {
	Task *Task
	Pair LabelledPair
}

// BacktestCall is the candidate verifier's answer on one case: a verdict
// with a confidence, or a decline (Decided false), or a failure (Error,
// a reason fit for callers).
type BacktestCall struct {
	TaskID       string   `json:"task_id"`
	Verdict      *string  `json:"verdict"`
	Confidence   *float64 `json:"confidence"`
	InputTokens  int      `json:"input_tokens"`
	OutputTokens int      `json:"output_tokens"`
	Cost         float64  `json:"cost"`
	Error        *string  `json:"error"`
}

// BacktestCallOf returns the call record of the candidate's answer v (or
// its error callErr) on task id, its cost at price.
func BacktestCallOf(id string, v Verification, callErr error, price Price) BacktestCall {
	c := BacktestCall{TaskID: id, InputTokens: v.Usage.InputTokens, OutputTokens: v.Usage.OutputTokens}
	if cost := CostOf(price, v.Usage); cost != nil {
		c.Cost = *cost
	}
	switch {
	case callErr != nil:
		reason := VerifierFailureReason(callErr)
		var throttled *ThrottledError
		if errors.As(callErr, &throttled) {
			reason = VerifierThrottled
		}
		c.Error = &reason
	case v.Decided:
		verdict, confidence := v.Verdict, v.Confidence
		c.Verdict, c.Confidence = &verdict, &confidence
	}
	return c
}

// BacktestSide is what a verifier, or the current cascade, did or would
// have done on a backtest's tasks, weighted as the labels are. A figure
// without data is nil.
type BacktestSide struct {
	// Answered is how many tasks it gave a verdict with a confidence on;
	// Decided how many of them it would have decided (at or above the
	// threshold) — for the cascade, those it did decide.
	Answered int `json:"answered"`
	Decided  int `json:"decided"`
	// Coverage is the weighted share of the tasks it decided.
	Coverage float64 `json:"coverage"`
	// ErrorRate is the weighted share of its decisions a person
	// disagreed with.
	ErrorRate *float64 `json:"error_rate"`
	// Cost is what its calls cost on the tasks (the price in the file);
	// CostPerDecided the weighted cost per task it decided.
	Cost           float64  `json:"cost"`
	CostPerDecided *float64 `json:"cost_per_decided"`
	// Threshold is where its answers decide: the candidate's certified
	// threshold (nil: none certified, it would pass every task on).
	Threshold *float64 `json:"threshold"`
	// Certification is the certificate its answers on these tasks give
	// at the backtest's target and confidence.
	Certification Certification `json:"certification"`
}

// BacktestReport is a backtest's outcome: the candidate beside the
// current cascade, on the same labelled tasks.
type BacktestReport struct {
	Verifier string `json:"verifier"`
	Model    string `json:"model"`
	Version  string `json:"version"`
	Tasks    int    `json:"tasks"`
	Failed   int    `json:"failed"`
	Declined int    `json:"declined"`
	// Candidate is the verifier backtested; Current the cascade that
	// answered the tasks.
	Candidate BacktestSide `json:"candidate"`
	Current   BacktestSide `json:"current"`
}

// Backtest computes the report of a run: calls[i] is the candidate's
// answer on cases[i]. The candidate decides at its certified threshold on
// these labels (none certified: it decides nothing, as a certified
// verifier without a certificate passes every task on); the current
// cascade decided the tasks whose label is a blind audit of its answer.
func Backtest(spec VerifierSpec, cases []BacktestCase, calls []BacktestCall, target, confidence float64) BacktestReport {
	r := BacktestReport{Verifier: spec.Name, Model: spec.Model, Version: spec.Version, Tasks: len(cases)}
	var candidate, current []LabelledPair
	var total, candidateCost, currentCost float64
	for i, c := range cases {
		w := c.Pair.Weight
		total += w
		current = append(current, c.Pair)
		currentCost += w * attemptsCost(c.Task)
		r.Current.Cost += attemptsCost(c.Task)
		if i >= len(calls) {
			continue
		}
		call := calls[i]
		r.Candidate.Cost += call.Cost
		candidateCost += w * call.Cost
		switch {
		case call.Error != nil:
			r.Failed++
		case call.Verdict == nil || call.Confidence == nil:
			r.Declined++
		default:
			p := c.Pair
			p.AgentVerdict, p.Confidence, p.Verifier, p.Model, p.Version = *call.Verdict, *call.Confidence, spec.Name, spec.Model, spec.Version
			candidate = append(candidate, p)
		}
	}
	r.Candidate.Certification = Certify(Evidence(candidate), target, confidence)
	r.Current.Certification = Certify(Evidence(current), target, confidence)
	r.Candidate.Threshold = r.Candidate.Certification.Threshold
	decidedBy := func(p LabelledPair) bool {
		return r.Candidate.Threshold != nil && p.Confidence >= *r.Candidate.Threshold
	}
	r.Candidate.fill(candidate, decidedBy, total, candidateCost)
	r.Current.fill(current, func(p LabelledPair) bool { return p.Audit }, total, currentCost)
	return r
}

// fill sums the side's answers: decided says which it decided, total is
// the weight of every task, cost the weighted cost of its calls.
func (s *BacktestSide) fill(answers []LabelledPair, decided func(LabelledPair) bool, total, cost float64) {
	var w, wrong float64
	s.Answered = len(answers)
	for _, p := range answers {
		if !decided(p) {
			continue
		}
		s.Decided++
		w += p.Weight
		if !p.Correct() {
			wrong += p.Weight
		}
	}
	if total > 0 {
		s.Coverage = w / total
	}
	if w > 0 {
		rate, per := wrong/w, cost/w
		s.ErrorRate, s.CostPerDecided = &rate, &per
	}
}

// attemptsCost sums the cost of t's attempts.
func attemptsCost(t *Task) float64 {
	var sum float64
	if t == nil {
		return 0
	}
	for _, a := range t.Attempts {
		if a.Cost != nil {
			sum += *a.Cost
		}
	}
	return sum
}

// BacktestRun is a stored backtest: who ran it, on what, its calls and
// its report.
type BacktestRun struct {
	ID        string `json:"id"`
	AccountID string `json:"-"`
	// Status is BacktestRunning or BacktestDone, as stored; StatusAt
	// tells an interrupted run.
	Status     string         `json:"status"`
	Filter     BacktestFilter `json:"-"`
	StartedAt  Timestamp      `json:"started_at"`
	FinishedAt Timestamp      `json:"finished_at"`
	Calls      []BacktestCall `json:"calls"`
	Report     BacktestReport `json:"report"`
}

// StatusAt returns the run's state at now: BacktestInterrupted for a
// run still marked running MaxBacktestRunTime after it started.
func (r BacktestRun) StatusAt(now time.Time) string {
	if r.Status == BacktestRunning && now.Sub(r.StartedAt.Time()) > MaxBacktestRunTime {
		return BacktestInterrupted
	}
	return r.Status
}

// ErrBacktestRunning is the answer to a start while the account's run is
// not finished: one run per account at a time.
var ErrBacktestRunning = Errorf(ECONFLICT, "A backtest is already running for this account. Wait for it to finish, then start another.")

// BacktestService reads the labelled history a backtest replays and keeps
// its runs, apart from the tasks.
type BacktestService interface {
	// BacktestCases returns the account's labelled tasks f selects, the
	// newest first (by creation, then id), at most f.Limit, created
	// after now − f.Since. Returns EINVALID for a filter Validate
	// refuses.
	BacktestCases(ctx context.Context, accountID string, f BacktestFilter) ([]BacktestCase, error)

	// SaveBacktestRun stores a finished run and returns its id. It
	// changes no task.
	SaveBacktestRun(ctx context.Context, run *BacktestRun) (string, error)

	// FindBacktestRun returns the account's run with its calls. Returns
	// ENOTFOUND for an unknown id or another account's run.
	FindBacktestRun(ctx context.Context, accountID, id string) (*BacktestRun, error)

	// StartBacktestRun stores run (its account, filter and start) as
	// running and returns its id. Returns ErrBacktestRunning while the
	// account has a run running that started within MaxBacktestRunTime.
	StartBacktestRun(ctx context.Context, run *BacktestRun) (string, error)

	// FinishBacktestRun stores the calls, the report and the finish of
	// the running run (run.ID, run.AccountID) and marks it done.
	// Returns ENOTFOUND for a run that is not the account's or not
	// running.
	FinishBacktestRun(ctx context.Context, run *BacktestRun) error

	// ListBacktestRuns returns the account's newest limit runs, the
	// newest first, without their calls.
	ListBacktestRuns(ctx context.Context, accountID string, limit int) ([]BacktestRun, error)
}

// BacktestStarter starts backtests in the background, one per account
// at a time, with the verifiers of the server's verifiers file.
type BacktestStarter interface {
	// VerifierNames names the verifiers of the file, in its order.
	VerifierNames() []string
	// StartBacktest checks f, reads its tasks, records a running run and
	// asks the verifier in the background; it returns the run's id at
	// once. Returns EINVALID for a filter Validate refuses or a verifier
	// the file does not name, ErrBacktestRunning while the account's
	// run is not finished.
	StartBacktest(ctx context.Context, accountID string, f BacktestFilter) (string, error)
}

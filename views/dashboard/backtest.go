package dashboard

import (
	"fmt"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter"
)

// BacktestPanel is the calibration page's backtests, shown to owners: the
// form that starts one and the account's latest runs.
type BacktestPanel struct {
	// Verifiers name the server's verifiers file's verifiers; none: the
	// server has no file, and the form is not shown.
	Verifiers []string
	Runs      []arbiter.BacktestRun
	Now       time.Time
}

// backtestSide is one row of a run's report: the candidate or the
// current cascade.
type backtestSide struct {
	Name      string
	Threshold string
	Side      arbiter.BacktestSide
}

// backtestSides returns the report's rows, the candidate first, as the
// CLI prints them.
func backtestSides(r arbiter.BacktestReport) []backtestSide {
	candidate := backtestSide{Name: r.Verifier, Threshold: "none certified", Side: r.Candidate}
	if r.Candidate.Threshold != nil {
		candidate.Threshold = threshold(*r.Candidate.Threshold)
	}
	current := backtestSide{Name: "current cascade", Threshold: "as it ran", Side: r.Current}
	if r.Current.Threshold != nil {
		current.Threshold = threshold(*r.Current.Threshold)
	}
	return []backtestSide{candidate, current}
}

// backtestTitle says what a report covers, as the CLI's first line does.
func backtestTitle(r arbiter.BacktestReport) string {
	label := r.Verifier
	if r.Version != "" {
		label += " " + r.Version
	}
	return fmt.Sprintf("%s on %d labelled tasks (%d failed, %d declined)", label, r.Tasks, r.Failed, r.Declined)
}

// backtestCost writes a cost in the file's currency, as the CLI does.
func backtestCost(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }

// backtestCostPer writes a cost per decided task, or a dash.
func backtestCostPer(x *float64) string {
	if x == nil {
		return "–"
	}
	return strconv.FormatFloat(*x, 'f', 6, 64)
}

// backtestScope says which tasks a run asked about.
func backtestScope(run arbiter.BacktestRun) string {
	taskType := "every task type"
	if run.Filter.TaskType != "" {
		taskType = "task type " + run.Filter.TaskType
	}
	return fmt.Sprintf("%s, the last %s, at most %d tasks", taskType, backtestSince(run.Filter.Since), run.Filter.Limit)
}

// backtestSince writes a span as the form takes it: whole days, or a
// duration.
func backtestSince(d time.Duration) string {
	if day := 24 * time.Hour; d%day == 0 {
		return strconv.Itoa(int(d/day)) + "d"
	}
	return d.String()
}

// backtestStatusBadge returns the badge kind and text of a run's state.
func backtestStatusBadge(run arbiter.BacktestRun, now time.Time) (kind, text string) {
	switch run.StatusAt(now) {
	case arbiter.BacktestRunning:
		return "amber", "running"
	case arbiter.BacktestInterrupted:
		return "red", "interrupted"
	}
	return "green", "done"
}

// backtestRunURL is a run's page.
func backtestRunURL(id string) string { return "/calibration/backtests/" + id }

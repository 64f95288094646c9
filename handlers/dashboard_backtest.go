package handlers

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// backtestRunsShown is how many of the account's latest backtest runs the
// calibration page lists.
const backtestRunsShown = 10

// errNoVerifiersFile answers a backtest asked of a server without a
// verifiers file.
var errNoVerifiersFile = arbiter.Errorf(arbiter.ECONFLICT,
	"This server has no verifiers file (ARBITER_VERIFIERS), so it cannot start a backtest. Set one and restart it, or run `arbiter verifiers backtest`.")

// backtestPanel returns the calibration page's backtests for those who may
// start them (owners), or nil: the form when starter is set (the server
// has a verifiers file), and the account's latest runs.
func backtestPanel(r *http.Request, runs arbiter.BacktestService, starter arbiter.BacktestStarter, accountID string, now arbiter.Clock) (*dashboard.BacktestPanel, error) {
	s := arbiter.SessionFromContext(r.Context())
	if runs == nil || s == nil || !arbiter.Can(s.Role, arbiter.ActionBacktest) {
		return nil, nil
	}
	list, err := runs.ListBacktestRuns(r.Context(), accountID, backtestRunsShown)
	if err != nil {
		return nil, err
	}
	p := &dashboard.BacktestPanel{Runs: list, Now: now()}
	if starter != nil {
		p.Verifiers = starter.VerifierNames()
	}
	return p, nil
}

// DashboardBacktestStart handles POST /calibration/backtests: it starts a
// backtest of the form's verifier (task type, since, limit) in the
// background (arbiter.BacktestStarter) and shows its run. A bad field is
// a 400 page, a second run while the account's first is running a 409,
// a server without a verifiers file a 409 saying so; none of them starts
// anything.
func DashboardBacktestStart(starter arbiter.BacktestStarter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if starter == nil {
			Error(w, r, errNoVerifiersFile)
			return
		}
		if err := r.ParseForm(); err != nil {
			Error(w, r, arbiter.Errorf(arbiter.EINVALID, "The form could not be read."))
			return
		}
		f, err := backtestFilterOf(r)
		if err != nil {
			Error(w, r, err)
			return
		}
		id, err := starter.StartBacktest(r.Context(), arbiter.AccountIDFromContext(r.Context()), f)
		if err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/calibration/backtests/"+id)
	})
}

// backtestFilterOf reads the backtest form: verifier, task_type ("" for
// every type), since (default 30d) and limit (default
// arbiter.DefaultBacktestTasks). Returns EINVALID naming the field at
// fault.
func backtestFilterOf(r *http.Request) (arbiter.BacktestFilter, error) {
	f := arbiter.NewBacktestFilter(r.PostForm.Get("verifier"))
	f.TaskType = strings.TrimSpace(r.PostForm.Get("task_type"))
	if since := strings.TrimSpace(r.PostForm.Get("since")); since != "" {
		d, err := arbiter.ParseBacktestSince(since)
		if err != nil {
			return f, err
		}
		f.Since = d
	}
	if limit := strings.TrimSpace(r.PostForm.Get("limit")); limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || len(limit) > 8 {
			return f, arbiter.FieldErrorf("limit", "limit must be a whole number of tasks from 1 to %d.", arbiter.MaxBacktestTasks)
		}
		f.Limit = n
	}
	return f, f.Validate()
}

// DashboardBacktestRun handles GET /calibration/backtests/{id}: the
// account's run, running or with its report beside the current
// cascade's. Another account's run is not found.
func DashboardBacktestRun(runs arbiter.BacktestService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		run, err := runs.FindBacktestRun(r.Context(), arbiter.AccountIDFromContext(r.Context()), r.PathValue("id"))
		if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, dashboard.BacktestRun(PageOf(r, "Backtest of "+run.Filter.Verifier, "calibration"), *run, now()))
	})
}

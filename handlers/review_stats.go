package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// ReviewStats handles GET /review/stats?window=24h|7d|30d: the queue now
// (how many wait, their median, 90th percentile and oldest age) and the
// window's decisions, for the team and per reviewer (count, median and 90th
// percentile time from human_needed to decision, disagreement with the
// verifier). Reviewers see the team's line and their own; owners and
// admins see everyone's. Each read is bounded by arbiter.MaxStatsRows.
// With agreement (not nil), the page also shows how much the reviewers
// agree on the window's tasks that asked several votes, as GET
// /v1/agreement does, with the same rule on whose lines are shown; the
// accuracy on gold tasks is shown to owners and admins only.
func ReviewStats(stats arbiter.StatsService, agreement arbiter.AgreementService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		window, length, err := arbiter.ParseStatsWindow(r.URL.Query().Get("window"))
		if err != nil {
			Error(w, r, err)
			return
		}
		decisions, err := stats.ListDecisions(r.Context(), s.AccountID, arbiter.TimestampOf(now().Add(-length)))
		if err != nil {
			Error(w, r, err)
			return
		}
		waiting, at, err := stats.ListWaiting(r.Context(), s.AccountID)
		if err != nil {
			Error(w, r, err)
			return
		}
		truncated := len(decisions) > arbiter.MaxStatsRows || len(waiting) > arbiter.MaxStatsRows
		decisions, waiting = decisions[:min(len(decisions), arbiter.MaxStatsRows)], waiting[:min(len(waiting), arbiter.MaxStatsRows)]
		v := review.StatsView{Stats: arbiter.SummarizeDesk(window, decisions, waiting, at), Self: s.Email,
			Everyone: arbiter.Can(s.Role, arbiter.ActionViewMemberStats)}
		v.Stats.Truncated = truncated
		if agreement != nil {
			tasks, err := agreement.ListAgreementTasks(r.Context(), s.AccountID, arbiter.TimestampOf(now().Add(-length)))
			if err != nil {
				Error(w, r, err)
				return
			}
			report := arbiter.TeamAgreement(tasks)
			if v.Everyone {
				// A reviewer's own gold figures change the moment they
				// answer a gold task, which would tell them it was gold
				// and, with two verdicts, its gold verdict: only owners
				// and admins see them.
				answers, err := agreement.ListGoldAnswers(r.Context(), s.AccountID, arbiter.TimestampOf(now().Add(-length)))
				if err != nil {
					Error(w, r, err)
					return
				}
				report.AddGold(answers)
			}
			v.Agreement = &report
		}
		for _, w := range arbiter.StatsWindows {
			v.Windows = append(v.Windows, w.Name)
		}
		Render(w, r, http.StatusOK, review.Stats(PageOf(r, "Desk stats", "stats"), v))
	})
}

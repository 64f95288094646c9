package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardHome handles GET /: today's usage against the cap, the number of
// active keys, a first call to copy, and a banner when the agent's audited
// error rate has drifted (arbiter.NextDrift). A member whose role may not
// see it goes to the review queue.
func DashboardHome(accounts arbiter.AccountService, keys arbiter.APIKeyService, cal arbiter.CalibrationService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := arbiter.SessionFromContext(r.Context()); !arbiter.Can(s.Role, arbiter.ActionViewOverview) {
			// A reviewer's work is on the reviewer site.
			redirect(w, r, homeOf(r, s.Role))
			return
		}
		accountID := arbiter.AccountIDFromContext(r.Context())
		used, cap, err := accounts.UsageToday(r.Context(), accountID)
		if err != nil {
			Error(w, r, err)
			return
		}
		list, err := keys.ListAPIKeys(r.Context(), accountID)
		if err != nil {
			Error(w, r, err)
			return
		}
		drifts, err := cal.CalibrationDrifts(r.Context(), accountID)
		if err != nil {
			Error(w, r, err)
			return
		}
		v := dashboard.HomeView{Used: used, Cap: cap, BaseURL: SiteFromContext(r.Context()).BaseURL, Drifts: drifts,
			Notice: takePageNotice(w, r, "/")}
		for _, k := range list {
			if k.Active() {
				v.ActiveKeys++
			}
		}
		Render(w, r, http.StatusOK, dashboard.Home(PageOf(r, "Overview", "home"), v))
	})
}

package handlers

import (
	"net/http"
	"strconv"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardAuditSettings handles GET /settings/audit: the account's audit
// rate, with a confirmation after a save (?saved=1).
func DashboardAuditSettings(cal arbiter.CalibrationService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rate, err := cal.AuditRate(r.Context(), arbiter.AccountIDFromContext(r.Context()))
		if err != nil {
			Error(w, r, err)
			return
		}
		v := dashboard.AuditSettingsView{AuditRate: rate, Value: percentInput(rate)}
		if r.URL.Query().Get("saved") == "1" {
			v.Notice = "Saved: " + arbiter.FormatShare(rate) + " of the agent's confident answers go to a person, blind, from now on."
		}
		Render(w, r, http.StatusOK, dashboard.AuditSettings(PageOf(r, "Audit rate", "settings"), v))
	})
}

// percentInput writes a rate as the settings form's percentage: "5" for
// 0.05.
func percentInput(rate float64) string {
	return strconv.FormatFloat(float64(int64(rate*100000+0.5))/1000, 'f', -1, 64)
}

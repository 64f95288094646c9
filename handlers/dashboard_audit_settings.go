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

// DashboardAuditSettingsUpdate handles POST /settings/audit: it sets the account's
// audit rate, given in percent ("5", or "5%"), and goes back to the
// settings. A rate out of range is shown again on the page, with 400, and
// changes nothing.
func DashboardAuditSettingsUpdate(cal arbiter.CalibrationService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accountID := arbiter.AccountIDFromContext(r.Context())
		if err := r.ParseForm(); err != nil {
			Error(w, r, arbiter.Errorf(arbiter.EINVALID, "The form could not be read."))
			return
		}
		typed := r.PostForm.Get("audit_rate")
		rate, err := arbiter.ParseAuditRate(typed + "%")
		if len(typed) > 0 && typed[len(typed)-1] == '%' {
			rate, err = arbiter.ParseAuditRate(typed)
		}
		if err == nil {
			err = cal.SetAuditRate(r.Context(), accountID, rate)
		}
		if arbiter.ErrorCode(err) == arbiter.EINVALID {
			current, cerr := cal.AuditRate(r.Context(), accountID)
			if cerr != nil {
				Error(w, r, cerr)
				return
			}
			if len(typed) > 20 {
				typed = typed[:20]
			}
			v := dashboard.AuditSettingsView{AuditRate: current, Value: typed,
				Error: "The audit rate must be a percentage from 0 to 100, such as 5 or 0.5."}
			Render(w, r, http.StatusBadRequest, dashboard.AuditSettings(PageOf(r, "Audit rate", "settings"), v))
			return
		} else if err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/settings/audit?saved=1")
	})
}

// percentInput writes a rate as the settings form's percentage: "5" for
// 0.05.
func percentInput(rate float64) string {
	return strconv.FormatFloat(float64(int64(rate*100000+0.5))/1000, 'f', -1, 64)
}

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

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
		typed, err := saveAuditRate(r, cal, accountID)
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

// saveAuditRate sets the audit rate the form asks for, and returns it as
// typed.
func saveAuditRate(r *http.Request, cal arbiter.CalibrationService, accountID string) (typed string, err error) {
	typed, rate, err := auditRateForm(r)
	if err != nil {
		return typed, err
	}
	return typed, cal.SetAuditRate(r.Context(), accountID, rate)
}

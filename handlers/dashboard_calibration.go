package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardCalibration handles GET /calibration: the account's calibration
// report, filtered by the query as GET /v1/calibration is.
func DashboardCalibration(cal arbiter.CalibrationService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accountID := arbiter.AccountIDFromContext(r.Context())
		report, f, err := calibrationReport(r, cal, accountID)
		if err != nil {
			Error(w, r, err)
			return
		}
		rate, err := cal.AuditRate(r.Context(), accountID)
		if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, dashboard.Calibration(PageOf(r, "Calibration", "calibration"), dashboard.CalibrationView{
			Report: report, Filter: f, Action: "/calibration", AuditRate: rate, SettingsURL: "/settings/audit",
			TaskURL: "/tasks/", Now: now(),
		}))
	})
}

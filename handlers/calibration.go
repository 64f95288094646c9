package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// calibrationReport reads the account's report for the request's query
// (see arbiter.ParseCalibrationQuery).
func calibrationReport(r *http.Request, cal arbiter.CalibrationService, accountID string) (arbiter.CalibrationReport, arbiter.CalibrationFilter, error) {
	f, err := arbiter.ParseCalibrationQuery(r.URL.RawQuery)
	if err != nil {
		return arbiter.CalibrationReport{}, f, err
	}
	data, err := cal.CalibrationData(r.Context(), accountID, f)
	if err != nil {
		return arbiter.CalibrationReport{}, f, err
	}
	return arbiter.NewCalibrationReport(data, f.TargetErrorRate, f.Confidence), f, nil
}

// CalibrationGet handles GET /v1/calibration: the account's calibration
// report as JSON, the numbers of the dashboard's /calibration page for the
// same query.
func CalibrationGet(cal arbiter.CalibrationService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		report, _, err := calibrationReport(r, cal, arbiter.AccountIDFromContext(r.Context()))
		if err != nil {
			Error(w, r, err)
			return
		}
		JSON(w, http.StatusOK, report)
	})
}

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

// ReviewDemoCalibration handles GET /review/demo/calibration: the demo
// account's calibration report, over its seeded history, for anyone. The
// first visit stores the history (SeedDemoHistory).
func ReviewDemoCalibration(cal arbiter.CalibrationService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := cal.SeedDemoHistory(r.Context()); err != nil {
			Error(w, r, err)
			return
		}
		report, f, err := calibrationReport(r, cal, arbiter.DemoAccountID)
		if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, dashboard.Calibration(PageOf(r, "Demo calibration report", "review"), dashboard.CalibrationView{
			Report: report, Filter: f, Action: "/review/demo/calibration", Demo: true, Now: now(),
		}))
	})
}

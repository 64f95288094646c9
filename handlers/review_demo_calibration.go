package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

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

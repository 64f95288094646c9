package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
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

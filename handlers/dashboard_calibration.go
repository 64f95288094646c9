package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardCalibration handles GET /calibration: the account's calibration
// report, filtered by the query as GET /v1/calibration is. To those who
// may manage policies it offers to apply a certified threshold to the
// policy the report concerns (arbiter.OfferThreshold). To owners it shows
// the backtests: the form that starts one (when starter is set: the
// server has a verifiers file) and the latest runs in runs.
func DashboardCalibration(cal arbiter.CalibrationService, policies arbiter.PolicyService, runs arbiter.BacktestService,
	starter arbiter.BacktestStarter, now arbiter.Clock) http.Handler {
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
		v := dashboard.CalibrationView{
			Report: report, Filter: f, Action: "/calibration", AuditRate: rate, SettingsURL: "/settings/audit",
			TaskURL: "/tasks/", Now: now(),
		}
		if v.Offer, err = thresholdOffer(r, policies, accountID, report, f); err != nil {
			Error(w, r, err)
			return
		}
		if v.Backtests, err = backtestPanel(r, runs, starter, accountID, now); err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, dashboard.Calibration(PageOf(r, "Calibration", "calibration"), v))
	})
}

// thresholdOffer returns the offer to apply the report's certified
// threshold to its policy, or nil: when the person may not manage
// policies, or arbiter.OfferThreshold makes none.
func thresholdOffer(r *http.Request, policies arbiter.PolicyService, accountID string, report arbiter.CalibrationReport,
	f arbiter.CalibrationFilter) (*arbiter.ThresholdOffer, error) {
	s := arbiter.SessionFromContext(r.Context())
	taskType, ok := f.PolicyTaskType()
	if s == nil || !arbiter.Can(s.Role, arbiter.ActionManagePolicies) || !ok || report.Certification.Threshold == nil {
		return nil, nil
	}
	var current *float64
	switch p, err := policies.FindPolicy(r.Context(), accountID, taskType); {
	case err == nil:
		current = p.ConfidenceThreshold
	case arbiter.ErrorCode(err) != arbiter.ENOTFOUND:
		return nil, err
	}
	if offer, ok := arbiter.OfferThreshold(report.Certification, f, current); ok {
		return &offer, nil
	}
	return nil, nil
}

// DashboardCalibrationApply handles POST /calibration/apply: it sets the
// confidence_threshold of the policy the report of the form's query
// concerns to the form's threshold, and the policy's target to the
// report's, audited, when the report still certifies that threshold
// (arbiter.PolicyService.ApplyCertifiedThreshold), and shows the policy.
// A stale form (the certificate changed since the page was shown) or a
// threshold below where the evidence ends is refused with 409 and changes
// nothing.
func DashboardCalibrationApply(policies arbiter.PolicyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			Error(w, r, arbiter.Errorf(arbiter.EINVALID, "The form could not be read."))
			return
		}
		f, err := arbiter.ParseCalibrationQuery(r.PostForm.Get("query"))
		if err != nil {
			Error(w, r, err)
			return
		}
		taskType, ok := f.PolicyTaskType()
		if !ok {
			Error(w, r, arbiter.Errorf(arbiter.EINVALID, "A report of one source concerns no policy; open the report of its task type to apply a threshold."))
			return
		}
		v := strings.TrimSpace(r.PostForm.Get("threshold"))
		threshold, err := strconv.ParseFloat(v, 64)
		if err != nil || len(v) > 32 || !(threshold >= 0 && threshold <= 1) {
			Error(w, r, arbiter.FieldErrorf("threshold", "threshold must be a number from 0 to 1, such as 0.87."))
			return
		}
		accountID := arbiter.AccountIDFromContext(r.Context())
		if _, err := policies.ApplyCertifiedThreshold(r.Context(), accountID, f, threshold, ActorOf(r)); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/settings/policy?saved=1&task_type="+url.QueryEscape(taskType))
	})
}

package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter"
)

// agreementDays reads the report's window from the query's days: 1 to
// 365, 30 when left out.
func agreementDays(r *http.Request) (int, error) {
	for name := range r.URL.Query() {
		if name != "days" {
			return 0, arbiter.Errorf(arbiter.EINVALID, "Unknown parameter %q; the report takes days.", name)
		}
	}
	raw := r.URL.Query().Get("days")
	if raw == "" {
		return 30, nil
	}
	days, err := strconv.Atoi(raw)
	if err != nil || days < 1 || days > 365 {
		return 0, arbiter.FieldErrorf("days", "days must be a whole number from 1 to 365.")
	}
	return days, nil
}

// AgreementGet handles GET /v1/agreement: how much the account's
// reviewers agree on the tasks they voted on together over the last days
// (the query's days, 30 by default), each reviewer and the team.
func AgreementGet(agreement arbiter.AgreementService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		days, err := agreementDays(r)
		if err != nil {
			Error(w, r, err)
			return
		}
		since := arbiter.TimestampOf(now().Add(-time.Duration(days) * 24 * time.Hour))
		tasks, err := agreement.ListAgreementTasks(r.Context(), arbiter.AccountIDFromContext(r.Context()), since)
		if err != nil {
			Error(w, r, err)
			return
		}
		answers, err := agreement.ListGoldAnswers(r.Context(), arbiter.AccountIDFromContext(r.Context()), since)
		if err != nil {
			Error(w, r, err)
			return
		}
		report := arbiter.TeamAgreement(tasks)
		report.AddGold(answers)
		if report.Reviewers == nil {
			report.Reviewers = []arbiter.ReviewerAgreement{}
		}
		JSON(w, http.StatusOK, report)
	})
}

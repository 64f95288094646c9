package handlers

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter"
)

// agreementDays reads the report's window from the query's days, given
// at most once: 1 to 365, 30 when left out.
func agreementDays(r *http.Request) (int, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return 0, arbiter.Errorf(arbiter.EINVALID, "The query string could not be read; escape it as a URL query.")
	}
	for name, values := range q {
		if name != "days" {
			return 0, arbiter.Errorf(arbiter.EINVALID, "Unknown parameter %.64q; the report takes days.", name)
		} else if len(values) != 1 {
			return 0, arbiter.FieldErrorf("days", "days may be given once.")
		}
	}
	raw := q.Get("days")
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

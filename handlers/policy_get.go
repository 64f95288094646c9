package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// PolicyGet handles GET /v1/policies/{task_type}: the account's policy of
// the task type ("default" for the default policy), or 404.
func PolicyGet(policies arbiter.PolicyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := policies.FindPolicy(r.Context(), arbiter.AccountIDFromContext(r.Context()), r.PathValue("task_type"))
		if err != nil {
			Error(w, r, err)
			return
		}
		JSON(w, http.StatusOK, p)
	})
}

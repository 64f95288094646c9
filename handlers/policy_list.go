package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// PolicyList handles GET /v1/policies: the account's policies, by task
// type.
func PolicyList(policies arbiter.PolicyService) http.Handler {
	type response struct {
		Policies []arbiter.Policy `json:"policies"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		list, err := policies.ListPolicies(r.Context(), arbiter.AccountIDFromContext(r.Context()))
		if err != nil {
			Error(w, r, err)
			return
		}
		JSON(w, http.StatusOK, response{Policies: list})
	})
}

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// PolicyPut handles PUT /v1/policies/{task_type}: it replaces the
// account's policy of the task type with the body's and answers it. Tasks
// created before keep their values.
func PolicyPut(policies arbiter.PolicyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := ReadBody(r)
		if err != nil {
			Error(w, r, err)
			return
		}
		in, err := arbiter.ParsePolicy(r.PathValue("task_type"), body)
		if err != nil {
			Error(w, r, err)
			return
		}
		p, err := policies.PutPolicy(r.Context(), arbiter.AccountIDFromContext(r.Context()), in, ActorOf(r))
		if err != nil {
			Error(w, r, err)
			return
		}
		JSON(w, http.StatusOK, p)
	})
}

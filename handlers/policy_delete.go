package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// PolicyDelete handles DELETE /v1/policies/{task_type}: it removes the
// account's policy of the task type (204), or answers 404.
func PolicyDelete(policies arbiter.PolicyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if err := policies.DeletePolicy(ctx, arbiter.AccountIDFromContext(ctx), r.PathValue("task_type"), ActorOf(r)); err != nil {
			Error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

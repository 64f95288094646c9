package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// TaskExecutionClaim handles POST /v1/tasks/{id}/execution: it claims the
// execution of the task's approved action for the caller, who runs the
// action only when the answer is 200. A claim repeated with its claim_id
// is answered the same; another claim on the same task is 409
// already_executed.
func TaskExecutionClaim(executions arbiter.ExecutionService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := ReadBody(r)
		if err != nil {
			Error(w, r, err)
			return
		}
		c, err := arbiter.ParseExecutionClaim(body)
		if err != nil {
			Error(w, r, err)
			return
		}
		e, err := executions.ClaimExecution(r.Context(), arbiter.AccountIDFromContext(r.Context()), r.PathValue("id"), c, ActorOf(r))
		if err != nil {
			Error(w, r, err)
			return
		}
		JSON(w, http.StatusOK, e)
	})
}

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// TaskGet handles GET /v1/tasks/{id}: the account's task, or 404 for an id
// that is unknown, malformed or another account's.
func TaskGet(tasks arbiter.TaskService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		task, err := tasks.FindTaskByID(r.Context(), arbiter.AccountIDFromContext(r.Context()), r.PathValue("id"))
		if err != nil {
			Error(w, r, err)
			return
		}
		JSON(w, http.StatusOK, task)
	})
}

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// TaskCreate handles POST /v1/tasks: it validates the body, stores a pending
// task for the authenticated account and answers the Task object. created is
// called after each stored task, so an in-process worker can start at once.
func TaskCreate(tasks arbiter.TaskService, created func()) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := ReadBody(r)
		if err != nil {
			Error(w, r, err)
			return
		}
		in, err := arbiter.ParseTaskCreate(body)
		if err != nil {
			Error(w, r, err)
			return
		}
		task, err := tasks.CreateTask(r.Context(), arbiter.AccountIDFromContext(r.Context()), in)
		if err != nil {
			Error(w, r, err)
			return
		}
		if created != nil {
			created()
		}
		JSON(w, http.StatusOK, task)
	})
}

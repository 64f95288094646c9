package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// TaskList handles GET /v1/tasks: one page of the account's tasks, newest
// first, filtered by the query (see arbiter.ParseTaskListQuery), as
// {"tasks": [...], "has_more": bool}.
func TaskList(tasks arbiter.TaskService) http.Handler {
	type response struct {
		Tasks   []*arbiter.Task `json:"tasks"`
		HasMore bool            `json:"has_more"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := arbiter.ParseTaskListQuery(r.URL.RawQuery)
		if err != nil {
			Error(w, r, err)
			return
		}
		page, err := tasks.ListTasks(r.Context(), arbiter.AccountIDFromContext(r.Context()), f)
		if err != nil {
			Error(w, r, err)
			return
		}
		JSON(w, http.StatusOK, response{Tasks: page.Tasks, HasMore: page.HasMore})
	})
}

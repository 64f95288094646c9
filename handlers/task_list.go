package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// TaskList handles GET /v1/tasks: one page of the account's tasks, newest
// first, filtered by the query (see arbiter.ParseTaskListQuery), as
// {"tasks": [...], "has_more": bool}, with each gold task's gold_verdict.
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
		accountID := arbiter.AccountIDFromContext(r.Context())
		page, err := tasks.ListTasks(r.Context(), accountID, f)
		if err != nil {
			Error(w, r, err)
			return
		}
		if err := forAPIKey(r.Context(), tasks, accountID, page.Tasks...); err != nil {
			Error(w, r, err)
			return
		}
		JSON(w, http.StatusOK, response{Tasks: page.Tasks, HasMore: page.HasMore})
	})
}

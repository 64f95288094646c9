package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardTask handles GET /tasks/{id}: one task of the account with its
// attempts and context. Another account's task is 404, as in the API.
func DashboardTask(tasks arbiter.TaskService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		accountID := arbiter.AccountIDFromContext(r.Context())
		task, err := tasks.FindTaskByID(r.Context(), accountID, r.PathValue("id"))
		if err != nil {
			Error(w, r, err)
			return
		}
		// The page is the owners' and admins' (ActionViewTasks): they see
		// a gold task's verdict, which reviewers never do.
		if err := withGold(r.Context(), tasks, accountID, task); err != nil {
			Error(w, r, err)
			return
		}
		v := dashboard.TaskView{Task: task, Now: now()}
		if task.Status == arbiter.StatusHumanNeeded {
			v.DeskURL = SiteFromContext(r.Context()).ReviewHome() + "/tasks/" + task.ID
		}
		Render(w, r, http.StatusOK, dashboard.TaskDetail(PageOf(r, "Task "+task.ID, "tasks"), v))
	})
}

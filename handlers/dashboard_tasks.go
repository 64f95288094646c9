package handlers

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// TasksPageSize is how many tasks one page of the dashboard's list shows.
const TasksPageSize = 25

// DashboardTasks handles GET /tasks: the account's tasks, newest first,
// filtered by ?status= and ?source=, one page at a time; ?after= is the
// opaque cursor of the page to show. Filters that are not valid answer the
// page with the reason and 400.
func DashboardTasks(tasks arbiter.TaskService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		v := dashboard.TasksView{Status: q.Get("status"), Source: strings.TrimSpace(q.Get("source")), Now: now()}
		f := arbiter.TaskFilter{Status: v.Status, Source: v.Source, Limit: TasksPageSize}
		if after := q.Get("after"); after != "" {
			c, err := arbiter.ParseTaskCursor(after)
			if err != nil {
				tasksRefused(w, r, v, err)
				return
			}
			f.After = &c
			v.Newest = tasksURL(v.Status, v.Source, nil)
		}
		page, err := tasks.ListTasks(r.Context(), arbiter.AccountIDFromContext(r.Context()), f)
		if err != nil {
			tasksRefused(w, r, v, err)
			return
		}
		v.Tasks = page.Tasks
		if next := page.Next(); next != nil {
			v.Older = tasksURL(v.Status, v.Source, next)
		}
		Render(w, r, http.StatusOK, dashboard.Tasks(PageOf(r, "Tasks", "tasks"), v))
	})
}

// tasksRefused answers the task list when its filters or cursor are not
// valid: the page with the reason and 400. Any other error gets the error
// page.
func tasksRefused(w http.ResponseWriter, r *http.Request, v dashboard.TasksView, err error) {
	if StatusOf(err) != http.StatusBadRequest {
		Error(w, r, err)
		return
	}
	v.Error, v.Newest = arbiter.ErrorMessage(err), ""
	Render(w, r, http.StatusBadRequest, dashboard.Tasks(PageOf(r, "Tasks", "tasks"), v))
}

// tasksURL is the address of a page of the task list.
func tasksURL(status, source string, after *arbiter.TaskCursor) string {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if source != "" {
		q.Set("source", source)
	}
	if after != nil {
		q.Set("after", after.String())
	}
	if len(q) == 0 {
		return "/tasks"
	}
	return "/tasks?" + q.Encode()
}

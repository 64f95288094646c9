package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DemoTasks handles GET /demo/tasks: the curated demo queue, no auth.
func DemoTasks(demo arbiter.DemoService) http.Handler {
	type response struct {
		Tasks []*arbiter.DemoTask `json:"tasks"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tasks, err := demo.ListDemoTasks(r.Context())
		if err != nil {
			Error(w, r, err)
			return
		}
		JSON(w, http.StatusOK, response{Tasks: tasks})
	})
}

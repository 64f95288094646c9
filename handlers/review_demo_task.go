package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// ReviewDemoTask handles GET /review/demo/tasks/{id}: a demo task on the
// same desk as real ones, for anyone.
func ReviewDemoTask(demo arbiter.DemoService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		task, err := demo.FindDemoTask(r.Context(), r.PathValue("id"))
		if err != nil {
			Error(w, r, err)
			return
		}
		v, err := demoDesk(r, demo, anonID(w, r), task)
		if err != nil {
			Error(w, r, err)
			return
		}
		v.Notice, v.Now = takeNotice(w, r), now()
		Render(w, r, http.StatusOK, review.TaskPage(PageOf(r, "Demo: "+v.Heading(), "review"), v))
	})
}

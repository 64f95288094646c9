package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// demoDonePath is the page that ends the demo.
const demoDonePath = "/review/demo/done"

// ReviewDemoDone handles GET /review/demo/done: the end of the demo, with
// how many verdicts the visitor gave. It is a page of its own, so the
// address moves on from the last task.
func ReviewDemoDone(demo arbiter.DemoService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tasks, err := demo.ListDemoTasks(r.Context())
		if err != nil {
			Error(w, r, err)
			return
		}
		done, err := demo.CountDemoVerdicts(r.Context(), anonID(w, r))
		if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, review.DemoDone(PageOf(r, "Demo review", "review"), review.DemoDoneView{
			Done: done, Total: len(tasks), Notice: takeNotice(w, r),
		}))
	})
}

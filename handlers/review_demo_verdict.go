package handlers

import (
	"fmt"
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// ReviewDemoVerdict handles POST /review/demo/tasks/{id}: a visitor's
// verdict, recorded through the same service as POST /demo/verdicts under
// the visitor's anon_session_id cookie, and limited per client IP by limit
// with it. Demo tasks never change. The next demo task follows, or the end
// of the demo.
func ReviewDemoVerdict(demo arbiter.DemoService, limit arbiter.RateLimit, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		anon := anonID(w, r)
		id := r.PathValue("id")
		verdict, err := recordDemoVerdict(r, demo, limit, id, anon)
		if err != nil {
			deskError(w, r, err, func() (*arbiter.Task, error) { return demo.FindDemoTask(r.Context(), id) },
				func(t *arbiter.Task) (review.TaskView, error) { return demoDesk(r, demo, anon, t) }, now)
			return
		}

		recorded := fmt.Sprintf("Recorded %q.", verdict)
		place, err := demo.FindDemoPlace(r.Context(), id)
		if err != nil {
			Error(w, r, err)
			return
		}
		if place.Next == "" {
			setNotice(w, r, recorded)
			if IsHTMX(r) {
				w.Header().Set("HX-Redirect", demoDonePath)
				w.WriteHeader(http.StatusNoContent)
				return
			}
			redirect(w, r, demoDonePath)
			return
		}
		notice := recorded + " Here is the next demo task."
		if !IsHTMX(r) {
			setNotice(w, r, notice)
			redirect(w, r, "/review/demo/tasks/"+place.Next)
			return
		}
		task, err := demo.FindDemoTask(r.Context(), place.Next)
		if err != nil {
			Error(w, r, err)
			return
		}
		v, err := demoDesk(r, demo, anon, task)
		if err != nil {
			Error(w, r, err)
			return
		}
		v.Notice, v.Now = notice, now()
		w.Header().Set("HX-Push-Url", "/review/demo/tasks/"+task.ID)
		Render(w, r, http.StatusOK, review.TaskDesk(v))
	})
}

// recordDemoVerdict records the visitor's verdict on the demo task id, when
// the client's limit allows it, and returns the verdict.
func recordDemoVerdict(r *http.Request, demo arbiter.DemoService, limit arbiter.RateLimit, id, anon string) (string, error) {
	if err := allowClient(r, limit, errTooManyDemoVerdicts); err != nil {
		return "", err
	}
	verdict, rationale, err := verdictForm(r)
	if err != nil {
		return "", err
	}
	in := arbiter.DemoVerdictCreate{TaskID: id, Verdict: verdict, AnonSessionID: &anon}
	if rationale != "" {
		in.Rationale = &rationale
	}
	if _, err := demo.CreateDemoVerdict(r.Context(), in); err != nil {
		return "", err
	}
	return verdict, nil
}

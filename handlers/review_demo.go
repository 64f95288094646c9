package handlers

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// AnonCookie names the random id that ties a demo visitor's verdicts
// together.
const AnonCookie = "anon_session_id"

// ReviewDemo handles GET /review/demo: the demo starts at its first task.
func ReviewDemo(demo arbiter.DemoService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tasks, err := demo.ListDemoTasks(r.Context())
		if err != nil {
			Error(w, r, err)
			return
		} else if len(tasks) == 0 {
			Error(w, r, arbiter.Errorf(arbiter.ENOTFOUND, "The demo queue is empty."))
			return
		}
		anonID(w, r)
		redirect(w, r, "/review/demo/tasks/"+tasks[0].ID)
	})
}

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

// ReviewDemoVerdict handles POST /review/demo/tasks/{id}: a visitor's
// verdict, recorded through the same service as POST /demo/verdicts under
// the visitor's anon_session_id cookie, and limited per client IP by limit
// with it. Demo tasks never change. The next demo task follows, or the end
// of the demo.
func ReviewDemoVerdict(demo arbiter.DemoService, limit *arbiter.RateLimiter, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		anon := anonID(w, r)
		id := r.PathValue("id")
		err := allowClient(r, limit, errTooManyDemoVerdicts)
		var verdict, rationale string
		if err == nil {
			verdict, rationale, err = verdictForm(r)
		}
		if err == nil {
			in := arbiter.DemoVerdictCreate{TaskID: id, Verdict: verdict, AnonSessionID: &anon}
			if rationale != "" {
				in.Rationale = &rationale
			}
			_, err = demo.CreateDemoVerdict(r.Context(), in)
		}
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

// demoDesk places a demo task in the demo queue.
func demoDesk(r *http.Request, demo arbiter.DemoService, anon string, task *arbiter.Task) (review.TaskView, error) {
	place, err := demo.FindDemoPlace(r.Context(), task.ID)
	if err != nil {
		return review.TaskView{}, err
	}
	done, err := demo.CountDemoVerdicts(r.Context(), anon)
	if err != nil {
		return review.TaskView{}, err
	}
	v := review.TaskView{Task: task, Action: "/review/demo/tasks/" + task.ID, Demo: true, DemoDone: done}
	return placed(v, place, "/review/demo/tasks/"), nil
}

// anonID returns the visitor's anon_session_id, setting a new random one
// (HttpOnly, SameSite=Lax, Secure on https) when the request has none.
func anonID(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(AnonCookie); err == nil && validAnonID(c.Value) {
		return c.Value
	}
	id := arbiter.NewID("anon_", 16)
	http.SetCookie(w, &http.Cookie{
		Name: AnonCookie, Value: id, Path: "/", MaxAge: 365 * 24 * 60 * 60,
		HttpOnly: true, SameSite: http.SameSiteLaxMode,
		Secure: strings.HasPrefix(SiteFromContext(r.Context()).ReviewURL, "https://"),
	})
	r.AddCookie(&http.Cookie{Name: AnonCookie, Value: id})
	return id
}

// validAnonID accepts the ids anonID makes.
func validAnonID(s string) bool {
	if len(s) != len("anon_")+32 || !strings.HasPrefix(s, "anon_") {
		return false
	}
	for _, c := range s[len("anon_"):] {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

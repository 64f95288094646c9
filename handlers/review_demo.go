package handlers

import (
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

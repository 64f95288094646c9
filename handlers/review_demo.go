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
		v.Now = now()
		Render(w, r, http.StatusOK, review.TaskPage(PageOf(r, "Demo review", "review"), v))
	})
}

// ReviewDemoVerdict handles POST /review/demo/tasks/{id}: a visitor's
// verdict, recorded through the same service as POST /demo/verdicts under
// the visitor's anon_session_id cookie. Demo tasks never change. The next
// demo task follows, or the end of the demo.
func ReviewDemoVerdict(demo arbiter.DemoService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		anon := anonID(w, r)
		id := r.PathValue("id")
		verdict, rationale, err := verdictForm(r)
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

		tasks, err := demo.ListDemoTasks(r.Context())
		if err != nil {
			Error(w, r, err)
			return
		}
		ids := demoIDs(tasks)
		_, next, _ := neighbours(ids, id, "")
		if next == "" {
			done, err := demo.CountDemoVerdicts(r.Context(), anon)
			if err != nil {
				Error(w, r, err)
				return
			}
			Render(w, r, http.StatusOK, review.DemoDone(PageOf(r, "Demo review", "review"), review.DemoDoneView{Done: done, Total: len(tasks)}))
			return
		}
		if !IsHTMX(r) {
			redirect(w, r, "/review/demo/tasks/"+next)
			return
		}
		task, err := demo.FindDemoTask(r.Context(), next)
		if err != nil {
			Error(w, r, err)
			return
		}
		v, err := demoDesk(r, demo, anon, task)
		if err != nil {
			Error(w, r, err)
			return
		}
		v.Notice, v.Now = fmt.Sprintf("Recorded %q. Here is the next demo task.", verdict), now()
		w.Header().Set("HX-Push-Url", "/review/demo/tasks/"+next)
		Render(w, r, http.StatusOK, review.TaskDesk(v))
	})
}

// demoDesk places a demo task in the demo queue.
func demoDesk(r *http.Request, demo arbiter.DemoService, anon string, task *arbiter.Task) (review.TaskView, error) {
	tasks, err := demo.ListDemoTasks(r.Context())
	if err != nil {
		return review.TaskView{}, err
	}
	done, err := demo.CountDemoVerdicts(r.Context(), anon)
	if err != nil {
		return review.TaskView{}, err
	}
	v := review.TaskView{Task: task, Action: "/review/demo/tasks/" + task.ID, Demo: true, DemoDone: done, Total: len(tasks)}
	v.Prev, v.Next, v.Position = neighbours(demoIDs(tasks), task.ID, "/review/demo/tasks/")
	return v, nil
}

func demoIDs(tasks []*arbiter.DemoTask) []string {
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	return ids
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
		Secure: strings.HasPrefix(SiteFrom(r.Context()).ReviewURL, "https://"),
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

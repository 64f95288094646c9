package handlers

import (
	"fmt"
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// ReviewDecide handles POST /review/tasks/{id}: the signed-in reviewer's
// verdict on a task of the account. On success the next waiting task takes
// its place (in place for htmx, by redirect otherwise). A task decided
// already answers 409 with who decided it; nothing changes twice.
func ReviewDecide(tasks arbiter.TaskService, queue arbiter.QueueService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		id := r.PathValue("id")
		verdict, rationale, err := verdictForm(r)
		if err == nil {
			_, err = queue.DecideTask(r.Context(), s.AccountID, id, arbiter.HumanDecision{
				Verdict: verdict, Rationale: rationale, Reviewer: s.Email,
			})
		}
		if err != nil {
			deskError(w, r, err, func() (*arbiter.Task, error) { return tasks.FindTaskByID(r.Context(), s.AccountID, id) },
				func(t *arbiter.Task) (review.TaskView, error) { return deskView(r, queue, s.AccountID, t) }, now)
			return
		}

		notice := fmt.Sprintf("Decided %q. ", verdict)
		next, _, err := queue.ListHumanQueue(r.Context(), s.AccountID, 1)
		if err != nil {
			Error(w, r, err)
			return
		}
		if len(next) == 0 {
			if IsHTMX(r) {
				w.Header().Set("HX-Redirect", "/review")
				w.WriteHeader(http.StatusNoContent)
				return
			}
			redirect(w, r, "/review")
			return
		}
		if !IsHTMX(r) {
			redirect(w, r, "/review/tasks/"+next[0].ID)
			return
		}
		v, err := deskView(r, queue, s.AccountID, next[0])
		if err != nil {
			Error(w, r, err)
			return
		}
		v.Notice, v.Now = notice+"Here is the next task.", now()
		w.Header().Set("HX-Push-Url", "/review/tasks/"+next[0].ID)
		Render(w, r, http.StatusOK, review.TaskDesk(v))
	})
}

// verdictForm reads the verdict and the optional rationale of a posted
// verdict form.
func verdictForm(r *http.Request) (verdict, rationale string, err error) {
	if err := r.ParseForm(); err != nil {
		return "", "", arbiter.Errorf(arbiter.EINVALID, "The form could not be read.")
	}
	verdict, rationale = r.PostForm.Get("verdict"), r.PostForm.Get("rationale")
	switch {
	case verdict == "":
		return "", "", arbiter.Errorf(arbiter.EINVALID, "Pick a verdict.")
	case len([]rune(rationale)) > arbiter.MaxRationaleChars:
		return "", "", arbiter.Errorf(arbiter.EINVALID, "The rationale may be at most %d characters.", arbiter.MaxRationaleChars)
	}
	return verdict, rationale, nil
}

// deskError shows why a verdict was refused on the task's own desk, with
// the error's status. A task that cannot be shown (another account's, say)
// gets the error page instead. htmx requests get 200 so the desk is
// swapped in.
func deskError(w http.ResponseWriter, r *http.Request, cause error,
	find func() (*arbiter.Task, error), view func(*arbiter.Task) (review.TaskView, error), now arbiter.Clock) {
	status := StatusOf(cause)
	if status == http.StatusNotFound || status == http.StatusInternalServerError {
		Error(w, r, cause)
		return
	}
	task, err := find()
	if err != nil {
		Error(w, r, err)
		return
	}
	v, err := view(task)
	if err != nil {
		Error(w, r, err)
		return
	}
	v.Error, v.Now = arbiter.ErrorMessage(cause), now()
	if IsHTMX(r) {
		Render(w, r, http.StatusOK, review.TaskDesk(v))
		return
	}
	Render(w, r, status, review.TaskPage(PageOf(r, "Review", "review"), v))
}

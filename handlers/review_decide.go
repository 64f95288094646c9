package handlers

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// ReviewDecide handles POST /review/tasks/{id}: the signed-in reviewer's
// verdict on a task of the account. On success the oldest waiting task
// takes its place, with a confirmation of the decision: in place for htmx;
// otherwise by redirect, the confirmation following in a cookie. An htmx
// answer also triggers QueueChangedEvent, so the navigation's count follows
// at once. A task decided already answers 409 with who decided it; nothing
// changes twice.
//
// The next task is the oldest that nobody else holds (NextTask), reserved
// for the reviewer at once, so two reviewers deciding at the same moment go
// on to two different tasks; that one reservation is the one the next desk
// shows.
func ReviewDecide(tasks arbiter.TaskService, queue arbiter.QueueService, reservations arbiter.ReservationService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		id := r.PathValue("id")
		view, err := queueViewFrom(r)
		var verdict, rationale string
		var decidedTask *arbiter.Task
		var edited json.RawMessage
		var typed map[string]string
		if err == nil {
			verdict, rationale, err = verdictForm(r)
		}
		if err == nil && editsAction(r) {
			var t *arbiter.Task
			if t, err = tasks.FindTaskByID(r.Context(), s.AccountID, id); err == nil {
				edited, typed, err = actionEditForm(r, t, verdict)
			}
		}
		if err == nil {
			decidedTask, err = queue.DecideTask(r.Context(), s.AccountID, id, arbiter.HumanDecision{
				Verdict: verdict, Rationale: rationale, Reviewer: s.Email, ReviewerID: s.PersonID, Client: ClientOf(r),
				ActionDigest: r.PostForm.Get("action_digest"), EditedArgs: edited,
			})
		}
		if err != nil {
			deskError(w, r, err, func() (*arbiter.Task, error) { return tasks.FindTaskByID(r.Context(), s.AccountID, id) },
				func(t *arbiter.Task) (review.TaskView, error) {
					v, err := reservedDeskView(r, queue, reservations, t)
					// What the reviewer typed in the action's edit stays.
					v.EditValues, v.EditOpen = typed, typed != nil
					return v, err
				}, now)
			return
		}

		if IsHTMX(r) {
			w.Header().Set("HX-Trigger", QueueChangedEvent)
		}
		decided := fmt.Sprintf("Decided %q.", verdict)
		if a := decidedTask; a != nil && a.ApprovedAction != nil && a.ApprovedAction.Edited && len(edited) > 0 {
			decided = fmt.Sprintf("Decided %q, with the action edited.", verdict)
		}
		if decidedTask != nil && decidedTask.VotesOpen() {
			decided = fmt.Sprintf("Your vote, %q, is recorded.", verdict)
		}
		held, err := reservations.NextTask(r.Context(), s.AccountID, s.PersonID, s.ID, view)
		if err != nil {
			Error(w, r, err)
			return
		}
		openNextTask(w, r, tasks, queue, view, held, now, decided+" Here is the next task.",
			decided+" "+nothingElse(view, "Nothing else is waiting"))
	})
}

// QueueChangedEvent is the htmx event a response triggers when the human
// queue changed under the reviewer; the navigation's count refreshes on it.
const QueueChangedEvent = "queue-changed"

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
	setRetryAfter(w, cause)
	if IsHTMX(r) {
		Render(w, r, http.StatusOK, review.TaskDesk(v))
		return
	}
	Render(w, r, status, review.TaskPage(PageOf(r, v.Heading(), "review"), v))
}

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// ReviewTask handles GET /review/tasks/{id}: a task of the person's account
// on the reviewer's desk. Another account's task is 404, as in the API.
// The page reads one task with its context; its neighbours in the queue
// are ids and counts only.
//
// Opening a task that waits reserves it for the reviewer (or says who else
// holds it); the page extends the reservation every minute while it is
// open (ReviewReservation).
func ReviewTask(tasks arbiter.TaskService, queue arbiter.QueueService, reservations arbiter.ReservationService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		task, err := tasks.FindTaskByID(r.Context(), s.AccountID, r.PathValue("id"))
		if err != nil {
			Error(w, r, err)
			return
		}
		v, err := reservedDeskView(r, queue, reservations, task)
		if err != nil {
			Error(w, r, err)
			return
		}
		v.Notice, v.Now = takeNotice(w, r), now()
		Render(w, r, http.StatusOK, review.TaskPage(PageOf(r, v.Heading(), "review"), v))
	})
}

// deskView places task within the view of the account's queue, for the
// previous and next links, which skip the tasks someone other than the
// person holds and keep the view.
func deskView(r *http.Request, queue arbiter.QueueService, accountID, personID string, task *arbiter.Task, view arbiter.QueueView) (review.TaskView, error) {
	view.Voter = personID // the tasks they voted on wait for others
	place, err := queue.FindQueuePlace(r.Context(), accountID, task.ID, personID, view)
	if err != nil {
		return review.TaskView{}, err
	}
	v := review.TaskView{Task: task, Action: "/review/tasks/" + task.ID, Query: view.Query()}
	return placed(v, place, "/review/tasks/"), nil
}

// reservedDeskView is deskView, in the view the address names, for the
// signed-in reviewer, who reserves the task if it waits (for a decision or
// an audit) and nobody else holds it.
func reservedDeskView(r *http.Request, queue arbiter.QueueService, reservations arbiter.ReservationService, task *arbiter.Task) (review.TaskView, error) {
	s := arbiter.SessionFromContext(r.Context())
	view, err := queueViewFrom(r)
	if err != nil {
		return review.TaskView{}, err // before reserving: a bad address changes nothing
	}
	var held *arbiter.Reservation
	if task.InReviewQueue() { // waiting for a human or for an audit
		if held, err = reservations.ReserveTask(r.Context(), s.AccountID, task.ID, s.PersonID); err != nil {
			return review.TaskView{}, err
		}
	}
	return heldDeskView(r, queue, task, view, held)
}

// heldDeskView is deskView for the signed-in reviewer, with the task's
// reservation as it stands (held, nil when nobody holds it).
func heldDeskView(r *http.Request, queue arbiter.QueueService, task *arbiter.Task, view arbiter.QueueView, held *arbiter.Reservation) (review.TaskView, error) {
	s := arbiter.SessionFromContext(r.Context())
	v, err := deskView(r, queue, s.AccountID, s.PersonID, task, view)
	v.Reservation, v.Mine = held, held != nil && held.PersonID == s.PersonID
	if wait, voted := arbiter.VoterWaitOf(task, s.PersonID); voted {
		v.Voted = &wait
	}
	return v, err
}

// ReviewReservation handles POST /review/tasks/{id}/reservation, which an
// open desk sends every minute: it extends the reviewer's reservation and
// answers who holds the task now.
func ReviewReservation(reservations arbiter.ReservationService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		id := r.PathValue("id")
		held, err := reservations.ReserveTask(r.Context(), s.AccountID, id, s.PersonID)
		if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, review.ReservationStatus(review.TaskView{Action: "/review/tasks/" + id,
			Reservation: held, Mine: held != nil && held.PersonID == s.PersonID}))
	})
}

// ReviewSkip handles POST /review/tasks/{id}/skip: the reviewer lets the
// task go, it moves to the end of their order for this session, and the
// next task is reserved for them and opened: in place for htmx, as after a
// decision (the desk then puts the focus on it); otherwise by redirect.
func ReviewSkip(tasks arbiter.TaskService, queue arbiter.QueueService, reservations arbiter.ReservationService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		view, err := queueViewFrom(r)
		if err == nil {
			err = reservations.ReleaseTask(r.Context(), s.AccountID, r.PathValue("id"), s.PersonID, s.ID, true)
		}
		if err != nil {
			Error(w, r, err)
			return
		}
		next, err := reservations.NextTask(r.Context(), s.AccountID, s.PersonID, s.ID, view)
		if err != nil {
			Error(w, r, err)
			return
		}
		openNextTask(w, r, tasks, queue, view, next, now,
			"Skipped; it comes back after the rest. Here is the next task.",
			"Skipped. "+nothingElse(view, "Nothing else is waiting that nobody holds"))
	})
}

// openNextTask opens the task reserved for the reviewer after a decision
// or a skip, with notice: in place for htmx (the desk then puts the focus
// on it), otherwise by redirect, the notice following in a cookie. With no
// task (next nil) it goes back to the queue, the notice nothing.
func openNextTask(w http.ResponseWriter, r *http.Request, tasks arbiter.TaskService, queue arbiter.QueueService,
	view arbiter.QueueView, next *arbiter.Reservation, now arbiter.Clock, notice, nothing string) {
	if next == nil {
		setNotice(w, r, nothing)
		if IsHTMX(r) {
			w.Header().Set("HX-Redirect", "/review"+view.Query())
			w.WriteHeader(http.StatusNoContent)
			return
		}
		redirect(w, r, "/review"+view.Query())
		return
	}
	if !IsHTMX(r) {
		setNotice(w, r, notice)
		redirect(w, r, "/review/tasks/"+next.TaskID+view.Query())
		return
	}
	task, err := tasks.FindTaskByID(r.Context(), arbiter.SessionFromContext(r.Context()).AccountID, next.TaskID)
	if err != nil {
		Error(w, r, err)
		return
	}
	v, err := heldDeskView(r, queue, task, view, next)
	if err != nil {
		Error(w, r, err)
		return
	}
	v.Notice, v.Now = notice, now()
	w.Header().Set("HX-Push-Url", "/review/tasks/"+task.ID+view.Query())
	Render(w, r, http.StatusOK, review.TaskDesk(v))
}

// nothingElse ends the sentence that says the queue has nothing more for
// the reviewer: within the view, when it filters, as other tasks may wait
// outside it.
func nothingElse(view arbiter.QueueView, sentence string) string {
	if view.Filtered() {
		return sentence + " in this view."
	}
	return sentence + "."
}

// queueViewFrom returns the view of the queue that the request's address
// names (arbiter.QueueViewOf), or the EINVALID error of a bad one, which
// the desk checks before it reserves, releases or decides anything.
func queueViewFrom(r *http.Request) (arbiter.QueueView, error) {
	view := arbiter.QueueViewOf(r.URL.Query())
	return view, view.Validate()
}

// placed fills in v's links to its neighbours, pages under prefix with
// v's query, and its position.
func placed(v review.TaskView, p arbiter.QueuePlace, prefix string) review.TaskView {
	if p.Prev != "" {
		v.Prev = prefix + p.Prev + v.Query
	}
	if p.Next != "" {
		v.Next = prefix + p.Next + v.Query
	}
	v.Position, v.Total = p.Position, p.Total
	return v
}

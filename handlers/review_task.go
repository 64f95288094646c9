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
func ReviewTask(tasks arbiter.TaskService, queue arbiter.QueueService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		task, err := tasks.FindTaskByID(r.Context(), s.AccountID, r.PathValue("id"))
		if err != nil {
			Error(w, r, err)
			return
		}
		v, err := deskView(r, queue, s.AccountID, task)
		if err != nil {
			Error(w, r, err)
			return
		}
		v.Notice, v.Now = takeNotice(w, r), now()
		Render(w, r, http.StatusOK, review.TaskPage(PageOf(r, "Review", "review"), v))
	})
}

// deskView places task within the account's queue, for the previous and
// next links.
func deskView(r *http.Request, queue arbiter.QueueService, accountID string, task *arbiter.Task) (review.TaskView, error) {
	place, err := queue.FindQueuePlace(r.Context(), accountID, task.ID)
	if err != nil {
		return review.TaskView{}, err
	}
	return placed(review.TaskView{Task: task, Action: "/review/tasks/" + task.ID}, place, "/review/tasks/"), nil
}

// placed fills in v's links to its neighbours, pages under prefix, and its
// position.
func placed(v review.TaskView, p arbiter.QueuePlace, prefix string) review.TaskView {
	if p.Prev != "" {
		v.Prev = prefix + p.Prev
	}
	if p.Next != "" {
		v.Next = prefix + p.Next
	}
	v.Position, v.Total = p.Position, p.Total
	return v
}

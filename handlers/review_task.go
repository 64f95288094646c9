package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// ReviewTask handles GET /review/tasks/{id}: a task of the person's account
// on the reviewer's desk. Another account's task is 404, as in the API.
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
		v.Now = now()
		Render(w, r, http.StatusOK, review.TaskPage(PageOf(r, "Review", "review"), v))
	})
}

// deskView places task within the account's queue, for the previous and
// next links.
func deskView(r *http.Request, queue arbiter.QueueService, accountID string, task *arbiter.Task) (review.TaskView, error) {
	v := review.TaskView{Task: task, Action: "/review/tasks/" + task.ID}
	waiting, total, err := queue.ListHumanQueue(r.Context(), accountID, reviewQueueLimit)
	if err != nil {
		return v, err
	}
	ids := make([]string, len(waiting))
	for i, t := range waiting {
		ids[i] = t.ID
	}
	v.Prev, v.Next, v.Position = neighbours(ids, task.ID, "/review/tasks/")
	v.Total = total
	return v, nil
}

// neighbours returns the pages of the ids before and after id in ids, and
// id's position counted from 1 (0 when absent, and then the first id is
// next).
func neighbours(ids []string, id, prefix string) (prev, next string, position int) {
	for i, other := range ids {
		if other != id {
			continue
		}
		if i > 0 {
			prev = prefix + ids[i-1]
		}
		if i+1 < len(ids) {
			next = prefix + ids[i+1]
		}
		return prev, next, i + 1
	}
	if len(ids) > 0 {
		next = prefix + ids[0]
	}
	return "", next, 0
}

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// ReviewCount handles GET /review/count: how many of the account's tasks
// wait for the person, as text for the navigation's badge ("" when none):
// a task they voted on waits for others. A visitor who is not signed in
// gets 204.
func ReviewCount(queue arbiter.QueueService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		if s == nil || s.AccountID == "" || !arbiter.Can(s.Role, arbiter.ActionReview) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		total, err := queue.CountHumanQueue(r.Context(), s.AccountID, s.PersonID)
		if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, review.QueueCount(total))
	})
}

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// ReviewQueue handles GET /review/queue: the queue list alone, which the
// queue page polls. A visitor who is not signed in gets 204, which changes
// nothing on the page.
func ReviewQueue(queue arbiter.QueueService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		if s == nil || s.AccountID == "" || !arbiter.Can(s.Role, arbiter.ActionReview) {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		v, err := queueView(r, queue, s.AccountID, now())
		if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, review.QueueList(v))
	})
}

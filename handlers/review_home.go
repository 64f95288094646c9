package handlers

import (
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/review"
)

// errNoQueue answers a signed-in person who is a member of no account.
var errNoQueue = arbiter.Errorf(arbiter.ENOTFOUND, "You are not a member of any account, so no queue is yours. If someone invited you, open the link in their invitation mail.")

// welcomeParam, in the queue's address, welcomes a reviewer who has just
// joined the account.
const welcomeParam = "welcome"

// reviewQueueLimit bounds the tasks the queue page lists at once.
const reviewQueueLimit = 100

// ReviewHome handles GET /review: the account's queue for a signed-in
// person; for a visitor, the way to sign in or to the demo.
func ReviewHome(queue arbiter.QueueService, demo arbiter.DemoService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		if s == nil {
			tasks, err := demo.ListDemoTasks(r.Context())
			if err != nil {
				Error(w, r, err)
				return
			}
			Render(w, r, http.StatusOK, review.Welcome(PageOf(r, "Review queue", "review"), review.WelcomeView{
				SignInURL: SiteFromContext(r.Context()).SignInURL(SiteFromContext(r.Context()).ReviewHome()), DemoTasks: len(tasks),
			}))
			return
		}
		if s.AccountID == "" || !arbiter.Can(s.Role, arbiter.ActionReview) {
			Error(w, r, errNoQueue)
			return
		}
		v, err := queueView(r, queue, s.AccountID, now())
		if err != nil {
			Error(w, r, err)
			return
		}
		v.Notice = takeNotice(w, r)
		if r.URL.Query().Has(welcomeParam) {
			v.Welcome = s.AccountName
		}
		Render(w, r, http.StatusOK, review.QueuePage(PageOf(r, "Review queue", "review"), v))
	})
}

// queueView reads the account's queue as the address's view (task_type,
// source, touchpoint, order) shows it to the signed-in person: without the
// tasks they voted on, which wait for others.
func queueView(r *http.Request, queue arbiter.QueueService, accountID string, now time.Time) (review.QueueView, error) {
	view := arbiter.QueueViewOf(r.URL.Query())
	s := arbiter.SessionFromContext(r.Context())
	if s != nil {
		view.Voter = s.PersonID
	}
	tasks, total, err := queue.ListHumanQueue(r.Context(), accountID, view, reviewQueueLimit)
	v := review.QueueView{Tasks: tasks, Total: total, Now: now, View: view}
	if s != nil {
		v.Self = s.PersonID
	}
	return v, err
}

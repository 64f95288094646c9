package handlers_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
)

// countedReservations counts the calls that reserve a task (ReserveTask,
// NextTask) before passing them to the store.
type countedReservations struct {
	arbiter.ReservationService
	reserves atomic.Int64
}

func (c *countedReservations) ReserveTask(ctx context.Context, accountID, taskID, personID string) (*arbiter.Reservation, error) {
	c.reserves.Add(1)
	return c.ReservationService.ReserveTask(ctx, accountID, taskID, personID)
}

func (c *countedReservations) NextTask(ctx context.Context, accountID, personID, sessionID string, view arbiter.QueueView) (*arbiter.Reservation, error) {
	c.reserves.Add(1)
	return c.ReservationService.NextTask(ctx, accountID, personID, sessionID, view)
}

// TestReviewDecide_ReservesTheNextTaskOnce: a decision on the desk, by htmx
// or by a plain form, reserves the next task once (NextTask) and the htmx
// answer shows that reservation, not a second one; with nothing else
// waiting it reserves nothing more either.
func TestReviewDecide_ReservesTheNextTaskOnce(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			ctx := t.Context()
			store := dbtest.Open(t, dialect, db.Options{Now: steadyClock()})
			var tasks []*arbiter.Task
			for _, prompt := range []string{"First refund?", "Second refund?", "Third refund?"} {
				tasks = append(tasks, waitingTask(t, store, "ann@example.com", prompt, ""))
			}
			ann, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "ann@example.com", Email: "ann@example.com", EmailVerified: true})
			if err != nil {
				t.Fatal(err)
			}
			sess, _, err := store.CreateSession(ctx, ann.ID, arbiter.SignInEmail, arbiter.Client{})
			if err != nil {
				t.Fatal(err)
			}
			s := &arbiter.Session{ID: sess.ID, PersonID: ann.ID, Email: ann.Email, AccountID: tasks[0].AccountID, Role: arbiter.RoleOwner}
			counted := &countedReservations{ReservationService: store}
			decide := handlers.ReviewDecide(store, store, counted, time.Now)
			post := func(task *arbiter.Task, htmx bool) *httptest.ResponseRecorder {
				t.Helper()
				// Ann opened the task: she holds it.
				if _, err := store.ReserveTask(ctx, s.AccountID, task.ID, s.PersonID); err != nil {
					t.Fatal(err)
				}
				counted.reserves.Store(0)
				r := httptest.NewRequestWithContext(arbiter.NewContextWithSession(ctx, s), http.MethodPost, "/review/tasks/"+task.ID,
					strings.NewReader(url.Values{"verdict": {"approve"}}.Encode()))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if htmx {
					r.Header.Set("HX-Request", "true")
				}
				r.SetPathValue("id", task.ID)
				w := httptest.NewRecorder()
				decide.ServeHTTP(w, r)
				if n := counted.reserves.Load(); n != 1 {
					t.Errorf("deciding %s (htmx %t) reserved %d times, want once", task.ID, htmx, n)
				}
				return w
			}

			// htmx: the next task's desk comes in place, reserved for Ann.
			w := post(tasks[0], true)
			if w.Code != http.StatusOK || w.Header().Get("HX-Push-Url") != "/review/tasks/"+tasks[1].ID {
				t.Fatalf("htmx decide = %d, HX-Push-Url %q; want 200 and the second task", w.Code, w.Header().Get("HX-Push-Url"))
			}
			if !strings.Contains(w.Body.String(), "Reserved for you until") {
				t.Errorf("the next desk does not show Ann's reservation:\n%.3000s", w.Body.String())
			}
			// A plain form: redirected to the next task, reserved once.
			w = post(tasks[1], false)
			if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/review/tasks/"+tasks[2].ID {
				t.Fatalf("form decide = %d → %q; want 303 to the third task", w.Code, w.Header().Get("Location"))
			}
			// The last: nothing else waits, and nothing is reserved again.
			w = post(tasks[2], true)
			if w.Code != http.StatusNoContent || w.Header().Get("HX-Redirect") != "/review" {
				t.Fatalf("last decide = %d, HX-Redirect %q; want 204 to the queue", w.Code, w.Header().Get("HX-Redirect"))
			}
		})
	}
}

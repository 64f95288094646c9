package handlers

import (
	"fmt"
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardPerson handles GET /me: the signed-in person's own page, whatever
// their role or account: their address, their accounts, and "Sign out
// everywhere". idle is how long an unused session lasts, which it states.
func DashboardPerson(idle time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		Render(w, r, http.StatusOK, dashboard.Person(PageOf(r, "Your sign-in", ""), dashboard.PersonView{
			Email: s.Email, Method: s.Method, Accounts: s.Accounts, IdleFor: durationWords(idle),
		}))
	})
}

// durationWords writes a session limit for people: "14 days", "3 hours",
// "20 minutes".
func durationWords(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days", int(d/(24*time.Hour)))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours", int(d/time.Hour))
	}
	return fmt.Sprintf("%d minutes", int(d/time.Minute))
}

package handlers

import (
	"fmt"
	"net/http"
	"strconv"
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

// EverywhereSigner ends every session of the request's person.
type EverywhereSigner interface {
	// SignOutEverywhere ends every session of the request's person and
	// clears this one's cookie; it returns how many sessions it ended.
	SignOutEverywhere(w http.ResponseWriter, r *http.Request) (int, error)
}

// DashboardSignOutEverywhere handles POST /me/signout-everywhere: every
// session of the person ends, on every device, this one included, and the
// sign-out is recorded in the current account's audit log.
func DashboardSignOutEverywhere(sessions EverywhereSigner, audit arbiter.AuditService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := arbiter.SessionFromContext(r.Context())
		n, err := sessions.SignOutEverywhere(w, r)
		if err != nil {
			Error(w, r, err)
			return
		}
		if s.AccountID != "" {
			event := arbiter.NewSignOutAuditEvent(s, ClientOf(r))
			event.Detail = "everywhere: " + strconv.Itoa(n) + " sessions"
			if err := audit.RecordAuditEvent(r.Context(), event); err != nil {
				// The person is signed out either way; the log says why
				// the audit line is missing.
				LoggerFromContext(r.Context()).ErrorContext(r.Context(), "record sign-out everywhere", "error", err.Error())
			}
		}
		redirect(w, r, SiteFromContext(r.Context()).AppLink("/signin?"+SignedOutParam))
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

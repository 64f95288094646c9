package handlers

import (
	"net/http"
	"strconv"

	"github.com/arbiterhq/arbiter"
)

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

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// SignedOutParam is the query parameter with which sign-out sends a person
// to the sign-in page, which then says they are signed out.
const SignedOutParam = "signed_out"

// AuthSignOut handles POST /signout on the dashboard and POST
// /review/signout on the reviewer site (each page posts to its own origin):
// it ends the session in the store and clears the cookie, so a copy of the
// cookie no longer works either, on any host it was shared with, and
// records the sign-out in the account's audit log.
func AuthSignOut(sessions SessionKeeper, audit arbiter.AuditService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := sessions.SignOut(w, r); err != nil {
			Error(w, r, err)
			return
		}
		// A request without a live session ended nothing: nothing to record.
		if s := arbiter.SessionFromContext(r.Context()); s != nil && s.AccountID != "" {
			if err := audit.RecordAuditEvent(r.Context(), arbiter.NewSignOutAuditEvent(s, ClientOf(r))); err != nil {
				// The person is signed out either way; the log says why
				// the audit line is missing.
				LoggerFromContext(r.Context()).ErrorContext(r.Context(), "record sign-out", "error", err.Error())
			}
		}
		redirect(w, r, SiteFromContext(r.Context()).AppLink("/signin?"+SignedOutParam))
	})
}

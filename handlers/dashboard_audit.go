package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// AuditLogLimit is how many of the latest events the audit page shows.
const AuditLogLimit = 200

// DashboardAudit handles GET /audit: the account's sign-ins and key
// changes, newest first.
func DashboardAudit(audit arbiter.AuditService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		events, err := audit.ListAuditEvents(r.Context(), arbiter.AccountIDFromContext(r.Context()), AuditLogLimit)
		if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, dashboard.Audit(PageOf(r, "Audit log", "audit"), events, now()))
	})
}

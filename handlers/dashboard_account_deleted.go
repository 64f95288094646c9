package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardAccountDeleted handles GET /account/deleted: the deletion is
// confirmed, and the person learns which account their session moved to,
// or that their next sign-in starts a new one.
func DashboardAccountDeleted() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v dashboard.AccountDeletedView
		if s := arbiter.SessionFromContext(r.Context()); s != nil && s.AccountID != "" {
			v.NextAccount = s.AccountName
		}
		Render(w, r, http.StatusOK, dashboard.AccountDeleted(PageOf(r, "Account deleted", ""), v))
	})
}

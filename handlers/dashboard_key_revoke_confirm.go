package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardKeyRevokeConfirm handles GET /keys/{id}/revoke: it asks before
// revoking. With JavaScript the same question opens in a dialog on the keys
// page; this page is for browsers without it.
func DashboardKeyRevokeConfirm(keys arbiter.APIKeyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, err := findAccountKey(r, keys, r.PathValue("id"))
		if err != nil {
			Error(w, r, err)
			return
		}
		if !k.Active() {
			redirect(w, r, "/keys")
			return
		}
		Render(w, r, http.StatusOK, dashboard.KeyRevoke(PageOf(r, "Revoke "+k.Name, "keys"), k))
	})
}

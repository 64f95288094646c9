package handlers

import (
	"net/http"
	"net/url"

	"github.com/arbiterhq/arbiter"
)

// DashboardKeyRevoke handles POST /keys/{id}/revoke: it revokes the
// account's key, records who did in the same step, and goes back to the
// keys page. The API's key checker refuses the key within a second. Another
// account's key is 404.
func DashboardKeyRevoke(keys arbiter.APIKeyService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		k, err := keys.RevokeAPIKey(ctx, arbiter.AccountIDFromContext(ctx), r.PathValue("id"), ActorOf(r))
		switch arbiter.ErrorCode(err) {
		case "":
		case arbiter.ECONFLICT: // revoked already, perhaps in another tab
			redirect(w, r, "/keys")
			return
		default:
			Error(w, r, err)
			return
		}
		redirect(w, r, "/keys?revoked="+url.QueryEscape(k.ID))
	})
}

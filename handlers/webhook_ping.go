package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DashboardWebhookPing handles POST /webhooks/{id}/ping ("Send test
// event"): a ping to the account's endpoint, then back to its page.
func DashboardWebhookPing(hooks arbiter.WebhookService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		id := r.PathValue("id")
		if _, err := hooks.SendWebhookPing(ctx, arbiter.AccountIDFromContext(ctx), id); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/webhooks/"+id+"?notice=ping")
	})
}

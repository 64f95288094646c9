package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DashboardWebhookDelete handles POST /webhooks/{id}/delete: it deletes the
// account's endpoint and its delivery log, records it in the audit log,
// and goes back to the webhooks page.
func DashboardWebhookDelete(hooks arbiter.WebhookService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if err := hooks.DeleteWebhookEndpoint(ctx, arbiter.AccountIDFromContext(ctx), r.PathValue("id"), ActorOf(r)); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/webhooks?notice=deleted")
	})
}

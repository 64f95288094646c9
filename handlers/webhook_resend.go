package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DashboardWebhookResend handles POST /webhooks/{id}/messages/{msg}/resend:
// the message goes out again at once, with the same webhook-id, and the
// browser goes back to the endpoint's page.
func DashboardWebhookResend(hooks arbiter.WebhookService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		id := r.PathValue("id")
		if err := hooks.ResendWebhookMessage(ctx, arbiter.AccountIDFromContext(ctx), id, r.PathValue("msg")); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/webhooks/"+id+"?notice=resent")
	})
}

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardWebhookMessage handles GET /webhooks/{id}/messages/{msg}: one
// message of the account's endpoint with its payload and every attempt
// (time, status, latency, the first KiB of the answer).
func DashboardWebhookMessage(hooks arbiter.WebhookService, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		accountID, id := arbiter.AccountIDFromContext(ctx), r.PathValue("id")
		e, err := hooks.FindWebhookEndpoint(ctx, accountID, id)
		if err != nil {
			Error(w, r, err)
			return
		}
		m, attempts, err := hooks.FindWebhookMessage(ctx, accountID, id, r.PathValue("msg"))
		if err != nil {
			Error(w, r, err)
			return
		}
		Render(w, r, http.StatusOK, dashboard.WebhookMessage(PageOf(r, "Webhook message", "webhooks"),
			dashboard.WebhookMessageView{Endpoint: e, Message: m, Attempts: attempts, Now: now()}))
	})
}

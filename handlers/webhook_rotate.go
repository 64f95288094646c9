package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardWebhookRotate handles POST /webhooks/{id}/rotate: a new signing
// secret for the account's endpoint, the old one signing beside it for 24
// hours, recorded in the audit log; the page shows both.
func DashboardWebhookRotate(hooks arbiter.WebhookService, allowPrivate bool, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if _, err := hooks.RotateWebhookSecret(ctx, arbiter.AccountIDFromContext(ctx), r.PathValue("id"), ActorOf(r)); err != nil {
			Error(w, r, err)
			return
		}
		renderWebhook(w, r, hooks, http.StatusOK, dashboard.WebhookView{Reveal: true, AllowHTTP: allowPrivate, Now: now(),
			Notice: "The secret was rotated. Both secrets sign every message for the next 24 hours; switch your receiver to the new one."})
	})
}

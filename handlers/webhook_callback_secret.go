package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardCallbackSecretReveal handles POST /webhooks/callback-secret/reveal:
// the webhooks page with the account's callback secret shown. It is a POST
// so the secret never sits in an address, a history or a log.
func DashboardCallbackSecretReveal(hooks arbiter.WebhookService, allowPrivate bool, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		renderWebhooks(w, r, hooks, http.StatusOK, dashboard.WebhooksView{RevealCallback: true, AllowHTTP: allowPrivate, Now: now()})
	})
}

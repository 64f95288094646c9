package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardWebhookReveal handles POST /webhooks/{id}/reveal: the endpoint's
// page with its signing secrets shown, by a POST so they never sit in an
// address.
func DashboardWebhookReveal(hooks arbiter.WebhookService, allowPrivate bool, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		renderWebhook(w, r, hooks, http.StatusOK, dashboard.WebhookView{Reveal: true, AllowHTTP: allowPrivate, Now: now()})
	})
}

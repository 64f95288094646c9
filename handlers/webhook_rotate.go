package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DashboardWebhookRotate handles POST /webhooks/{id}/rotate: a new signing
// secret for the account's endpoint, the old one signing beside it for 24
// hours, recorded in the audit log. It leads (303) to the endpoint's page,
// which confirms it and reveals both secrets on request, so a reload
// rotates nothing again.
func DashboardWebhookRotate(hooks arbiter.WebhookService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		id := r.PathValue("id")
		if _, err := hooks.RotateWebhookSecret(ctx, arbiter.AccountIDFromContext(ctx), id, ActorOf(r)); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/webhooks/"+id+"?notice=rotated")
	})
}

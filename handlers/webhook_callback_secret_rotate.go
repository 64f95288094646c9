package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DashboardCallbackSecretRotate handles POST /webhooks/callback-secret/rotate:
// a new callback secret, the old one signing beside it for 24 hours,
// recorded in the audit log. It leads (303) to the webhooks page, which
// confirms it and reveals both secrets on request, so a reload rotates
// nothing again.
func DashboardCallbackSecretRotate(hooks arbiter.WebhookService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if _, err := hooks.RotateCallbackSecret(ctx, arbiter.AccountIDFromContext(ctx), ActorOf(r)); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/webhooks?notice=callback-rotated")
	})
}

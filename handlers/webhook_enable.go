package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// DashboardWebhookEnable handles POST /webhooks/{id}/enabled with enabled=1
// or 0: it enables (forgetting past failures) or disables the account's
// endpoint, records it in the audit log, and goes back to its page.
func DashboardWebhookEnable(hooks arbiter.WebhookService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		id := r.PathValue("id")
		var enabled bool
		switch r.PostFormValue("enabled") {
		case "1":
			enabled = true
		case "0":
		default:
			Error(w, r, arbiter.Errorf(arbiter.EINVALID, "enabled must be 1 or 0."))
			return
		}
		if _, err := hooks.SetWebhookEndpointEnabled(ctx, arbiter.AccountIDFromContext(ctx), id, enabled, ActorOf(r)); err != nil {
			Error(w, r, err)
			return
		}
		notice := "disabled"
		if enabled {
			notice = "enabled"
		}
		redirect(w, r, "/webhooks/"+id+"?notice="+notice)
	})
}

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardWebhookEdit handles POST /webhooks/{id}/edit: it changes the
// account's endpoint's URL, description and event types, records it in
// the audit log in the same step, and goes back to its page. A refused
// form comes back with what was typed and why, changing nothing.
func DashboardWebhookEdit(hooks arbiter.WebhookService, allowPrivate bool, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, id := r.Context(), r.PathValue("id")
		in, err := endpointForm(r)
		if err != nil {
			renderWebhook(w, r, hooks, http.StatusBadRequest, dashboard.WebhookView{Edit: &in, EditError: arbiter.ErrorMessage(err),
				AllowHTTP: allowPrivate, Now: now()})
			return
		}
		_, err = hooks.UpdateWebhookEndpoint(ctx, arbiter.AccountIDFromContext(ctx), id, in, allowPrivate, ActorOf(r))
		switch arbiter.ErrorCode(err) {
		case "":
			redirect(w, r, "/webhooks/"+id+"?notice=updated")
		case arbiter.EINVALID:
			renderWebhook(w, r, hooks, http.StatusBadRequest, dashboard.WebhookView{Edit: &in, EditError: arbiter.ErrorMessage(err),
				AllowHTTP: allowPrivate, Now: now()})
		default:
			Error(w, r, err)
		}
	})
}

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardWebhookCreate handles POST /webhooks: it adds an endpoint with
// the URL, description and event types, records it in the audit log in
// the same step, and sends the browser to the endpoint's page (post,
// redirect, get: a reload adds nothing), where "Reveal secret" shows its
// signing secret. A refused form comes back with what was typed and why.
func DashboardWebhookCreate(hooks arbiter.WebhookService, allowPrivate bool, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		in, err := endpointForm(r)
		if err != nil {
			renderWebhooks(w, r, hooks, StatusOf(err), dashboard.WebhooksView{Form: in, AllowHTTP: allowPrivate, Now: now(),
				Error: arbiter.ErrorMessage(err)})
			return
		}
		e, err := hooks.CreateWebhookEndpoint(ctx, arbiter.AccountIDFromContext(ctx), in, allowPrivate, ActorOf(r))
		switch arbiter.ErrorCode(err) {
		case "":
		case arbiter.EINVALID, arbiter.ECONFLICT:
			renderWebhooks(w, r, hooks, StatusOf(err), dashboard.WebhooksView{Form: in, AllowHTTP: allowPrivate, Now: now(),
				Error: arbiter.ErrorMessage(err)})
			return
		default:
			Error(w, r, err)
			return
		}
		redirect(w, r, "/webhooks/"+e.ID+"?notice=created")
	})
}

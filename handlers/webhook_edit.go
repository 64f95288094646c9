package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// errNoEventTypes refuses an endpoint form with no event type ticked.
var errNoEventTypes = arbiter.Errorf(arbiter.EINVALID, "Choose at least one event type.")

// endpointForm reads an endpoint's form: its URL, description and event
// types, or errNoEventTypes when none is ticked.
func endpointForm(r *http.Request) (arbiter.WebhookEndpointInput, error) {
	in := arbiter.WebhookEndpointInput{
		URL: r.PostFormValue("url"), Description: r.PostFormValue("description"), EventTypes: r.PostForm["event_types"],
	}
	if len(in.EventTypes) == 0 {
		return in, errNoEventTypes
	}
	return in, nil
}

// DashboardWebhookEdit handles POST /webhooks/{id}/edit: it changes the
// account's endpoint's URL, description and event types, records it in
// the audit log in the same step, and goes back to its page. A refused
// form comes back with what was typed and why, changing nothing.
func DashboardWebhookEdit(hooks arbiter.WebhookService, allowPrivate bool, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, id := r.Context(), r.PathValue("id")
		in, err := endpointForm(r)
		if err == nil {
			_, err = hooks.UpdateWebhookEndpoint(ctx, arbiter.AccountIDFromContext(ctx), id, in, allowPrivate, ActorOf(r))
		}
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

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// webhookNotices are the confirmations a redirect to /webhooks may ask for
// by name (?notice=), so no text of the address reaches the page.
var webhookNotices = map[string]string{
	"deleted":          "The endpoint was deleted, with its delivery log.",
	"callback-rotated": "The callback secret was rotated. Both secrets sign every callback for the next 24 hours; reveal them to switch your receiver to the new one.",
}

// DashboardWebhooks handles GET /webhooks: the account's endpoints, the
// form that adds one and the callback secret, hidden until revealed.
func DashboardWebhooks(hooks arbiter.WebhookService, allowPrivate bool, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		renderWebhooks(w, r, hooks, http.StatusOK, dashboard.WebhooksView{
			Notice: webhookNotices[r.URL.Query().Get("notice")], AllowHTTP: allowPrivate, Now: now(),
		})
	})
}

// renderWebhooks answers the webhooks page as v describes it, with the
// account's endpoints and callback secret read afresh.
func renderWebhooks(w http.ResponseWriter, r *http.Request, hooks arbiter.WebhookService, status int, v dashboard.WebhooksView) {
	ctx := r.Context()
	accountID := arbiter.AccountIDFromContext(ctx)
	list, err := hooks.ListWebhookEndpoints(ctx, accountID)
	if err != nil {
		Error(w, r, err)
		return
	}
	if v.Callback == nil {
		if v.Callback, err = hooks.FindCallbackSecret(ctx, accountID); err != nil {
			Error(w, r, err)
			return
		}
	}
	v.Endpoints = list
	Render(w, r, status, dashboard.Webhooks(PageOf(r, "Webhooks", "webhooks"), v))
}

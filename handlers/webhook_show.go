package handlers

import (
	"net/http"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardWebhook handles GET /webhooks/{id}: the account's endpoint with
// its latest arbiter.WebhookLogMessages messages, filtered by ?status=;
// another account's endpoint is 404. ?notice= names a confirmation to show.
func DashboardWebhook(hooks arbiter.WebhookService, allowPrivate bool, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		v := dashboard.WebhookView{Status: q.Get("status"), AllowHTTP: allowPrivate, Now: now()}
		switch q.Get("notice") {
		case "created":
			v.Notice = "The endpoint is added. Press Reveal secret for its signing secret, and verify every message with it (docs/webhooks.md has a receiver to start from)."
		case "rotated":
			v.Notice = "The secret was rotated. Both secrets sign every message for the next 24 hours; reveal them and switch your receiver to the new one."
		case "updated":
			v.Notice = "The endpoint is changed; messages not yet delivered go to its URL as it is now."
		case "ping":
			v.Notice = "A test event (ping) is on its way; it shows in the log below within seconds."
		case "resent":
			v.Notice = "The message is on its way again, with the same webhook-id."
		case "enabled":
			v.Notice = "The endpoint is enabled; the messages held for it go out now, oldest first."
		case "disabled":
			v.Notice = "The endpoint is disabled; its events are held until it is enabled again."
		case "resent-failed":
			n, _ := strconv.Atoi(q.Get("n"))
			v.Notice = strconv.Itoa(max(n, 0)) + " failed messages are on their way again."
		}
		renderWebhook(w, r, hooks, http.StatusOK, v)
	})
}

// renderWebhook answers the page of the endpoint named by the path, as v
// describes it, with the endpoint and its log read afresh.
func renderWebhook(w http.ResponseWriter, r *http.Request, hooks arbiter.WebhookService, status int, v dashboard.WebhookView) {
	ctx := r.Context()
	accountID, id := arbiter.AccountIDFromContext(ctx), r.PathValue("id")
	e, err := hooks.FindWebhookEndpoint(ctx, accountID, id)
	if err != nil {
		Error(w, r, err)
		return
	}
	if v.Messages, err = hooks.ListWebhookMessages(ctx, accountID, id, v.Status, arbiter.WebhookLogMessages); err != nil {
		Error(w, r, err)
		return
	}
	v.Endpoint = e
	if v.Since == "" {
		v.Since = v.Now.UTC().Add(-24 * time.Hour).Format(dashboard.SinceLayout)
	}
	Render(w, r, status, dashboard.Webhook(PageOf(r, "Webhook endpoint", "webhooks"), v))
}

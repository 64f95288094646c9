package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// DashboardWebhookResendFailed handles POST /webhooks/{id}/resend-failed
// with since (a UTC date and time, as a datetime-local input sends it): the
// endpoint's failed messages created since then go out again.
func DashboardWebhookResendFailed(hooks arbiter.WebhookService, allowPrivate bool, now arbiter.Clock) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		accountID, id := arbiter.AccountIDFromContext(ctx), r.PathValue("id")
		raw := strings.TrimSpace(r.PostFormValue("since"))
		since, err := time.Parse(dashboard.SinceLayout, raw)
		if err != nil {
			since, err = time.Parse(dashboard.SinceLayout+":05", raw)
		}
		if err != nil {
			renderWebhook(w, r, hooks, http.StatusBadRequest, dashboard.WebhookView{AllowHTTP: allowPrivate, Now: now(),
				Error: "Give the time to resend from as a date and time, such as 2026-01-31T09:00 (UTC)."})
			return
		}
		n, err := hooks.ResendFailedWebhookMessages(ctx, accountID, id, arbiter.TimestampOf(since))
		if err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, "/webhooks/"+id+"?notice=resent-failed&n="+strconv.Itoa(n))
	})
}

package handlers

import (
	"net/http"
	"strconv"

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
		since, err := resendSinceForm(r)
		if err != nil {
			renderWebhook(w, r, hooks, http.StatusBadRequest, dashboard.WebhookView{AllowHTTP: allowPrivate, Now: now(),
				Error: arbiter.ErrorMessage(err)})
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

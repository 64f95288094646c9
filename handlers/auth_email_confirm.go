package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// AuthEmailConfirm handles GET /signin/email/confirm?token=…, the page an
// e-mailed link opens: a button that signs in by POST. Opening the link
// uses nothing up, so mail scanners that fetch links are harmless.
func AuthEmailConfirm(logins arbiter.LoginTokenService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The token is in this page's address: never send it on.
		w.Header().Set("Referrer-Policy", "no-referrer")
		token := r.URL.Query().Get("token")
		next := SiteFrom(r.Context()).SafeNext(r.URL.Query().Get("next"))
		status, msg := http.StatusOK, ""
		if err := logins.CheckLoginToken(r.Context(), token); err != nil {
			if StatusOf(err) == http.StatusInternalServerError {
				Error(w, r, err)
				return
			}
			status, msg, token = StatusOf(err), arbiter.ErrorMessage(err), ""
		}
		Render(w, r, status, dashboard.EmailConfirm(PageOf(r, "Finish signing in", ""), token, next, msg))
	})
}

package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
	"github.com/arbiterhq/arbiter/views/layouts"
)

// AuthEmailConfirm handles GET /signin/email/confirm?token=…, the page an
// e-mailed link opens: a button that signs in by POST, naming the address
// it signs in as. Opening the link uses nothing up, so mail scanners that
// fetch links are harmless.
func AuthEmailConfirm(logins arbiter.LoginTokenService) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The token is in this page's address: never send it on, not even
		// to this origin (the layout's meta tag says so too); requests
		// from the page name its origin only.
		w.Header().Set("Referrer-Policy", layouts.SecretAddressReferrer)
		token := r.URL.Query().Get("token")
		next := SiteFromContext(r.Context()).SafeNext(r.URL.Query().Get("next"))
		email, err := logins.CheckLoginToken(r.Context(), token)
		if err != nil {
			linkUnusable(w, r, err)
			return
		}
		p := PageOf(r, "Finish signing in", "")
		p.SecretAddress = true
		Render(w, r, http.StatusOK, dashboard.EmailConfirm(p, dashboard.EmailConfirmView{Token: token, Next: next, Email: email}))
	})
}

// linkUnusable answers a sign-in link that cannot be used: the page that
// says so and offers a new one, or the error page for a failure of the
// store.
func linkUnusable(w http.ResponseWriter, r *http.Request, err error) {
	if StatusOf(err) == http.StatusInternalServerError {
		Error(w, r, err)
		return
	}
	w.Header().Set("Referrer-Policy", layouts.SecretAddressReferrer)
	p := PageOf(r, "This link cannot be used", "")
	p.SecretAddress = true
	Render(w, r, StatusOf(err), dashboard.EmailLinkUnusable(p, arbiter.ErrorMessage(err)))
}

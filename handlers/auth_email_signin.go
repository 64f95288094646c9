package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// AuthEmailSignIn handles POST /signin/email/confirm: it uses the link's
// token up, creates the person (and their account) on a first sign-in, starts a session and
// goes on. A used or expired token signs nobody in.
func AuthEmailSignIn(logins arbiter.LoginTokenService, identities arbiter.IdentityService, sessions SessionKeeper) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next := SiteFromContext(r.Context()).SafeNext(r.PostFormValue("next"))
		email, err := logins.RedeemLoginToken(r.Context(), r.PostFormValue("token"))
		if err != nil {
			linkUnusable(w, r, err)
			return
		}
		person, err := identities.SignInWithIdentity(r.Context(), arbiter.ExternalIdentity{
			Provider: arbiter.SignInEmail, Subject: email, Email: email, EmailVerified: true,
		})
		if err != nil {
			Error(w, r, err)
			return
		}
		if err := sessions.SignIn(w, r, person.ID, arbiter.SignInEmail); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, next)
	})
}

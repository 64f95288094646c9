package handlers

import (
	"crypto/subtle"
	"net/http"
	"net/url"

	"github.com/arbiterhq/arbiter"
)

var (
	errOAuthExpired = arbiter.Errorf(arbiter.EUNAUTHORIZED, "The sign-in could not be checked: it was started in another browser, or took too long. Try again.")
	errOAuthState   = arbiter.Errorf(arbiter.EUNAUTHORIZED, "The sign-in could not be verified: the answer does not belong to the sign-in this browser started. Try again.")
)

// AuthOAuthCallback handles GET /auth/{provider}/callback, where the
// provider sends the browser back. The state must match the one this browser
// was sent off with; then the code is exchanged, the person fetched, and a
// session started. Anything else ends on an error page without a session.
func AuthOAuthCallback(providers []OAuthProvider, identities arbiter.IdentityService, sessions SessionKeeper) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := findProvider(providers, r)
		if !ok {
			Error(w, r, ErrNoPage)
			return
		}
		q := r.URL.Query()
		st, err := sessions.TakeOAuthState(w, r)
		if err != nil {
			Error(w, r, errOAuthExpired)
			return
		}
		if st.Provider != p.Name || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(st.State)) != 1 {
			Error(w, r, errOAuthState)
			return
		}
		if e := q.Get("error"); e != "" {
			msg := "%s did not sign you in (%s). Try again, or sign in another way."
			if e == "access_denied" {
				msg = "You did not allow Arbiter to use your %s account (%s). Sign in another way, or try again."
			}
			Error(w, r, arbiter.Errorf(arbiter.EUNAUTHORIZED, msg, p.Label, e))
			return
		}
		fail := func(step string, err error) {
			LoggerFromContext(r.Context()).WarnContext(r.Context(), "sign-in failed", "provider", p.Name, "step", step, "error", err.Error())
			Error(w, r, arbiter.Errorf(arbiter.EUNAUTHORIZED, "%s did not confirm who you are. Try again, or sign in another way.", p.Label))
		}
		provider, err := p.Load()
		if err != nil {
			fail("load", err)
			return
		}
		sess, err := provider.UnmarshalSession(st.Session)
		if err != nil {
			fail("session", err)
			return
		}
		// Only the code goes on: other parameters of the callback, such as
		// redirect_uri, are the provider's business, not the browser's.
		if _, err := sess.Authorize(provider, url.Values{"code": {q.Get("code")}}); err != nil {
			fail("exchange", err)
			return
		}
		user, err := provider.FetchUser(sess)
		if err != nil {
			fail("user", err)
			return
		}
		person, err := identities.SignInWithIdentity(r.Context(), p.Identity(user))
		if err != nil {
			Error(w, r, err)
			return
		}
		if err := sessions.SignIn(w, r, person.ID, p.Name); err != nil {
			Error(w, r, err)
			return
		}
		redirect(w, r, st.Next)
	})
}

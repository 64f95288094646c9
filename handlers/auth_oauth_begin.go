package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// findProvider returns the provider named by the route's {provider}.
func findProvider(providers []OAuthProvider, r *http.Request) (OAuthProvider, bool) {
	name := r.PathValue("provider")
	for _, p := range providers {
		if p.Name == name {
			return p, true
		}
	}
	return OAuthProvider{}, false
}

var errProviderUnavailable = arbiter.Errorf(arbiter.EUNAVAILABLE, "The identity provider cannot be reached right now. Try again in a moment, or sign in with an e-mail link.")

// AuthOAuthBegin handles GET /auth/{provider}: it remembers a random state
// in a short-lived cookie and sends the browser to the provider.
func AuthOAuthBegin(providers []OAuthProvider, sessions SessionKeeper) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := findProvider(providers, r)
		if !ok {
			Error(w, r, ErrNoPage)
			return
		}
		provider, err := p.Load()
		if err != nil {
			LoggerFromContext(r.Context()).WarnContext(r.Context(), "load identity provider", "provider", p.Name, "error", err.Error())
			Error(w, r, errProviderUnavailable)
			return
		}
		state := arbiter.NewSecretToken()
		sess, err := provider.BeginAuth(state)
		if err != nil {
			LoggerFromContext(r.Context()).WarnContext(r.Context(), "begin sign-in", "provider", p.Name, "error", err.Error())
			Error(w, r, errProviderUnavailable)
			return
		}
		authURL, err := sess.GetAuthURL()
		if err != nil {
			Error(w, r, err)
			return
		}
		err = sessions.SaveOAuthState(w, r, OAuthState{
			Provider: p.Name, State: state, Session: sess.Marshal(),
			Next: SiteFromContext(r.Context()).SafeNext(r.URL.Query().Get("next")),
		})
		if err != nil {
			Error(w, r, err)
			return
		}
		http.Redirect(w, r, authURL, http.StatusFound)
	})
}

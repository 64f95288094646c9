package handlers

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/markbates/goth"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// SessionKeeper is what the sign-in handlers need of the session layer;
// web.Sessions implements it.
type SessionKeeper interface {
	// SignIn starts a session for the person and sets its cookie; the
	// store records the sign-in in the audit log.
	SignIn(w http.ResponseWriter, r *http.Request, personID, method string) error
	// SwitchAccount makes accountID the current account of the request's
	// session. Returns ErrNotAllowed when its person is not a member.
	SwitchAccount(r *http.Request, accountID string) error
	// SignOut ends the request's session, if any, and clears its cookie.
	SignOut(w http.ResponseWriter, r *http.Request) error
	// SaveOAuthState keeps an OAuth flow's state in a short-lived cookie.
	SaveOAuthState(w http.ResponseWriter, r *http.Request, st OAuthState) error
	// TakeOAuthState returns the flow's state and clears it, so it serves
	// once. It fails when there is none.
	TakeOAuthState(w http.ResponseWriter, r *http.Request) (OAuthState, error)
}

// OAuthState is what a sign-in with an identity provider must remember
// between leaving for the provider and coming back.
type OAuthState struct {
	Provider string // the provider's route name
	State    string // the random state sent to the provider
	Session  string // goth's marshalled session
	Next     string // where to go after signing in
}

// OAuthProvider is an identity provider offered on the sign-in page.
type OAuthProvider struct {
	// Name is the provider's route name, /auth/{Name}, and its sign-in
	// method: arbiter.SignInGitHub, SignInGoogle or SignInOIDC.
	Name string
	// Label names the provider on the button.
	Label string
	// Load returns the goth provider that runs the OAuth flow. It may
	// fail, for an OpenID Connect issuer whose discovery document cannot
	// be read yet.
	Load func() (goth.Provider, error)
	// Identity reads the person goth fetched, deciding whether the
	// provider vouches for the e-mail address.
	Identity func(goth.User) arbiter.ExternalIdentity
}

// providerButtons lists the providers for the sign-in page.
func providerButtons(providers []OAuthProvider, next string) []dashboard.Provider {
	var buttons []dashboard.Provider
	for _, p := range providers {
		u := "/auth/" + p.Name
		if next != "" && next != "/" {
			u += "?next=" + url.QueryEscape(next)
		}
		buttons = append(buttons, dashboard.Provider{Name: p.Name, Label: p.Label, URL: u})
	}
	return buttons
}

// AuthSignIn handles GET /signin: the identity providers configured and the
// e-mail link form. A signed-in person goes straight on.
func AuthSignIn(providers []OAuthProvider) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next := SiteFromContext(r.Context()).SafeNext(r.URL.Query().Get("next"))
		if arbiter.SessionFromContext(r.Context()) != nil {
			redirect(w, r, next)
			return
		}
		Render(w, r, http.StatusOK, dashboard.SignIn(PageOf(r, "Sign in", ""), dashboard.SignInView{
			Providers: providerButtons(providers, next), Next: next, Email: prefilledEmail(r),
			SignedOut: r.URL.Query().Has(SignedOutParam),
			DemoURL:   SiteFromContext(r.Context()).ReviewLink("/review/demo"),
		}))
	})
}

// prefilledEmail is the address the sign-in page's ?email= offers (an
// invitation's page links to the sign-in with the invited address), ""
// for one that is not an address.
func prefilledEmail(r *http.Request) string {
	email := strings.TrimSpace(r.URL.Query().Get("email"))
	if len(email) > 254 || !strings.Contains(email, "@") {
		return ""
	}
	return email
}

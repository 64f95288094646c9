package web

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/markbates/goth"
	"github.com/markbates/goth/providers/github"
	"github.com/markbates/goth/providers/google"
	"github.com/markbates/goth/providers/openidConnect"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/config"
	"github.com/arbiterhq/arbiter/handlers"
)

// ConfigureSignIn sets the router's origins and what signing in needs, from
// the configuration: sessions keyed by ARBITER_SESSION_SECRET or else the
// store's generated secret, the identity providers configured, and the
// mailer of sign-in links (the process's one mailer, built by its command).
func (rt *Router) ConfigureSignIn(ctx context.Context, cfg config.Config, store arbiter.SessionService, mailer arbiter.LoginMailer) error {
	secret := cfg.SessionSecret
	if secret == "" {
		var err error
		if secret, err = store.SessionSecret(ctx); err != nil {
			return err
		}
	}
	rt.Site = handlers.Site{BaseURL: cfg.BaseURL, AppURL: cfg.AppURL, ReviewURL: cfg.ReviewURL}
	rt.Sessions = NewSessions(store, secret, strings.HasPrefix(cfg.AppURL, "https://"), cfg.CookieDomain)
	rt.Sessions.Idle = cfg.SessionIdleTimeout
	rt.Providers = Providers(cfg)
	rt.Mailer = mailer
	return nil
}

// Providers returns the identity providers the configuration enables, in
// the order of their buttons. Each is built for this server alone: goth's
// global registry and gothic's global cookie store are not used.
func Providers(cfg config.Config) []handlers.OAuthProvider {
	callback := func(name string) string { return cfg.AppURL + "/auth/" + name + "/callback" }
	var ps []handlers.OAuthProvider
	if cfg.GitHub.Configured() {
		ps = append(ps, GitHubProvider(github.New(cfg.GitHub.ClientID, cfg.GitHub.ClientSecret, callback(arbiter.SignInGitHub), "user:email")))
	}
	if cfg.Google.Configured() {
		p := google.New(cfg.Google.ClientID, cfg.Google.ClientSecret, callback(arbiter.SignInGoogle), "openid", "email", "profile")
		ps = append(ps, handlers.OAuthProvider{
			Name: arbiter.SignInGoogle, Label: "Google", Load: loaded(p),
			Identity: func(u goth.User) arbiter.ExternalIdentity {
				return arbiter.ExternalIdentity{
					Provider: arbiter.SignInGoogle, Subject: u.UserID, Email: u.Email,
					EmailVerified: claimTrue(u.RawData, "verified_email") || claimTrue(u.RawData, "email_verified"),
				}
			},
		})
	}
	if cfg.OIDC.Configured() {
		ps = append(ps, OIDCProvider(cfg.OIDC.Issuer, cfg.OIDC.ClientID, cfg.OIDC.ClientSecret, callback(arbiter.SignInOIDC)))
	}
	return ps
}

// GitHubProvider offers sign-in with the goth GitHub provider p. GitHub
// shows only verified addresses publicly, and goth falls back to the
// verified primary address, so its e-mail counts as verified.
func GitHubProvider(p *github.Provider) handlers.OAuthProvider {
	return handlers.OAuthProvider{
		Name: arbiter.SignInGitHub, Label: "GitHub", Load: loaded(p),
		Identity: func(u goth.User) arbiter.ExternalIdentity {
			return arbiter.ExternalIdentity{
				Provider: arbiter.SignInGitHub, Subject: u.UserID, Email: u.Email, EmailVerified: u.Email != "",
			}
		},
	}
}

// OIDCProvider offers sign-in with an OpenID Connect issuer. Its discovery
// document is read on first use, and again after a failure, so the server
// starts while the issuer is unreachable. The e-mail counts as verified
// only when the email_verified claim says so.
func OIDCProvider(issuer, clientID, clientSecret, callback string) handlers.OAuthProvider {
	var (
		mu sync.Mutex
		p  *openidConnect.Provider
	)
	load := func() (goth.Provider, error) {
		mu.Lock()
		defer mu.Unlock()
		if p != nil {
			return p, nil
		}
		discovered, err := openidConnect.New(clientID, clientSecret, callback, issuer+"/.well-known/openid-configuration", "openid", "email", "profile")
		if err != nil {
			return nil, fmt.Errorf("discover %s: %w", issuer, err)
		}
		p = discovered
		return p, nil
	}
	return handlers.OAuthProvider{
		Name: arbiter.SignInOIDC, Label: "SSO", Load: load,
		Identity: func(u goth.User) arbiter.ExternalIdentity {
			return arbiter.ExternalIdentity{
				Provider: arbiter.SignInOIDC, Subject: u.UserID, Email: u.Email, EmailVerified: claimTrue(u.RawData, "email_verified"),
			}
		},
	}
}

// loaded returns a Load function for a provider built up front.
func loaded(p goth.Provider) func() (goth.Provider, error) {
	return func() (goth.Provider, error) { return p, nil }
}

// claimTrue reports whether a claim is true: the JSON boolean, or the
// string some issuers send.
func claimTrue(claims map[string]any, name string) bool {
	switch v := claims[name].(type) {
	case bool:
		return v
	case string:
		return v == "true"
	}
	return false
}

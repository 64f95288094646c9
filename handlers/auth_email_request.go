package handlers

import (
	"net/http"
	"net/url"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// SignInLimits bound how often sign-in links may be asked for.
type SignInLimits struct {
	ByAddress *arbiter.RateLimiter // per e-mail address
	ByIP      *arbiter.RateLimiter // per client IP address
}

var (
	errEmailInvalid = arbiter.Errorf(arbiter.EINVALID, "Enter an e-mail address such as you@example.com.")
	errTooManyLinks = arbiter.Errorf(arbiter.ERATELIMIT, "Too many sign-in links were asked for. Wait a few minutes, then try again.")
	errMailNotSent  = arbiter.Errorf(arbiter.EUNAVAILABLE, "The sign-in e-mail could not be sent. Try again in a moment.")
)

// AuthEmailRequest handles POST /signin/email: it mails a sign-in link to
// the address. The answer is the same whether or not the address has an
// account (the account is created when the link is used), so the form tells
// nobody who has one.
func AuthEmailRequest(logins arbiter.LoginTokenService, mailer arbiter.LoginMailer, limits SignInLimits, providers []OAuthProvider) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		site := SiteFrom(r.Context())
		next := site.SafeNext(r.PostFormValue("next"))
		typed := r.PostFormValue("email")
		refuse := func(err error) {
			Render(w, r, StatusOf(err), dashboard.SignIn(PageOf(r, "Sign in", ""), dashboard.SignInView{
				Providers: providerButtons(providers, next), Email: typed, Next: next, Error: arbiter.ErrorMessage(err),
			}))
		}
		email, err := arbiter.NormalizeEmail(typed)
		if err != nil {
			refuse(errEmailInvalid)
			return
		}
		if !limits.ByIP.Allow(ClientOf(r).IP) || !limits.ByAddress.Allow(email) {
			refuse(errTooManyLinks)
			return
		}
		token, err := logins.CreateLoginToken(r.Context(), email)
		if err != nil {
			Error(w, r, err)
			return
		}
		link := site.AppURL + "/signin/email/confirm?token=" + token
		if next != "/" {
			link += "&next=" + url.QueryEscape(next)
		}
		if err := mailer.SendLoginLink(r.Context(), email, link); err != nil {
			Logger(r.Context()).ErrorContext(r.Context(), "send sign-in link", "error", err.Error())
			Error(w, r, errMailNotSent)
			return
		}
		Render(w, r, http.StatusOK, dashboard.EmailSent(PageOf(r, "Check your inbox", ""), email))
	})
}

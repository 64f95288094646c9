package handlers

import (
	"context"
	"net/http"
	"net/url"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
)

// SignInLimits bound how often sign-in links may be asked for. A request
// must pass all three. ByAddressAndIP is the tight one; ByAddress is a
// looser ceiling on an address from everywhere, so no single client can
// keep someone else's address locked out, and mail to one address stays
// bounded.
type SignInLimits struct {
	ByIP           arbiter.RateLimit // per client IP address
	ByAddressAndIP arbiter.RateLimit // per e-mail address from one client IP
	ByAddress      arbiter.RateLimit // per e-mail address from anywhere
}

// allow spends one request of each limit, client first; a limit that
// refuses gives back what the ones before it spent, so a refused request
// costs nothing, and its error says when to come back. A limit that
// fails (its store does not answer) gives back what was spent too.
func (l SignInLimits) allow(ctx context.Context, email string, c arbiter.Client) error {
	ip := c.LimitKey()
	steps := []struct {
		limiter arbiter.RateLimit
		key     string
	}{{l.ByIP, ip}, {l.ByAddressAndIP, email + " " + ip}, {l.ByAddress, email}}
	for i, s := range steps {
		ok, wait, err := s.limiter.Allow(ctx, s.key)
		if ok {
			continue
		}
		for _, spent := range steps[:i] {
			if err := spent.limiter.Return(context.WithoutCancel(ctx), spent.key); err != nil {
				LoggerFromContext(ctx).WarnContext(ctx, "give back a sign-in link's request", "error", err.Error())
			}
		}
		if err != nil {
			return err
		}
		return &arbiter.Error{Code: arbiter.ERATELIMIT, Message: errTooManyLinks.Message, RetryAfter: wait}
	}
	return nil
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
		site := SiteFromContext(r.Context())
		next := site.SafeNext(r.PostFormValue("next"))
		typed := r.PostFormValue("email")
		refuse := func(err error) {
			setRetryAfter(w, err)
			Render(w, r, StatusOf(err), dashboard.SignIn(PageOf(r, "Sign in", ""), dashboard.SignInView{
				Providers: providerButtons(providers, next), Email: typed, Next: next, Error: arbiter.ErrorMessage(err),
				DemoURL: site.ReviewLink("/review/demo"),
			}))
		}
		email, err := arbiter.NormalizeEmail(typed)
		if err != nil {
			refuse(errEmailInvalid)
			return
		}
		if err := limits.allow(r.Context(), email, ClientOf(r)); err != nil {
			if StatusOf(err) >= http.StatusInternalServerError {
				Error(w, r, err)
				return
			}
			refuse(err)
			return
		}
		token, err := logins.CreateLoginToken(r.Context(), email)
		if err != nil {
			if StatusOf(err) < http.StatusInternalServerError {
				refuse(err) // the demo account's address
				return
			}
			Error(w, r, err)
			return
		}
		link := site.AppURL + "/signin/email/confirm?token=" + token
		if next != "/" {
			link += "&next=" + url.QueryEscape(next)
		}
		if err := mailer.SendLoginLink(r.Context(), email, link); err != nil {
			LoggerFromContext(r.Context()).ErrorContext(r.Context(), "send sign-in link", "error", err.Error())
			Error(w, r, errMailNotSent)
			return
		}
		inLog := arbiter.LoginLinksGoToLog(mailer)
		title := "Check your inbox"
		if inLog {
			title = "Open the link in the server's log"
		}
		Render(w, r, http.StatusOK, dashboard.EmailSent(PageOf(r, title, ""), dashboard.EmailSentView{Email: email, InLog: inLog}))
	})
}

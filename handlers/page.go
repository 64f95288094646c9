package handlers

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/a-h/templ"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/dashboard"
	"github.com/arbiterhq/arbiter/views/layouts"
)

// Site says where the service's surfaces live: the origins of the API, the
// dashboard and the reviewer site, as configured.
type Site struct {
	BaseURL, AppURL, ReviewURL string
}

// Split reports whether the dashboard and the reviewer site have origins of
// their own, so links from one to the other need the full URL.
func (s Site) Split() bool { return s.AppURL != s.ReviewURL }

// AppLink returns the address of a dashboard page (path) as any page links
// to it: the path alone when the dashboard and the reviewer site share an
// origin, else the full URL on the dashboard's, so it works from the
// reviewer site's host too.
func (s Site) AppLink(path string) string {
	if !s.Split() {
		return path
	}
	return s.AppURL + path
}

// ReviewLink returns the address of a reviewer site page (path) as any page
// links to it, like AppLink.
func (s Site) ReviewLink(path string) string {
	if !s.Split() {
		return path
	}
	return s.ReviewURL + path
}

// ReviewHome is the reviewer site's address as the dashboard links to it.
func (s Site) ReviewHome() string { return s.ReviewLink("/review") }

// SignInURL returns the dashboard's sign-in page, which comes back to next
// (a path on the dashboard, or a link from AppLink or ReviewLink) after
// signing in.
func (s Site) SignInURL(next string) string {
	to := s.AppLink("/signin")
	if next != "" && next != "/" {
		to += "?next=" + url.QueryEscape(next)
	}
	return to
}

// OnReviewSite reports whether the request is for a page of the reviewer
// site, which lives under /review on its origin.
func OnReviewSite(r *http.Request) bool {
	return r.URL.Path == "/review" || strings.HasPrefix(r.URL.Path, "/review/")
}

// SignInAndBack returns the sign-in page for a person who asked for r's page
// without a session: it comes back to that page, on whichever surface it is.
func SignInAndBack(r *http.Request) string {
	site := SiteFromContext(r.Context())
	next := r.URL.RequestURI()
	if OnReviewSite(r) {
		next = site.ReviewLink(next)
	} else if r.URL.Path == "/" {
		next = ""
	}
	return site.SignInURL(next)
}

// SafeNext returns where to send a person after signing in: next when it is
// a plain path on this host or a URL on the dashboard's or the reviewer
// site's origin, else "/". Anything else would make sign-in an open
// redirect. A path must already be clean (no "." or ".." segments, no
// doubled slashes), because http.Redirect cleans paths and browsers read a
// backslash as a slash and drop tabs and newlines: "/./\evil.example"
// would otherwise come out as "/\evil.example", which leads off-site.
func (s Site) SafeNext(next string) string {
	if next == "" || !plainURLText(next) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.User != nil || u.Opaque != "" || !cleanPath(u.Path) || !cleanPath(u.EscapedPath()) {
		return "/"
	}
	if u.Scheme == "" && u.Host == "" {
		if !strings.HasPrefix(next, "/") {
			return "/"
		}
		return next
	}
	origin := u.Scheme + "://" + strings.ToLower(u.Host)
	if origin == s.AppURL || origin == s.ReviewURL {
		return next
	}
	return "/"
}

// plainURLText reports whether s holds none of what browsers read
// differently from Go: backslashes (raw or percent-encoded), spaces and
// control characters such as tabs and newlines.
func plainURLText(s string) bool {
	if strings.Contains(s, `\`) || strings.Contains(strings.ToLower(s), "%5c") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] == 0x7f {
			return false
		}
	}
	return true
}

// cleanPath reports whether p is "" or a path that path.Clean leaves as it
// is (but for a trailing slash), and does not start with two slashes.
func cleanPath(p string) bool {
	if p == "" {
		return true
	}
	if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") {
		return false
	}
	return path.Clean(p) == strings.TrimSuffix(p, "/") || p == "/"
}

type siteKey struct{}

// NewContextWithSite returns a context carrying the site's origins, for the pages.
func NewContextWithSite(ctx context.Context, s Site) context.Context {
	return context.WithValue(ctx, siteKey{}, s)
}

// SiteFromContext returns the site of the request's context.
func SiteFromContext(ctx context.Context) Site {
	s, _ := ctx.Value(siteKey{}).(Site)
	return s
}

// PageOf returns the layout's view of a request: the title, the navigation
// entry to highlight, who is signed in, and where the other surface is.
func PageOf(r *http.Request, title, active string) layouts.Page {
	site := SiteFromContext(r.Context())
	p := layouts.Page{Title: title, Active: active, ReviewURL: site.ReviewHome(), SignInURL: site.SignInURL("")}
	if site.Split() {
		p.AppURL = site.AppURL
	}
	if OnReviewSite(r) {
		p.SignInURL = site.SignInURL(site.ReviewHome())
		p.SignOutURL = "/review/signout"
	}
	// The badge is fetched from the page's own origin only (the CSP's
	// connect-src): on the reviewer site, or on a dashboard that shares it.
	if !site.Split() || OnReviewSite(r) {
		p.ReviewCountURL = "/review/count"
	}
	if s := arbiter.SessionFromContext(r.Context()); s != nil {
		p.Email = s.Email
		p.Nav = map[string]bool{}
		for key, action := range navActions {
			p.Nav[key] = s.AccountID != "" && arbiter.Can(s.Role, action)
		}
		p.SwitchURL = "/account"
		if OnReviewSite(r) {
			p.SwitchURL = "/review/account"
		}
		for _, m := range s.Accounts {
			p.Accounts = append(p.Accounts, layouts.AccountChoice{ID: m.AccountID, Name: m.AccountName,
				Role: arbiter.RoleLabel(m.Role), Current: m.AccountID == s.AccountID})
		}
	}
	return p
}

// navActions says which action each navigation entry needs: an entry is
// shown to the members whose role may do it.
var navActions = map[string]arbiter.Action{
	"home":     arbiter.ActionViewOverview,
	"tasks":    arbiter.ActionViewTasks,
	"keys":     arbiter.ActionManageKeys,
	"members":  arbiter.ActionManageMembers,
	"settings": arbiter.ActionManageSettings,
	"webhooks": arbiter.ActionManageWebhooks,
	"audit":    arbiter.ActionViewAudit,
	"review":   arbiter.ActionReview,
	"stats":    arbiter.ActionViewStats,
}

// Render writes c as HTML with the status. Pages show account data, so
// nothing of them is cached. A page that fails to render is answered through
// Error.
//
// The whole page is buffered first, so a render error can still become an
// error page. That is affordable because every page is bounded: the largest
// is the reviewer's desk, whose context tree is at most a small multiple of
// the context's 256 KiB whatever its shape (views/review/context.go; a
// maximal context makes a page under 2 MiB, see its test).
func Render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	var buf bytes.Buffer
	if err := c.Render(r.Context(), &buf); err != nil {
		Error(w, r, fmt.Errorf("render %s: %w", r.URL.Path, err))
		return
	}
	writePage(w, status, &buf)
}

// writePage sends a rendered page.
func writePage(w http.ResponseWriter, status int, page *bytes.Buffer) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = page.WriteTo(w)
}

// IsHTMX reports whether htmx sent the request, so a fragment will do.
func IsHTMX(r *http.Request) bool { return r.Header.Get("HX-Request") == "true" }

// pageErrorTitles names each status's error page.
var pageErrorTitles = map[int]string{
	http.StatusBadRequest:            "That did not work",
	http.StatusUnauthorized:          "Sign-in failed",
	http.StatusForbidden:             "Request refused",
	http.StatusNotFound:              "Page not found",
	http.StatusMethodNotAllowed:      "Not allowed",
	http.StatusConflict:              "That already happened",
	http.StatusTooManyRequests:       "Too many requests",
	http.StatusRequestEntityTooLarge: "Too large",
	http.StatusServiceUnavailable:    "Try again in a moment",
	http.StatusInternalServerError:   "Something went wrong",
}

// errorPage renders Error's answer as a page. Internal errors are described
// only generically. Should the error page itself fail to render, a line of
// text is all that is left to say.
func errorPage(w http.ResponseWriter, r *http.Request, status int, err error) {
	msg := arbiter.ErrorMessage(err)
	if status == http.StatusInternalServerError {
		msg = "The server failed to answer. The error is logged; try again, and tell the operator if it keeps happening."
	}
	title := pageErrorTitles[status]
	if title == "" {
		title = http.StatusText(status)
	}
	var buf bytes.Buffer
	if err := dashboard.Error(PageOf(r, title, ""), dashboard.ErrorView{
		Status: status, Title: title, Message: msg, Review: OnReviewSite(r),
	}).Render(r.Context(), &buf); err != nil {
		LoggerFromContext(r.Context()).ErrorContext(r.Context(), "render error page", "path", r.URL.Path, "error", err.Error())
		http.Error(w, msg, status)
		return
	}
	writePage(w, status, &buf)
}

// ErrNoPage is the answer for an address nothing is served at.
var ErrNoPage = arbiter.Errorf(arbiter.ENOTFOUND, "There is nothing at this address. It may have moved, or the link may be mistyped.")

type clientIPKey struct{}

// NewContextWithClientIP returns a context carrying the client's address
// as the server decided it (the peer, or the client behind a trusted
// proxy).
func NewContextWithClientIP(ctx context.Context, ip string) context.Context {
	return context.WithValue(ctx, clientIPKey{}, ip)
}

// ClientOf returns who sent the request, for the audit log and rate limits:
// the address NewContextWithClientIP put in its context, else the
// connection's peer.
func ClientOf(r *http.Request) arbiter.Client {
	ip, ok := r.Context().Value(clientIPKey{}).(string)
	if !ok {
		var err error
		if ip, _, err = net.SplitHostPort(r.RemoteAddr); err != nil {
			ip = r.RemoteAddr
		}
	}
	return arbiter.Client{IP: ip, UserAgent: r.UserAgent()}
}

// ActorOf returns who sent the request, for the audit log: the signed-in
// person's e-mail and their client.
func ActorOf(r *http.Request) arbiter.Actor {
	a := arbiter.Actor{Client: ClientOf(r)}
	if s := arbiter.SessionFromContext(r.Context()); s != nil {
		a.Email, a.PersonID = s.Email, s.PersonID
	}
	return a
}

// redirect sends a browser on with 303 See Other, so a POST becomes a GET.
func redirect(w http.ResponseWriter, r *http.Request, to string) {
	http.Redirect(w, r, to, http.StatusSeeOther)
}

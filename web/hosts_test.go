package web_test

import (
	"context"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/web"
)

// linkMailer hands each sign-in link to the test.
type linkMailer chan string

func (m linkMailer) SendLoginLink(_ context.Context, _, link string) error {
	m <- link
	return nil
}

// threeHosts is one server answering as three hosts: the API, the dashboard
// and the reviewer site, sharing the sign-in through the cookie domain.
type threeHosts struct {
	api, app, review string
	links            linkMailer
	srv              *httptest.Server
}

func newThreeHosts(t *testing.T, store *db.DB) *threeHosts {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	h := &threeHosts{
		api:    "http://api.arbiter.test:" + port,
		app:    "http://app.arbiter.test:" + port,
		review: "http://review.arbiter.test:" + port,
		links:  make(linkMailer, 10),
		srv:    srv,
	}
	secret, err := store.SessionSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	router := &web.Router{
		Services: web.Services{
			Tasks: store, Keys: store, Demo: store, Health: store, Queue: store,
			Accounts: store, Logins: store, Identities: store, Audit: store, Members: store, Reservations: store, Stats: store, Webhooks: store,
			Calibration: store,
		},
		KeyChecker: web.NewKeyChecker(store, nil),
		Logger:     discardLogger(),
		Site:       handlers.Site{BaseURL: h.api, AppURL: h.app, ReviewURL: h.review},
		Sessions:   web.NewSessions(store, secret, false, "arbiter.test"),
		Mailer:     h.links,
	}
	srv.Config.Handler = router.Routes()
	return h
}

// hostBrowser is a cookie-keeping client that reaches every *.arbiter.test
// host at the test server, does not follow redirects, and sends the headers
// a browser sends with a form: Origin and Sec-Fetch-Site.
type hostBrowser struct {
	t *testing.T
	c *http.Client
}

func (h *threeHosts) browser(t *testing.T) *hostBrowser {
	jar, _ := cookiejar.New(nil)
	addr := h.srv.Listener.Addr().String()
	return &hostBrowser{t: t, c: &http.Client{
		Jar: jar,
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// do sends a request; from is the origin of the page a form was sent from.
func (b *hostBrowser) do(method, target, from string, form url.Values) response {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	if form != nil {
		// As Chromium sends a form on plain http to a host other than
		// localhost: no Sec-Fetch-Site, and under the pages' referrer
		// policy (same-origin) "Origin: null" to another origin.
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		origin := from
		if !strings.HasPrefix(target, from+"/") {
			origin = "null"
		}
		req.Header.Set("Origin", origin)
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, string(out)}
}

func (b *hostBrowser) get(target string) response { b.t.Helper(); return b.do("GET", target, "", nil) }

// wantRedirect fails unless r is a redirect to exactly to.
func wantRedirect(t *testing.T, r response, to, what string) {
	t.Helper()
	if r.status < 300 || r.status > 399 || r.header.Get("Location") != to {
		t.Fatalf("%s: %d to %q, want a redirect to %q\n%.1000s", what, r.status, r.header.Get("Location"), to, r.body)
	}
}

var linkAttr = regexp.MustCompile(`(?:href|action|hx-get|hx-post)="([^"#]+)"`)

// links returns every address a page links to, posts to or fetches,
// resolved against the page's address.
func links(t *testing.T, page string, r response) []string {
	t.Helper()
	base, _ := url.Parse(page)
	var out []string
	for _, m := range linkAttr.FindAllStringSubmatch(r.body, -1) {
		u, err := base.Parse(html.UnescapeString(m[1]))
		if err != nil {
			t.Errorf("%s links to %q: %v", page, m[1], err)
			continue
		}
		if u.Scheme != "http" {
			continue // data: and the like
		}
		out = append(out, u.String())
	}
	return out
}

// wantLinksWork follows every link of a page (GET; forms by their method)
// and fails on any that leads nowhere.
func (b *hostBrowser) wantLinksWork(page string, r response) {
	b.t.Helper()
	for _, m := range regexp.MustCompile(`<form action="([^"]+)" method="post"`).FindAllStringSubmatch(r.body, -1) {
		if strings.HasSuffix(m[1], "/signout") {
			continue // used on its own: it ends the session
		}
		base, _ := url.Parse(page)
		to, _ := base.Parse(html.UnescapeString(m[1]))
		origin := base.Scheme + "://" + base.Host
		if got := b.do("POST", to.String(), origin, url.Values{}); got.status == http.StatusNotFound || got.status == http.StatusMethodNotAllowed || got.status == http.StatusForbidden {
			b.t.Errorf("the form on %s posts to %s, which answers %d", page, to, got.status)
		}
	}
	for _, link := range links(b.t, page, r) {
		if strings.HasSuffix(link, "/signout") {
			continue
		}
		if got := b.get(link); got.status == http.StatusNotFound || got.status >= 500 {
			b.t.Errorf("%s links to %s, which answers %d", page, link, got.status)
		}
	}
}

func TestThreeHosts_SignInLinksAndSignOut(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			h := newThreeHosts(t, dbtest.Open(t, dialect, db.Options{}))
			b := h.browser(t)
			reviewHome := h.review + "/review"
			signInBack := h.app + "/signin?next=" + url.QueryEscape(reviewHome)

			// Signed out on the reviewer host: every way to sign in leads
			// to the dashboard's sign-in page and back.
			r := b.get(reviewHome)
			wantStatus(t, r, http.StatusOK)
			if !strings.Contains(r.body, `href="`+html.EscapeString(signInBack)+`"`) {
				t.Errorf("the reviewer site's welcome does not link to %s:\n%s", signInBack, r.body)
			}
			b.wantLinksWork(reviewHome, r)
			task := h.review + "/review/tasks/tsk_0123456789abcdef"
			wantRedirect(t, b.get(task), h.app+"/signin?next="+url.QueryEscape(task), "a reviewer page that needs a session")
			if r := b.get(h.review + "/review/nowhere"); !strings.Contains(r.body, `href="`+html.EscapeString(signInBack)+`"`) {
				t.Errorf("the reviewer host's 404 page does not link to the sign-in:\n%s", r.body)
			}

			// Sign in on the dashboard by e-mail link, coming back to the
			// reviewer site.
			r = b.get(signInBack)
			wantStatus(t, r, http.StatusOK)
			if !strings.Contains(r.body, `name="next" value="`+html.EscapeString(reviewHome)+`"`) {
				t.Fatalf("the sign-in form forgets where to go back:\n%s", r.body)
			}
			wantStatus(t, b.do("POST", h.app+"/signin/email", h.app, url.Values{"email": {"rev@example.com"}, "next": {reviewHome}}), http.StatusOK)
			link := <-h.links
			if !strings.HasPrefix(link, h.app+"/signin/email/confirm?token=") {
				t.Fatalf("the link %s is not on the dashboard's host", link)
			}
			u, _ := url.Parse(link)
			wantStatus(t, b.get(link), http.StatusOK)
			r = b.do("POST", h.app+"/signin/email/confirm", h.app, url.Values{"token": {u.Query().Get("token")}, "next": {u.Query().Get("next")}})
			wantRedirect(t, r, reviewHome, "the sign-in")

			// Signed in on both hosts; every link of every page works, and
			// the dashboard's pages are reached on the dashboard's host.
			r = b.get(reviewHome)
			if !strings.Contains(r.body, `data-testid="signed-in-as"`) {
				t.Fatalf("not signed in on the reviewer host:\n%s", r.body)
			}
			for _, want := range []string{`href="` + h.app + `/keys"`, `href="` + h.app + `/audit"`} {
				if !strings.Contains(r.body, want) {
					t.Errorf("the reviewer site's page lacks %s", want)
				}
			}
			b.wantLinksWork(reviewHome, r)
			for _, page := range []string{h.app + "/", h.app + "/tasks", h.app + "/keys", h.app + "/audit", h.review + "/review/demo/tasks/tsk_demo_refund_late_delivery"} {
				r := b.get(page)
				wantStatus(t, r, http.StatusOK)
				b.wantLinksWork(page, r)
			}
			if r := b.get(h.app + "/"); !strings.Contains(r.body, `href="`+reviewHome+`"`) {
				t.Errorf("the dashboard does not link to the reviewer site at %s", reviewHome)
			}

			// Sign out on the reviewer host, by its form: the session ends
			// on both hosts.
			r = b.get(reviewHome)
			signOut := regexp.MustCompile(`<form action="([^"]+)" method="post"[^>]*><button[^>]*data-testid="sign-out"`).FindStringSubmatch(r.body)
			if signOut == nil {
				t.Fatalf("no sign-out form on the reviewer site:\n%s", r.body)
			}
			to, _ := url.Parse(reviewHome)
			to, _ = to.Parse(html.UnescapeString(signOut[1]))
			r = b.do("POST", to.String(), h.review, url.Values{})
			if r.status != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), h.app+"/signin") {
				t.Fatalf("sign out from the reviewer host: %d to %q\n%.1000s", r.status, r.header.Get("Location"), r.body)
			}
			if r := b.get(reviewHome); strings.Contains(r.body, `data-testid="signed-in-as"`) {
				t.Error("still signed in on the reviewer host after signing out")
			}
			wantRedirect(t, b.get(h.app+"/keys"), h.app+"/signin?next=%2Fkeys", "the dashboard after signing out")

			// The API's host serves the API alone.
			wantStatus(t, b.get(h.api+"/demo/tasks"), http.StatusOK)
			wantStatus(t, b.get(h.api+"/signin"), http.StatusNotFound)
		})
	}
}

package handlers_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/web"
)

// requestLog keeps what a server was asked for: each request's host, path
// and Referer.
type requestLog struct {
	mu   sync.Mutex
	seen []seenRequest
}

type seenRequest struct{ host, path, referer string }

// wrap records every request h serves.
func (l *requestLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, seenRequest{r.Host, r.URL.Path, r.Referer()})
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (l *requestLog) requests() []seenRequest {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seenRequest(nil), l.seen...)
}

// TestEmailConfirm_TokenNeverInAReferer opens a sign-in link in Chromium and
// checks what the browser sends: the page's scripts and styles are fetched
// without a Referer holding the token, and so is the sign-in itself.
func TestEmailConfirm_TokenNeverInAReferer(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	t.Cleanup(srv.Close)
	router := &web.Router{
		Services: web.Services{
			Tasks: store, Keys: store, Demo: store, Health: store, Queue: store,
			Accounts: store, Logins: store, Identities: store, Audit: store, Members: store, Reservations: store, Stats: store, Webhooks: store,
			Calibration: store,
		},
		KeyChecker: web.NewKeyChecker(store, nil),
		Logger:     slog.New(slog.DiscardHandler),
		Site:       handlers.Site{BaseURL: srv.URL, AppURL: srv.URL, ReviewURL: srv.URL},
		Sessions:   web.NewSessions(store, "0123456789abcdef0123456789abcdef", false, ""),
		Mailer:     make(mailbox, 1),
	}
	var log requestLog
	srv.Config.Handler = log.wrap(router.Routes())

	token, err := store.CreateLoginToken(context.Background(), "person@example.com")
	if err != nil {
		t.Fatal(err)
	}
	bctx := newBrowser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	// A fresh browser: nothing is cached, so the page fetches its assets.
	do(t, bctx, "open the link",
		chromedp.Navigate(srv.URL+"/signin/email/confirm?token="+token),
		chromedp.WaitVisible(css(`[data-testid=confirm-sign-in]`)),
		chromedp.Poll[chromedp.Void](`document.readyState === 'complete'`),
	)
	if as := value(t, bctx, chromedp.Text(css(`[data-testid=sign-in-as]`))); as != "person@example.com" {
		t.Errorf("the confirm page signs in as %q", as)
	}
	do(t, bctx, "sign in",
		chromedp.Click(css(`[data-testid=confirm-sign-in]`)),
		chromedp.WaitVisible(css(`[data-testid=usage]`)),
	)
	assets := 0
	for _, r := range log.requests() {
		if strings.HasPrefix(r.path, "/static/") {
			assets++
		}
		if strings.Contains(r.referer, token) {
			t.Errorf("%s was requested with the token in its Referer: %s", r.path, r.referer)
		}
		if strings.Contains(r.referer, "/signin/email/confirm") {
			t.Errorf("%s was requested with the confirm page's address in its Referer: %s", r.path, r.referer)
		}
	}
	if assets == 0 {
		t.Fatal("the confirm page fetched no assets, so the test saw no Referer")
	}
}

// TestThreeHosts_InABrowser walks Chromium through the API, the dashboard and
// the reviewer site on three hosts of their own (all resolved to the test
// server): sign in from the reviewer site, move between the surfaces by
// their navigation, and sign out on the reviewer host.
func TestThreeHosts_InABrowser(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	api, app, rev := "http://api.arbiter.test:"+port, "http://app.arbiter.test:"+port, "http://review.arbiter.test:"+port
	links := make(mailbox, 10)
	router := &web.Router{
		Services: web.Services{
			Tasks: store, Keys: store, Demo: store, Health: store, Queue: store,
			Accounts: store, Logins: store, Identities: store, Audit: store, Members: store, Reservations: store, Stats: store, Webhooks: store,
			Calibration: store,
		},
		KeyChecker: web.NewKeyChecker(store, nil),
		Logger:     slog.New(slog.DiscardHandler),
		Site:       handlers.Site{BaseURL: api, AppURL: app, ReviewURL: rev},
		Sessions:   web.NewSessions(store, "0123456789abcdef0123456789abcdef", false, "arbiter.test"),
		Mailer:     links,
	}
	var log requestLog
	srv.Config.Handler = log.wrap(router.Routes())

	bctx := newBrowserWith(t, chromedp.Flag("host-resolver-rules", "MAP *.arbiter.test 127.0.0.1"))
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	// at checks where the browser is, once a step has waited for its page.
	at := func(step, origin, path string) {
		t.Helper()
		if got := value(t, bctx, chromedp.Evaluate[string](`location.origin + location.pathname`)); got != origin+path {
			t.Fatalf("%s: the browser is at %s, want %s%s", step, got, origin, path)
		}
	}
	do(t, bctx, "open the reviewer site",
		chromedp.Navigate(rev+"/"),
		chromedp.WaitVisible(css(`[data-testid=review-welcome] a.btn-primary[href*="/signin"]`)),
	)
	at("open the reviewer site", rev, "/review")
	do(t, bctx, "ask for a link",
		chromedp.Click(css(`[data-testid=review-welcome] a.btn-primary[href*="/signin"]`)),
		chromedp.WaitVisible(css(`#email`)),
	)
	at("ask for a link", app, "/signin")
	do(t, bctx, "ask for a link",
		chromedp.SendKeys(css(`#email`), "rev@example.com"),
		chromedp.Click(css(`form[action="/signin/email"] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=email-sent]`)),
	)
	do(t, bctx, "confirm the link",
		chromedp.Navigate(links.next(t)),
		chromedp.WaitVisible(css(`[data-testid=confirm-sign-in]`)),
		chromedp.Click(css(`[data-testid=confirm-sign-in]`)),
		chromedp.WaitVisible(css(`[data-testid=signed-in-as]`)),
	)
	at("confirm the link", rev, "/review")
	do(t, bctx, "go to the dashboard",
		chromedp.Click(css(`nav[aria-label=Main] a[href$="/keys"]`)),
		chromedp.WaitVisible(css(`#key-name`)),
	)
	at("go to the dashboard", app, "/keys")
	do(t, bctx, "come back to the reviewer site",
		chromedp.Click(css(`nav[aria-label=Main] a[href$="/review"]`)),
		chromedp.WaitVisible(css(`[data-testid=signed-in-as]`)),
		chromedp.WaitNotPresent(css(`#key-name`)),
	)
	at("come back to the reviewer site", rev, "/review")
	do(t, bctx, "sign out on the reviewer host",
		chromedp.Click(css(`[data-testid=sign-out]`)),
		chromedp.WaitVisible(css(`[data-testid=signed-out]`)),
	)
	at("sign out on the reviewer host", app, "/signin")
	do(t, bctx, "open the reviewer site again",
		chromedp.Navigate(rev+"/review"),
		chromedp.WaitVisible(css(`[data-testid=review-welcome]`)),
	)
	if n := value(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=signed-in-as]').length`)); n != 0 {
		t.Error("still signed in on the reviewer host after signing out")
	}
	hosts := map[string]bool{}
	for _, r := range log.requests() {
		hosts[strings.Split(r.host, ":")[0]] = true
	}
	if !hosts["app.arbiter.test"] || !hosts["review.arbiter.test"] {
		t.Errorf("the browser reached the hosts %v, not both surfaces", hosts)
	}
}

// newBrowserWith starts headless Chromium for the test with extra flags.
func newBrowserWith(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	bctx, cancelTimeout := context.WithTimeout(bctx, 60*time.Second)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAlloc() })
	return bctx
}

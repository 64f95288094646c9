package handlers_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

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
			Accounts: store, Logins: store, Identities: store, Audit: store,
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
	}
	if assets == 0 {
		t.Fatal("the confirm page fetched no assets, so the test saw no Referer")
	}
}

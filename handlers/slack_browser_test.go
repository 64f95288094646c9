package handlers_test

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/slack/slackfake"
	"github.com/arbiterhq/arbiter/web"
)

// TestSlackSettings_InABrowser walks "connect Slack" in headless
// Chromium: from the settings page to the Slack page, fill in Socket
// Mode's tokens and a channel, connect, and see the connection without
// its tokens.
func TestSlackSettings_InABrowser(t *testing.T) {
	k, err := secretbox.Parse(secretbox.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	store := dbtest.Open(t, db.SQLite, db.Options{Secrets: k})
	fake := slackfake.New(t)
	links := make(mailbox, 10)
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	router := &web.Router{
		Services: web.Services{
			Tasks: store, Keys: store, Demo: store, Health: store, Queue: store,
			Accounts: store, Logins: store, Identities: store, Audit: store, Members: store, Reservations: store, Stats: store, Webhooks: store,
			Calibration: store, Slack: store,
		},
		KeyChecker:  web.NewKeyChecker(store, nil),
		Logger:      slog.New(slog.DiscardHandler),
		Site:        handlers.Site{BaseURL: srv.URL, AppURL: srv.URL, ReviewURL: srv.URL},
		Sessions:    web.NewSessions(store, "0123456789abcdef0123456789abcdef", false, ""),
		Mailer:      links,
		SlackTeams:  slack.NewClient(fake.URL, nil),
		SlackSealed: true,
	}
	srv.Config.Handler = router.Routes()
	base := srv.URL
	bctx := newBrowser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	do(t, bctx, "ask for a link",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(css(`#email`)),
		chromedp.SendKeys(css(`#email`), "owner@example.com"),
		chromedp.Click(css(`form[action="/signin/email"] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=email-sent]`)),
	)
	do(t, bctx, "confirm the link",
		chromedp.Navigate(links.next(t)),
		chromedp.WaitVisible(css(`[data-testid=confirm-sign-in]`)),
		chromedp.Click(css(`[data-testid=confirm-sign-in]`)),
		chromedp.WaitVisible(css(`[data-testid=usage]`)),
	)
	const appToken, botToken = "xapp-1-A0-browser-app-token", "xoxb-browser-bot-token"
	do(t, bctx, "connect Slack",
		chromedp.Navigate(base+"/settings"),
		chromedp.WaitVisible(css(`[data-testid=slack-settings-link]`)),
		chromedp.Click(css(`[data-testid=slack-settings-link]`)),
		chromedp.WaitVisible(css(`[data-testid=slack-connect]`)),
		chromedp.Click(css(`[data-testid=slack-mode-socket]`)),
		chromedp.SendKeys(css(`[data-testid=slack-bot-token]`), botToken),
		chromedp.SendKeys(css(`[data-testid=slack-app-token]`), appToken),
		chromedp.SendKeys(css(`[data-testid=slack-channel-input]`), "#approvals"),
		chromedp.Click(css(`[data-testid=slack-connect]`)),
		chromedp.WaitVisible(css(`[data-testid=slack-connected]`)),
	)
	mode := value(t, bctx, chromedp.Text(css(`[data-testid=slack-mode]`)))
	channel := value(t, bctx, chromedp.Text(css(`[data-testid=slack-channel]`)))
	html := value(t, bctx, chromedp.OuterHTML(css(`html`)))
	if mode != "Socket Mode" || channel != "#approvals" {
		t.Errorf("connected as %q to %q", mode, channel)
	}
	if strings.Contains(html, botToken) || strings.Contains(html, appToken) {
		t.Error("the page shows a token after connecting")
	}
	if n := len(fake.Calls("auth.test")); n != 1 {
		t.Errorf("the bot token was checked %d times, want once", n)
	}
}

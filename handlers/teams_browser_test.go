package handlers_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/teams"
	"github.com/arbiterhq/arbiter/teams/teamsfake"
	"github.com/arbiterhq/arbiter/web"
)

// TestTeamsSettings_InABrowser walks "connect Teams" in headless
// Chromium with the keyboard: from the settings page to the Teams page,
// type the bot's app id, tenant and secret (Tab from field to field) and
// connect with Enter; the page shows the bot, its messaging endpoint and
// the app package, never the secret. Once the bot is in a channel, the
// default conversation is chosen with the keyboard. Each state passes axe
// at 1280 and 390 px.
func TestTeamsSettings_InABrowser(t *testing.T) {
	const app, tenant, secret = "1f0e2c7a-5b1d-4e8f-9a3c-7d6b5e4f3a21", "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", "browser~secret.value"
	script := axeScript(t)
	k, err := secretbox.Parse(secretbox.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	store := dbtest.Open(t, db.SQLite, db.Options{Secrets: k})
	fake := teamsfake.New(t)
	fake.AddBot(app, secret)
	links := make(mailbox, 10)
	srv := httptest.NewServer(nil)
	t.Cleanup(srv.Close)
	router := &web.Router{
		Services: web.Services{
			Tasks: store, Keys: store, Demo: store, Health: store, Queue: store,
			Accounts: store, Logins: store, Identities: store, Audit: store, Members: store, Reservations: store, Stats: store, Webhooks: store,
			Calibration: store, Teams: store,
		},
		KeyChecker:       web.NewKeyChecker(store, nil),
		Logger:           slog.New(slog.DiscardHandler),
		Site:             handlers.Site{BaseURL: srv.URL, AppURL: srv.URL, ReviewURL: srv.URL},
		Sessions:         web.NewSessions(store, "0123456789abcdef0123456789abcdef", false, ""),
		Mailer:           links,
		TeamsCredentials: &teams.Tokens{LoginURL: fake.LoginURL},
		TeamsSealed:      true,
	}
	srv.Config.Handler = router.Routes()
	base := srv.URL
	bctx := newBrowserFor(t, 3*time.Minute)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	focused := func(id string) chromedp.Action[chromedp.Void] {
		return until(`document.activeElement?.id === '` + id + `'`)
	}
	both := func(state, ready string) {
		t.Helper()
		for _, width := range []int64{desktopWidth, phoneWidth} {
			do(t, bctx, fmt.Sprintf("open %s at %d px", state, width),
				viewport(width, desktopHeight),
				chromedp.Navigate(base+"/settings/teams"),
				chromedp.WaitVisible(css(ready)),
			)
			checkAccessibility(t, bctx, script, fmt.Sprintf("Teams settings, %s, at %d px", state, width))
		}
	}

	signInByEmail(t, bctx, base, links, "owner@example.com")
	both("not connected", `[data-testid=teams-connect]`)
	do(t, bctx, "reach the page from the settings",
		viewport(desktopWidth, desktopHeight),
		chromedp.Navigate(base+"/settings"),
		chromedp.WaitVisible(css(`[data-testid=teams-settings-link]`)),
		chromedp.Click(css(`[data-testid=teams-settings-link]`)),
		chromedp.WaitVisible(css(`[data-testid=teams-connect]`)),
	)
	do(t, bctx, "connect with the keyboard",
		chromedp.Focus(css(`#teams-app-id`)), focused("teams-app-id"), type_(app),
		chromedp.KeyEvent(kb.Tab), focused("teams-tenant-id"), type_(tenant),
		chromedp.KeyEvent(kb.Tab), focused("teams-secret"), type_(secret),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(css(`[data-testid=teams-connected]`)),
	)
	shown := value(t, bctx, chromedp.Text(css(`[data-testid=teams-app-id]`)))
	endpoint := value(t, bctx, chromedp.Text(css(`[data-testid=teams-endpoint]`)))
	html := value(t, bctx, chromedp.OuterHTML(css(`html`)))
	if shown != app || endpoint != base+"/integrations/teams/messages" {
		t.Errorf("connected %q with endpoint %q", shown, endpoint)
	}
	if strings.Contains(html, secret) {
		t.Error("the page shows the secret after connecting")
	}
	if !strings.Contains(html, `data-testid="teams-no-conversations"`) || !strings.Contains(html, `href="/settings/teams/manifest.zip"`) {
		t.Error("the connected page lacks the package or the note that the bot is in no conversation")
	}
	both("connected", `[data-testid=teams-no-conversations]`)

	acct, err := store.FindAccountByEmail(context.Background(), "owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.SaveTeamsConversation(context.Background(), &arbiter.TeamsConversation{AccountID: acct.ID, ID: "19:approvals@thread.tacv2",
		Name: "finance/approvals", Kind: arbiter.TeamsChannel, Title: "Finance › Approvals", ServiceURL: fake.ServiceURL}); err != nil {
		t.Fatal(err)
	}
	both("with a conversation", `[data-testid=teams-conversations]`)
	do(t, bctx, "choose the default with the keyboard",
		viewport(desktopWidth, desktopHeight),
		chromedp.Navigate(base+"/settings/teams"),
		chromedp.WaitVisible(css(`[data-testid=teams-default]`)),
		chromedp.Focus(css(`#teams-default`)), focused("teams-default"),
		chromedp.KeyEvent(kb.ArrowDown), until(`document.getElementById('teams-default').value === 'finance/approvals'`),
		chromedp.KeyEvent(kb.Tab), until(`document.activeElement?.dataset.testid === 'teams-default-save'`),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(css(`[data-testid=teams-notice]`)),
	)
	if c, err := store.FindTeamsConnection(context.Background(), acct.ID); err != nil || c.DefaultConversation != "finance/approvals" {
		t.Fatalf("the default after the keyboard's save: %+v (%v)", c, err)
	}
}

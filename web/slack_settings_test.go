package web_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/slack/slackfake"
	"github.com/arbiterhq/arbiter/web"
)

// slackDash is a dashboard whose store seals secrets (sealed true) or not,
// with Slack's Web API at fake.
func slackDash(t *testing.T, dialect string, fake *slackfake.Fake, sealed bool) *dash {
	t.Helper()
	return slackDashAt(t, dialect, fake.URL, sealed)
}

// slackDashAt is slackDash with Slack's Web API at apiURL.
func slackDashAt(t *testing.T, dialect, apiURL string, sealed bool) *dash {
	t.Helper()
	return newDash(t, dialect, func(d *dash) {
		opts := db.Options{Now: d.clock.Now}
		if sealed {
			k, err := secretbox.Parse(secretbox.NewKey())
			if err != nil {
				t.Fatal(err)
			}
			opts.Secrets = k
		}
		store := dbtest.Open(t, dialect, opts)
		secret, err := store.SessionSecret(ctx)
		if err != nil {
			t.Fatal(err)
		}
		d.store, d.keys = store, web.NewKeyChecker(store, nil)
		d.router.Services = web.Services{Tasks: store, Keys: store, Demo: store, Health: store, Queue: store,
			Accounts: store, Logins: store, Identities: store, Audit: store, Members: store, Reservations: store, Stats: store,
			Webhooks: store, Calibration: store, Slack: store}
		d.router.KeyChecker, d.router.Sessions = d.keys, web.NewSessions(store, secret, false, "")
		d.router.SlackTeams, d.router.SlackSealed = slack.NewClient(apiURL, nil), sealed
	})
}

// TestSlackSettings_Connect: an owner connects Slack on the settings page
// (CSRF-checked); the token is checked with Slack, refused input and a
// refused token change nothing, the page never shows a token again, the
// audit log records the connection without one, a reviewer cannot reach
// the page, and the owner disconnects.
func TestSlackSettings_Connect(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			fake := slackfake.New(t)
			d := slackDash(t, dialect, fake, true)
			owner, _, reviewer := d.team()
			const token, secret = "xoxb-1111-secret-token", "0123456789abcdef0123456789abcdef"
			form := url.Values{"mode": {"http"}, "bot_token": {token}, "signing_secret": {secret}, "channel": {"#refunds"}}

			if r := owner.get("/settings"); !strings.Contains(r.body, `href="/settings/slack"`) {
				t.Fatal("the settings page does not link to Slack")
			}
			r := owner.get("/settings/slack")
			wantStatus(t, r, http.StatusOK)
			if !strings.Contains(r.body, `data-testid="slack-connect"`) || !strings.Contains(r.body, "/integrations/slack/interactions") {
				t.Fatalf("the Slack page offers no form:\n%.2000s", r.body)
			}

			bad := url.Values{"mode": {"http"}, "bot_token": {token}, "signing_secret": {secret}, "channel": {"refunds"}}
			r = owner.post("/settings/slack", bad)
			wantStatus(t, r, http.StatusBadRequest)
			fake.Fail("auth.test", "invalid_auth")
			r = owner.post("/settings/slack", form)
			wantStatus(t, r, http.StatusBadRequest)
			if !strings.Contains(r.body, "Slack refused the bot token (invalid_auth)") || strings.Contains(r.body, token) {
				t.Errorf("a refused token's page:\n%.3000s", r.body)
			}
			if r := owner.do("POST", "/settings/slack", form, map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}); r.status != http.StatusForbidden {
				t.Errorf("a cross-site connect: %d, want 403", r.status)
			}
			if r := reviewer.get("/settings/slack"); r.status != http.StatusNotFound {
				t.Errorf("a reviewer opens the Slack page: %d", r.status)
			}
			if r := reviewer.post("/settings/slack", form); r.status != http.StatusNotFound {
				t.Errorf("a reviewer connects Slack: %d", r.status)
			}
			acct, err := d.store.FindAccountByEmail(ctx, "owner@example.com")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.store.FindSlackConnection(ctx, acct.ID); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
				t.Fatalf("refused connects stored a connection: %v", err)
			}

			r = owner.post("/settings/slack", form)
			if r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/slack?notice=connected" {
				t.Fatalf("connect: %d to %q\n%.2000s", r.status, r.header.Get("Location"), r.body)
			}
			r = owner.follow(r)
			if !strings.Contains(r.body, `data-testid="slack-connected"`) || !strings.Contains(r.body, "#refunds") ||
				strings.Contains(r.body, token) || strings.Contains(r.body, secret) {
				t.Errorf("the connected page:\n%.3000s", r.body)
			}
			c, err := d.store.FindSlackConnection(ctx, acct.ID)
			if err != nil || c.BotToken != token || c.SigningSecret != secret || c.TeamID != "T0FAKE" || c.Mode != arbiter.SlackModeHTTP {
				t.Fatalf("stored %+v, %v", c, err)
			}
			events, err := d.store.ListAuditEvents(ctx, acct.ID, 10)
			if err != nil || len(events) == 0 || events[0].Kind != arbiter.AuditSlackConnected || strings.Contains(events[0].Detail, token) ||
				events[0].Actor != "owner@example.com" {
				t.Errorf("audit log: %+v, %v", events, err)
			}

			r = owner.post("/settings/slack/disconnect", url.Values{})
			if r.status != http.StatusSeeOther {
				t.Fatalf("disconnect: %d", r.status)
			}
			if _, err := d.store.FindSlackConnection(ctx, acct.ID); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
				t.Errorf("after disconnect: %v", err)
			}
		})
	}
}

// TestSlackSettings_NeedsTheSecretKey: without ARBITER_SECRET_KEY the
// page says why Slack cannot be connected, and a connect is 409 and
// stores nothing.
func TestSlackSettings_NeedsTheSecretKey(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			fake := slackfake.New(t)
			d := slackDash(t, dialect, fake, false)
			owner := d.browser()
			owner.signIn("owner@example.com")
			if r := owner.get("/settings/slack"); !strings.Contains(r.body, `data-testid="slack-needs-key"`) {
				t.Errorf("the page does not say a key is needed:\n%.2000s", r.body)
			}
			r := owner.post("/settings/slack", url.Values{"mode": {"http"}, "bot_token": {"xoxb-1"},
				"signing_secret": {"0123456789abcdef0123"}, "channel": {"#refunds"}})
			wantStatus(t, r, http.StatusConflict)
			if n := len(fake.Calls("auth.test")); n != 0 {
				t.Errorf("the token was sent to Slack %d times without a key to keep it", n)
			}
		})
	}
}

// TestSlackSettings_SaysWhyAndKeepsWhatWasTyped: the page shows the app's
// manifest with this server's interactions address, and warns that Slack
// cannot reach a loopback address (the test server's); a refusal keeps the
// secrets typed in their fields unless it is about one of them; a Slack
// that does not answer is told as such ("Could not reach Slack (…)"), not
// as a refused token; nothing is stored.
func TestSlackSettings_SaysWhyAndKeepsWhatWasTyped(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			fake := slackfake.New(t)
			d := slackDash(t, dialect, fake, true)
			owner, _, _ := d.team()
			const token, secret = "xoxb-2222-typed-token", "fedcba9876543210fedcba9876543210"
			field := func(body, name string) string {
				_, input, _ := strings.Cut(body, `name="`+name+`"`)
				input, _, _ = strings.Cut(input, ">")
				return input
			}

			r := owner.get("/settings/slack")
			wantStatus(t, r, http.StatusOK)
			if !strings.Contains(r.body, html.EscapeString(slack.Manifest(d.url+"/integrations/slack/interactions"))) {
				t.Errorf("the page does not show the manifest with its interactions address:\n%.4000s", r.body)
			}
			if !strings.Contains(r.body, `data-testid="slack-unreachable"`) || !strings.Contains(r.body, "is a loopback or private address") {
				t.Errorf("the page does not warn that Slack cannot reach a loopback address:\n%.4000s", r.body)
			}

			// A channel refused: both secrets stay in their fields.
			r = owner.post("/settings/slack", url.Values{"mode": {"http"}, "bot_token": {token}, "signing_secret": {secret}, "channel": {"Refunds"}})
			wantStatus(t, r, http.StatusBadRequest)
			if !strings.Contains(field(r.body, "bot_token"), `value="`+token+`"`) || !strings.Contains(field(r.body, "signing_secret"), `value="`+secret+`"`) {
				t.Errorf("after a refused channel the secrets are gone: <%s> <%s>", field(r.body, "bot_token"), field(r.body, "signing_secret"))
			}
			// Slack refuses the token: it leaves its field, the secret stays.
			fake.Fail("auth.test", "invalid_auth")
			r = owner.post("/settings/slack", url.Values{"mode": {"http"}, "bot_token": {token}, "signing_secret": {secret}, "channel": {"#refunds"}})
			wantStatus(t, r, http.StatusBadRequest)
			if strings.Contains(r.body, token) || !strings.Contains(field(r.body, "signing_secret"), `value="`+secret+`"`) ||
				!strings.Contains(r.body, "Slack refused the bot token (invalid_auth)") {
				t.Errorf("after Slack refused the token:\n%.4000s", r.body)
			}

			// Slack does not answer: it says so, and keeps everything typed.
			d = slackDashAt(t, dialect, down.URL+"/", true)
			owner, _, _ = d.team()
			r = owner.post("/settings/slack", url.Values{"mode": {"http"}, "bot_token": {token}, "signing_secret": {secret}, "channel": {"#refunds"}})
			wantStatus(t, r, http.StatusBadGateway)
			if !strings.Contains(r.body, "Could not reach Slack (it answered HTTP 503). Nothing was saved") || strings.Contains(r.body, "refused") ||
				!strings.Contains(field(r.body, "bot_token"), `value="`+token+`"`) || !strings.Contains(field(r.body, "signing_secret"), `value="`+secret+`"`) {
				t.Errorf("a Slack that did not answer:\n%.4000s", r.body)
			}
			acct, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")
			if _, err := d.store.FindSlackConnection(ctx, acct.ID); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
				t.Errorf("a refused connect stored a connection: %v", err)
			}
		})
	}
}

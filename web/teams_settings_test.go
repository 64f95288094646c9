package web_test

import (
	"archive/zip"
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/teams"
	"github.com/arbiterhq/arbiter/teams/teamsfake"
	"github.com/arbiterhq/arbiter/web"
)

// teamsDash is a dashboard whose store seals secrets (sealed true) or not,
// with Microsoft's token service at fake.
func teamsDash(t *testing.T, dialect string, fake *teamsfake.Fake, sealed bool) *dash {
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
			Webhooks: store, Calibration: store, Teams: store}
		d.router.KeyChecker, d.router.Sessions = d.keys, web.NewSessions(store, secret, false, "")
		d.router.TeamsCredentials, d.router.TeamsSealed = &teams.Tokens{LoginURL: fake.LoginURL}, sealed
	})
}

// TestTeamsSettings_Connect: an owner connects a bot on the settings page
// (CSRF-checked): malformed input and a secret Microsoft refuses change
// nothing and keep what was typed but the secret; the page never shows
// the secret; the app package names the bot; a conversation the bot
// joined becomes the default; a reviewer cannot reach the page; the owner
// disconnects; the audit log records each change without the secret.
func TestTeamsSettings_Connect(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			fake := teamsfake.New(t)
			fake.AddBot(teamsApp, teamsSecret)
			d := teamsDash(t, dialect, fake, true)
			owner, _, reviewer := d.team()
			form := url.Values{"app_id": {teamsApp}, "tenant_id": {teamsTenant}, "client_secret": {teamsSecret}}

			if r := owner.get("/settings"); !strings.Contains(r.body, `href="/settings/teams"`) {
				t.Fatal("the settings page does not link to Teams")
			}
			r := owner.get("/settings/teams")
			wantStatus(t, r, http.StatusOK)
			if !strings.Contains(r.body, `data-testid="teams-connect"`) || !strings.Contains(r.body, "/integrations/teams/messages") {
				t.Fatalf("the Teams page offers no form:\n%.2000s", r.body)
			}
			bad := url.Values{"app_id": {"my-bot"}, "tenant_id": {teamsTenant}, "client_secret": {teamsSecret}}
			r = owner.post("/settings/teams", bad)
			wantStatus(t, r, http.StatusBadRequest)
			if !strings.Contains(r.body, "Microsoft App ID of the Azure Bot") || strings.Contains(r.body, teamsSecret) {
				t.Errorf("a malformed app id's page:\n%.3000s", r.body)
			}
			wrong := url.Values{"app_id": {teamsApp}, "tenant_id": {teamsTenant}, "client_secret": {"not-the-secret"}}
			r = owner.post("/settings/teams", wrong)
			wantStatus(t, r, http.StatusBadRequest)
			if !strings.Contains(r.body, "Microsoft did not give the bot a token") || !strings.Contains(r.body, teamsApp) ||
				strings.Contains(r.body, "not-the-secret") {
				t.Errorf("a refused secret's page:\n%.3000s", r.body)
			}
			if r := owner.do("POST", "/settings/teams", form, map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}); r.status != http.StatusForbidden {
				t.Errorf("a cross-site connect: %d, want 403", r.status)
			}
			if r := reviewer.get("/settings/teams"); r.status != http.StatusNotFound {
				t.Errorf("a reviewer reached the Teams settings: %d", r.status)
			}
			acct, err := d.store.FindAccountByEmail(ctx, "owner@example.com")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.store.FindTeamsConnection(ctx, acct.ID); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
				t.Fatalf("refused forms connected Teams: %v", err)
			}

			r = owner.post("/settings/teams", form)
			if r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/teams?notice=connected" {
				t.Fatalf("connect: %d to %q\n%.2000s", r.status, r.header.Get("Location"), r.body)
			}
			r = owner.follow(r)
			if !strings.Contains(r.body, `data-testid="teams-connected"`) || strings.Contains(r.body, teamsSecret) ||
				!strings.Contains(r.body, `data-testid="teams-no-conversations"`) {
				t.Errorf("the connected page:\n%.3000s", r.body)
			}
			zr := owner.get("/settings/teams/manifest.zip")
			wantStatus(t, zr, http.StatusOK)
			pkg, err := zip.NewReader(bytes.NewReader([]byte(zr.body)), int64(len(zr.body)))
			if err != nil {
				t.Fatalf("the app package is not a zip: %v", err)
			}
			if len(pkg.File) != 3 {
				t.Errorf("the app package holds %d files, want manifest.json and two icons", len(pkg.File))
			}

			if _, err := d.store.SaveTeamsConversation(ctx, &arbiter.TeamsConversation{AccountID: acct.ID, ID: teamsChannel,
				Name: "finance/approvals", Kind: arbiter.TeamsChannel, Title: "Finance › Approvals", ServiceURL: fake.ServiceURL}); err != nil {
				t.Fatal(err)
			}
			r = owner.post("/settings/teams/default", url.Values{"conversation": {"nowhere"}})
			wantStatus(t, r, http.StatusBadRequest)
			r = owner.post("/settings/teams/default", url.Values{"conversation": {"finance/approvals"}})
			if r.status != http.StatusSeeOther {
				t.Fatalf("default: %d\n%.2000s", r.status, r.body)
			}
			if c, _ := d.store.FindTeamsConnection(ctx, acct.ID); c.DefaultConversation != "finance/approvals" {
				t.Errorf("default %q", c.DefaultConversation)
			}
			if r := owner.follow(r); !strings.Contains(r.body, "teams:finance/approvals") {
				t.Errorf("the page does not name the conversation's target:\n%.3000s", r.body)
			}

			if r := owner.post("/settings/teams/disconnect", url.Values{}); r.status != http.StatusSeeOther {
				t.Fatalf("disconnect: %d", r.status)
			}
			if _, err := d.store.FindTeamsConnection(ctx, acct.ID); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
				t.Errorf("after disconnecting: %v", err)
			}
			events, err := d.store.ListAuditEvents(ctx, acct.ID, 50)
			if err != nil {
				t.Fatal(err)
			}
			kinds := map[string]bool{}
			for _, e := range events {
				kinds[e.Kind] = true
				if strings.Contains(e.Detail, teamsSecret) {
					t.Errorf("the audit log shows the secret: %q", e.Detail)
				}
			}
			for _, k := range []string{arbiter.AuditTeamsConnected, arbiter.AuditTeamsDefault, arbiter.AuditTeamsDisconnected} {
				if !kinds[k] {
					t.Errorf("no %s in the audit log", k)
				}
			}
		})
	}
}

// TestTeamsSettings_NeedsAKey: without ARBITER_SECRET_KEY the page says
// Teams cannot be connected, and a connect is refused 409.
func TestTeamsSettings_NeedsAKey(t *testing.T) {
	fake := teamsfake.New(t)
	fake.AddBot(teamsApp, teamsSecret)
	d := teamsDash(t, db.SQLite, fake, false)
	owner, _, _ := d.team()
	if r := owner.get("/settings/teams"); !strings.Contains(r.body, `data-testid="teams-needs-key"`) {
		t.Errorf("the page without a key:\n%.2000s", r.body)
	}
	r := owner.post("/settings/teams", url.Values{"app_id": {teamsApp}, "tenant_id": {teamsTenant}, "client_secret": {teamsSecret}})
	wantStatus(t, r, http.StatusConflict)
}

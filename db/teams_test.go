package db_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
)

const (
	teamsApp    = "1f0e2c7a-5b1d-4e8f-9a3c-7d6b5e4f3a21"
	teamsTenant = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
)

// TestTeamsConnections: an owner connects a bot, its secret sealed (not
// in the row) and opened on reading, found by account and by bot; another
// account cannot take the bot; conversations the bot joins get names, the
// second of a name "-2", and keep their name when they change; the
// default is one of them; a new bot forgets the old one's conversations;
// disconnecting forgets the bot and its conversations; every change is in
// the audit log.
func TestTeamsConnections(t *testing.T) {
	k, err := secretbox.Parse(secretbox.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Each(t, db.Options{Secrets: k}, func(t *testing.T, d *db.DB) {
		acct, err := d.FindOrCreateAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		other, err := d.FindOrCreateAccountByEmail(ctx, "other@example.com")
		if err != nil {
			t.Fatal(err)
		}
		by := arbiter.Actor{Email: arbiter.OperatorActor}
		in := arbiter.TeamsConnectionInput{AppID: teamsApp, TenantID: teamsTenant, ClientSecret: "s3cret~value.1"}
		if _, err := d.ConnectTeams(ctx, acct.ID, in, by); err != nil {
			t.Fatal(err)
		}
		if _, err := d.ConnectTeams(ctx, other.ID, in, by); !errors.Is(err, arbiter.ErrTeamsAppTaken) {
			t.Errorf("another account took the bot: %v", err)
		}
		rows, err := d.Rows(ctx, `SELECT client_secret FROM teams_connections`)
		if err != nil {
			t.Fatal(err)
		}
		if stored := fmt.Sprintf("%s", rows); strings.Contains(stored, "s3cret") {
			t.Errorf("the secret is stored in plaintext: %s", stored)
		}
		c, err := d.FindTeamsConnectionByApp(ctx, teamsApp)
		if err != nil || c.AccountID != acct.ID || c.ClientSecret != "s3cret~value.1" {
			t.Fatalf("by app: %+v, %v", c, err)
		}

		save := func(id, name string) *arbiter.TeamsConversation {
			t.Helper()
			got, err := d.SaveTeamsConversation(ctx, &arbiter.TeamsConversation{AccountID: acct.ID, ID: id, Name: name,
				Kind: arbiter.TeamsChannel, Title: "Finance › Approvals", ServiceURL: "https://smba.example/emea/"})
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
		if got := save("19:a@thread.tacv2", "finance/approvals"); got.Name != "finance/approvals" {
			t.Errorf("first: %q", got.Name)
		}
		if got := save("19:b@thread.tacv2", "finance/approvals"); got.Name != "finance/approvals-2" {
			t.Errorf("second of a name: %q", got.Name)
		}
		if got := save("19:a@thread.tacv2", "finance/renamed"); got.Name != "finance/approvals" {
			t.Errorf("a known conversation renamed itself: %q", got.Name)
		}
		if err := d.SetTeamsDefault(ctx, acct.ID, "nowhere", by); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("an unknown default: %v", err)
		}
		if err := d.SetTeamsDefault(ctx, acct.ID, "finance/approvals-2", by); err != nil {
			t.Fatal(err)
		}
		if c, _ := d.FindTeamsConnection(ctx, acct.ID); c.DefaultConversation != "finance/approvals-2" {
			t.Errorf("default %q", c.DefaultConversation)
		}
		if err := d.RemoveTeamsConversation(ctx, acct.ID, "19:a@thread.tacv2"); err != nil {
			t.Fatal(err)
		}
		if list, _ := d.ListTeamsConversations(ctx, acct.ID); len(list) != 1 || list[0].Name != "finance/approvals-2" {
			t.Errorf("after a removal: %+v", list)
		}
		// The same bot again keeps its conversations and default.
		if _, err := d.ConnectTeams(ctx, acct.ID, in, by); err != nil {
			t.Fatal(err)
		}
		if list, _ := d.ListTeamsConversations(ctx, acct.ID); len(list) != 1 {
			t.Errorf("reconnecting the same bot forgot its conversations: %+v", list)
		}
		in.AppID = "2a0e2c7a-5b1d-4e8f-9a3c-7d6b5e4f3a21"
		if _, err := d.ConnectTeams(ctx, acct.ID, in, by); err != nil {
			t.Fatal(err)
		}
		if list, _ := d.ListTeamsConversations(ctx, acct.ID); len(list) != 0 {
			t.Errorf("a new bot kept the old one's conversations: %+v", list)
		}
		save("19:c@thread.tacv2", "ops/general")
		if err := d.DisconnectTeams(ctx, acct.ID, by); err != nil {
			t.Fatal(err)
		}
		if _, err := d.FindTeamsConnection(ctx, acct.ID); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("after disconnecting: %v", err)
		}
		if list, _ := d.ListTeamsConversations(ctx, acct.ID); len(list) != 0 {
			t.Errorf("disconnecting kept conversations: %+v", list)
		}
		events, err := d.ListAuditEvents(ctx, acct.ID, 50)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, e := range events {
			kinds[e.Kind]++
			if strings.Contains(e.Detail, "s3cret") {
				t.Errorf("the audit log shows the secret: %q", e.Detail)
			}
		}
		if kinds[arbiter.AuditTeamsConnected] != 3 || kinds[arbiter.AuditTeamsDefault] != 1 || kinds[arbiter.AuditTeamsDisconnected] != 1 {
			t.Errorf("audit kinds %v", kinds)
		}
	})
}

// TestTeamsDeciders: the deciders are the Teams users of the bot linked to
// reviewers of the account, not to people outside it, nor of another bot.
func TestTeamsDeciders(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct, err := d.FindOrCreateAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.FindOrCreateAccountByEmail(ctx, "stranger@example.com"); err != nil {
			t.Fatal(err)
		}
		link := func(app, user, email, accountID string) {
			t.Helper()
			p, err := d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: email, Email: email, EmailVerified: true})
			if err != nil {
				t.Fatal(err)
			}
			token, err := d.OfferChatLink(ctx, accountID, arbiter.ChatUser{Provider: arbiter.ChatTeams, Workspace: app, UserID: user, Email: email})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.LinkChatUser(ctx, token, arbiter.Actor{Email: email, PersonID: p.ID}); err != nil {
				t.Fatal(err)
			}
		}
		stranger, _ := d.FindAccountByEmail(ctx, "stranger@example.com")
		link(teamsApp, "29:owner", "owner@example.com", acct.ID)
		link("another-bot", "29:owner-elsewhere", "owner@example.com", acct.ID)
		link(teamsApp, "29:stranger", "stranger@example.com", stranger.ID)
		got, err := d.TeamsDeciders(ctx, acct.ID, teamsApp)
		if err != nil || strings.Join(got, ",") != "29:owner" {
			t.Errorf("deciders %v, %v; want the owner's only", got, err)
		}
	})
}

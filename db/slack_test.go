package db_test

import (
	"cmp"
	"errors"
	"fmt"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
)

// TestConnectSlack_WorkspaceFull: one Slack workspace connects to at
// most arbiter.MaxSlackAccountsPerWorkspace accounts (an interaction's
// signature is checked against each one's secret); the next account is
// refused and nothing is stored, while an account already connected may
// connect again.
func TestConnectSlack_WorkspaceFull(t *testing.T) {
	k, err := secretbox.Parse(secretbox.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	dbtest.Each(t, db.Options{Secrets: k}, func(t *testing.T, d *db.DB) {
		in := arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP, BotToken: "xoxb-1",
			SigningSecret: "0123456789abcdef0123", DefaultChannel: "#refunds"}
		by := arbiter.Actor{Email: arbiter.OperatorActor}
		var first string
		for i := range arbiter.MaxSlackAccountsPerWorkspace {
			acct, err := d.FindOrCreateAccountByEmail(ctx, fmt.Sprintf("owner%d@example.com", i))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.ConnectSlack(ctx, acct.ID, in, "T0FULL", by); err != nil {
				t.Fatalf("account %d: %v", i, err)
			}
			first = cmp.Or(first, acct.ID)
		}
		extra, err := d.FindOrCreateAccountByEmail(ctx, "extra@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.ConnectSlack(ctx, extra.ID, in, "T0FULL", by); !errors.Is(err, arbiter.ErrSlackWorkspaceFull) {
			t.Errorf("the eleventh account: %v, want ErrSlackWorkspaceFull", err)
		}
		if _, err := d.FindSlackConnection(ctx, extra.ID); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("the refused connection was stored: %v", err)
		}
		if _, err := d.ConnectSlack(ctx, extra.ID, in, "T0OTHER", by); err != nil {
			t.Errorf("another workspace: %v", err)
		}
		if _, err := d.ConnectSlack(ctx, first, in, "T0FULL", by); err != nil {
			t.Errorf("a connected account connecting again: %v", err)
		}
	})
}

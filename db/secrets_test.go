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

// storedSecrets returns every secret column of the store as written.
func storedSecrets(t *testing.T, d *db.DB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT secret, previous_secret FROM webhook_endpoints`,
		`SELECT secret, previous_secret FROM webhook_callback_secrets`,
		`SELECT bot_token, app_token, signing_secret FROM slack_connections`,
	} {
		rows, err := d.Rows(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			for _, v := range r {
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "%v\n", v)
			}
		}
	}
	return b.String()
}

func keyring(t *testing.T, keys ...string) *secretbox.Keyring {
	t.Helper()
	k, err := secretbox.Parse(strings.Join(keys, ","))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestResealSecrets: webhook secrets written before a key was configured
// are sealed by ResealSecrets (the row holds no plaintext) and read back
// the same; a rotated key (new first, old after) opens them and reseals
// them under the new key, which then reads them alone; a store without
// the key refuses to run over sealed rows.
func TestResealSecrets(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			plain := dbtest.OpenURL(t, url, db.Options{})
			a := newAccount(t, plain, "secrets@example.com")
			e := newWebhookEndpoint(t, plain, a.ID)
			rotated, err := plain.RotateWebhookSecret(ctx, a.ID, e.ID, owner)
			if err != nil {
				t.Fatal(err)
			}
			cb, err := plain.FindCallbackSecret(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if raw := storedSecrets(t, plain); !strings.Contains(raw, rotated.Secret) {
				t.Fatalf("without a key the secret is not stored as before: %s", raw)
			}
			if r, err := plain.ResealSecrets(ctx); err != nil || r.Plaintext != 3 {
				t.Fatalf("ResealSecrets without a key = %+v, %v; want 3 plaintext", r, err)
			}

			oldKey, newKey := secretbox.NewKey(), secretbox.NewKey()
			sealed := dbtest.OpenURL(t, url, db.Options{Secrets: keyring(t, oldKey)})
			if r, err := sealed.ResealSecrets(ctx); err != nil || r.Resealed != 3 {
				t.Fatalf("ResealSecrets = %+v, %v; want 3 resealed", r, err)
			}
			raw := storedSecrets(t, sealed)
			for _, s := range []string{rotated.Secret, rotated.PreviousSecret, cb.Secret, "whsec_"} {
				if strings.Contains(raw, s) {
					t.Fatalf("a row holds plaintext %q: %s", s, raw)
				}
			}
			check := func(t *testing.T, d *db.DB) {
				t.Helper()
				got, err := d.FindWebhookEndpoint(ctx, a.ID, e.ID)
				if err != nil || got.Secret != rotated.Secret || got.PreviousSecret != rotated.PreviousSecret {
					t.Fatalf("endpoint read back = %+v, %v", got, err)
				}
				list, err := d.ListWebhookEndpoints(ctx, a.ID)
				if err != nil || len(list) == 0 || list[0].Secret != rotated.Secret {
					t.Fatalf("list = %v, %v", list, err)
				}
				c, err := d.FindCallbackSecret(ctx, a.ID)
				if err != nil || c.Secret != cb.Secret {
					t.Fatalf("callback secret read back = %+v, %v", c, err)
				}
			}
			check(t, sealed)

			// A new endpoint under the key is sealed as it is written.
			fresh := newWebhookEndpoint(t, sealed, a.ID)
			if raw := storedSecrets(t, sealed); strings.Contains(raw, fresh.Secret) {
				t.Fatal("a new endpoint's secret is stored in plaintext under a key")
			}

			// Slack's tokens are sealed as they are written.
			const bot, signing = "xoxb-plain-bot-token", "0123456789abcdef0123"
			if _, err := sealed.ConnectSlack(ctx, a.ID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP, BotToken: bot,
				SigningSecret: signing, DefaultChannel: "#refunds"}, "T1", owner); err != nil {
				t.Fatal(err)
			}
			if raw := storedSecrets(t, sealed); strings.Contains(raw, bot) || strings.Contains(raw, signing) {
				t.Fatalf("Slack's tokens are stored in plaintext: %s", raw)
			}
			if _, err := plain.ConnectSlack(ctx, a.ID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP, BotToken: bot,
				SigningSecret: signing, DefaultChannel: "#refunds"}, "T1", owner); !errors.Is(err, arbiter.ErrSlackNeedsKey) {
				t.Fatalf("connecting Slack without a key = %v, want ErrSlackNeedsKey", err)
			}

			// Rotation: the new key first, the old one after.
			both := dbtest.OpenURL(t, url, db.Options{Secrets: keyring(t, newKey, oldKey)})
			check(t, both)
			if r, err := both.ResealSecrets(ctx); err != nil || r.Resealed != 6 {
				t.Fatalf("ResealSecrets after rotation = %+v, %v; want 6 resealed", r, err)
			}
			newOnly := dbtest.OpenURL(t, url, db.Options{Secrets: keyring(t, newKey)})
			check(t, newOnly)
			if got, err := newOnly.FindWebhookEndpoint(ctx, a.ID, fresh.ID); err != nil || got.Secret != fresh.Secret {
				t.Fatalf("the fresh endpoint after rotation = %+v, %v", got, err)
			}
			if c, err := newOnly.FindSlackConnection(ctx, a.ID); err != nil || c.BotToken != bot || c.SigningSecret != signing {
				t.Fatalf("the Slack connection after rotation = %+v, %v", c, err)
			}
			if r, err := newOnly.ResealSecrets(ctx); err != nil || r.Resealed != 0 {
				t.Fatalf("a second reseal = %+v, %v; want nothing to do", r, err)
			}

			if _, err := plain.ResealSecrets(ctx); err == nil || strings.Contains(err.Error(), newKey) {
				t.Fatalf("a store without the key over sealed rows = %v, want a refusal that names no key", err)
			}
			if _, err := plain.FindWebhookEndpoint(ctx, a.ID, e.ID); err == nil {
				t.Fatal("a store without the key read a sealed secret")
			}
		})
	}
}

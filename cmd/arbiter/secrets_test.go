package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
)

// TestRun_ResealSecrets: `arbiter admin reseal-secrets` seals a webhook
// secret written without a key and prints how many it sealed; run again
// it has nothing to do; without ARBITER_SECRET_KEY it refuses; a bad key
// is refused at start without being echoed.
func TestRun_ResealSecrets(t *testing.T) {
	url := "sqlite:" + filepath.Join(t.TempDir(), "a.db")
	store := dbtest.OpenURL(t, url, db.Options{})
	a, err := store.FindOrCreateAccountByEmail(context.Background(), "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	e, err := store.CreateWebhookEndpoint(context.Background(), a.ID, arbiter.WebhookEndpointInput{URL: "https://example.com/h"}, false, arbiter.Actor{Email: "ops@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	key := secretbox.NewKey()
	keyed := env(map[string]string{"ARBITER_DATABASE_URL": url, "ARBITER_SECRET_KEY": key})
	if out := runOK(t, keyed, "admin", "reseal-secrets"); out != "1\n" {
		t.Fatalf("reseal-secrets printed %q, want 1", out)
	}
	if out := runOK(t, keyed, "admin", "reseal-secrets"); out != "0\n" {
		t.Fatalf("a second reseal-secrets printed %q, want 0", out)
	}
	// The keyless store reads only plaintext: the row is sealed now.
	if _, err := store.FindWebhookEndpoint(context.Background(), a.ID, e.ID); err == nil {
		t.Fatal("the secret is still readable without the key after reseal-secrets")
	}
	k, _ := secretbox.Parse(key)
	sealed := dbtest.OpenURL(t, url, db.Options{Secrets: k})
	if got, err := sealed.FindWebhookEndpoint(context.Background(), a.ID, e.ID); err != nil || got.Secret != e.Secret {
		t.Fatalf("the resealed secret read with the key = %v, %v", got, err)
	}
	for _, vars := range []map[string]string{
		{"ARBITER_DATABASE_URL": url},
		{"ARBITER_DATABASE_URL": url, "ARBITER_SECRET_KEY": "c2hvcnQ="},
	} {
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), []string{"admin", "reseal-secrets"}, env(vars), nil, &stdout, &stderr)
		if err == nil || stdout.Len() != 0 || strings.Contains(err.Error(), "c2hvcnQ=") {
			t.Errorf("reseal-secrets with %v = %v (stdout %q), want a refusal that does not echo the key", vars, err, stdout.String())
		}
	}
}

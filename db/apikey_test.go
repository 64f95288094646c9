package db_test

import (
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

func TestAPIKeyService(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "keys@example.com")
		other := newAccount(t, d, "other@example.com")
		k, plaintext, err := d.CreateAPIKey(ctx, acct.ID, "  ci  ", arbiter.Actor{Email: "test@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		if !arbiter.ValidAPIKey(plaintext) || k.Name != "ci" || k.Hash != arbiter.HashToken(plaintext) || k.Prefix != plaintext[:13] {
			t.Fatalf("key = %+v, plaintext %q", k, plaintext)
		}
		found, err := d.FindAPIKeyByHash(ctx, arbiter.HashToken(plaintext))
		if err != nil || found.ID != k.ID || found.AccountID != acct.ID {
			t.Fatalf("found = %+v, %v", found, err)
		}
		_, err = d.FindAPIKeyByHash(ctx, arbiter.HashToken(arbiter.NewAPIKeyPlaintext()))
		wantCode(t, err, arbiter.ENOTFOUND)

		t.Run("ErrInvalidName", func(t *testing.T) {
			_, _, err := d.CreateAPIKey(ctx, acct.ID, " ", arbiter.Actor{Email: "test@example.com"})
			wantCode(t, err, arbiter.EINVALID)
			_, _, err = d.CreateAPIKey(ctx, "acct_missing", "x", arbiter.Actor{Email: "test@example.com"})
			wantCode(t, err, arbiter.ENOTFOUND)
		})
		t.Run("TouchNeverGoesBack", func(t *testing.T) {
			if err := d.TouchAPIKeys(ctx, map[string]arbiter.Timestamp{k.ID: 2000}); err != nil {
				t.Fatal(err)
			}
			if err := d.TouchAPIKeys(ctx, map[string]arbiter.Timestamp{k.ID: 1000}); err != nil {
				t.Fatal(err)
			}
			got, _ := d.FindAPIKeyByID(ctx, k.ID)
			if got.LastUsedAt == nil || *got.LastUsedAt != 2000 {
				t.Fatalf("last_used_at = %v, want 2000", got.LastUsedAt)
			}
		})
		t.Run("Revoke", func(t *testing.T) {
			_, err := d.RevokeAPIKey(ctx, other.ID, k.ID, arbiter.Actor{Email: "test@example.com"})
			wantCode(t, err, arbiter.ENOTFOUND)
			revoked, err := d.RevokeAPIKey(ctx, acct.ID, k.ID, arbiter.Actor{Email: "test@example.com"})
			if err != nil || revoked.RevokedAt == nil {
				t.Fatalf("revoke = %+v, %v", revoked, err)
			}
			_, err = d.RevokeAPIKey(ctx, "", k.ID, arbiter.Actor{Email: "test@example.com"})
			wantCode(t, err, arbiter.ECONFLICT)
			keys, err := d.ListAPIKeys(ctx, acct.ID)
			if err != nil || len(keys) != 1 || keys[0].RevokedAt == nil {
				t.Fatalf("revoked keys stay listed: %+v, %v", keys, err)
			}
		})
	})
}

// The key checker renews the keys in use with one read of many hashes:
// each known key comes back as FindAPIKeyByHash returns it, revoked or
// not, unknown hashes are left out, and more hashes than one statement
// asks for are read all the same.
func TestFindAPIKeysByHash_ReadsManyAtOnce(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "keys@example.com")
		by := arbiter.Actor{Email: "test@example.com"}
		var hashes []string
		for range 1100 {
			hashes = append(hashes, arbiter.HashToken(arbiter.NewAPIKeyPlaintext()))
		}
		want := map[string]*arbiter.APIKey{}
		for i := range 3 {
			k, _, err := d.CreateAPIKey(ctx, acct.ID, "ci", by)
			if err != nil {
				t.Fatal(err)
			}
			if i == 1 {
				if k, err = d.RevokeAPIKey(ctx, acct.ID, k.ID, by); err != nil {
					t.Fatal(err)
				}
			}
			want[k.Hash] = k
			hashes = append(hashes, k.Hash) // the last ones, past the first statements
		}
		got, err := d.FindAPIKeysByHash(ctx, hashes)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d keys found of %d hashes, want the %d known", len(got), len(hashes), len(want))
		}
		for _, k := range got {
			w := want[k.Hash]
			if w == nil || k.ID != w.ID || k.AccountID != acct.ID || k.Active() != w.Active() {
				t.Errorf("found %+v, want %+v", k, w)
			}
		}
		if none, err := d.FindAPIKeysByHash(ctx, nil); err != nil || len(none) != 0 {
			t.Errorf("no hashes: %v, %v", none, err)
		}
	})
}

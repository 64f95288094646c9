package db_test

import (
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

func TestAccountService(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "Person@Example.com")
		b := newAccount(t, d, "person@example.com")
		if a.ID != b.ID || a.Email != "person@example.com" {
			t.Fatalf("same e-mail, two accounts: %+v %+v", a, b)
		}
		_, err := d.FindOrCreateAccountByEmail(ctx, "not an address")
		wantCode(t, err, arbiter.EINVALID)
		_, err = d.FindAccountByEmail(ctx, "nobody@example.com")
		wantCode(t, err, arbiter.ENOTFOUND)
	})
}

package db_test

import (
	"database/sql"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// TestAPIKeyService_RevokeAPIKey_StoreErrorIsNotNotFound revokes a key on a
// store that cannot answer: the error is the store's, not "not found".
func TestAPIKeyService_RevokeAPIKey_StoreErrorIsNotNotFound(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			d, err := db.Open(ctx, dbtest.URL(t, dialect), db.Options{})
			if err != nil {
				t.Fatal(err)
			}
			d.Close()
			_, err = d.RevokeAPIKey(ctx, "", "key_0000000000000000", arbiter.Actor{Email: arbiter.OperatorActor})
			if code := arbiter.ErrorCode(err); code == arbiter.ENOTFOUND || err == nil {
				t.Fatalf("RevokeAPIKey on a closed store = %v (%s), want the store's error", err, code)
			}
			if !errors.Is(err, sql.ErrConnDone) && !strings.Contains(err.Error(), "database is closed") {
				t.Errorf("the error %q lost its cause", err)
			}
		})
	}
}

// TestAPIKeyService_KeyAuditInTheSameTransaction records a key's creation
// and revocation in the account's audit log in the key's own transaction:
// when the audit write fails, no key exists whose plaintext nobody saw, and
// a key stays active until its revocation is on record.
func TestAPIKeyService_KeyAuditInTheSameTransaction(t *testing.T) {
	t.Parallel()
	by := arbiter.Actor{Email: "owner@example.com", Client: arbiter.Client{IP: "203.0.113.9", UserAgent: "test/1"}}
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			d := dbtest.OpenURL(t, url, db.Options{})
			acct := newAccount(t, d, "owner@example.com")

			k, _, err := d.CreateAPIKey(ctx, acct.ID, "ci", by)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.RevokeAPIKey(ctx, acct.ID, k.ID, by); err != nil {
				t.Fatal(err)
			}
			events, err := d.ListAuditEvents(ctx, acct.ID, 10)
			if err != nil || len(events) != 2 {
				t.Fatalf("audit log = %+v (%v), want the creation and the revocation", events, err)
			}
			for i, kind := range []string{arbiter.AuditKeyRevoked, arbiter.AuditKeyCreated} {
				if e := events[i]; e.Kind != kind || e.Actor != by.Email || e.ClientIP != "203.0.113.9" ||
					e.UserAgent != "test/1" || e.Detail != "ci ("+k.Prefix+"…)" {
					t.Errorf("event %d = %+v, want %s by %s", i, e, kind, by.Email)
				}
			}

			kept, _, err := d.CreateAPIKey(ctx, acct.ID, "kept", by)
			if err != nil {
				t.Fatal(err)
			}
			refuseAuditWrites(t, dialect, url)
			if _, _, err := d.CreateAPIKey(ctx, acct.ID, "unrecorded", by); err == nil {
				t.Fatal("a key was created while its audit event could not be written")
			}
			if _, err := d.RevokeAPIKey(ctx, acct.ID, kept.ID, by); err == nil {
				t.Fatal("a key was revoked while its audit event could not be written")
			}
			keys, err := d.ListAPIKeys(ctx, acct.ID)
			if err != nil || len(keys) != 2 {
				t.Fatalf("keys = %d (%v), want the two made before: no key without its audit event", len(keys), err)
			}
			for _, k := range keys {
				if k.ID == kept.ID && !k.Active() {
					t.Error("the key was revoked without its audit event")
				}
			}
		})
	}
}

// refuseAuditWrites makes every insert into audit_events fail, as a full
// disk or a broken table would.
func refuseAuditWrites(t *testing.T, dialect, url string) {
	t.Helper()
	driver, dsn := "postgres", url
	stmts := []string{
		`CREATE FUNCTION refuse_audit() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'audit refused'; END $$ LANGUAGE plpgsql`,
		`CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_audit()`,
	}
	if dialect == db.SQLite {
		driver, dsn = "sqlite", strings.TrimPrefix(url, "sqlite:")
		stmts = []string{`CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events BEGIN SELECT RAISE(ABORT, 'audit refused'); END`}
	}
	raw, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, s := range stmts {
		if _, err := raw.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// TestAccountService_SetDailyCap_Bounds refuses a cap the column cannot
// hold with EINVALID, changing nothing, where Postgres used to fail with an
// internal error.
func TestAccountService_SetDailyCap_Bounds(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		largest := arbiter.MaxDailyTaskCap
		if err := d.SetDailyCap(ctx, acct.ID, &largest); err != nil {
			t.Fatalf("the largest cap: %v", err)
		}
		for _, bad := range []int{arbiter.MaxDailyTaskCap + 1, 99999999999, -1} {
			wantCode(t, d.SetDailyCap(ctx, acct.ID, &bad), arbiter.EINVALID)
		}
		if _, cap, err := d.UsageToday(ctx, acct.ID); err != nil || cap != largest {
			t.Errorf("cap = %d (%v), want %d unchanged", cap, err, largest)
		}
	})
}

// TestHealthService_KeepsTheCause reports a store that does not answer as
// unavailable, with the driver's error in the chain for the log.
func TestHealthService_KeepsTheCause(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			d, err := db.Open(ctx, dbtest.URL(t, dialect), db.Options{})
			if err != nil {
				t.Fatal(err)
			}
			d.Close()
			err = d.Health(ctx)
			wantCode(t, err, arbiter.EUNAVAILABLE)
			if arbiter.ErrorMessage(err) != "The database does not answer." || !strings.Contains(err.Error(), "database is closed") {
				t.Errorf("Health = %q (%q), want the sentence for callers and the driver's error for the log",
					arbiter.ErrorMessage(err), err)
			}
		})
	}
}

// TestCreateGroup_FailureIsLogged logs why a group statement failed before
// its creates are stored one by one.
func TestCreateGroup_FailureIsLogged(t *testing.T) {
	t.Parallel()
	var logs testutil.SyncBuffer
	d := dbtest.Open(t, db.Postgres, db.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	a := newAccount(t, d, "a@example.com")
	if _, errs := d.StoreGroup(ctx, []string{a.ID, "acct_missing"}, taskCreate("Grouped")); errs[0] != nil || errs[1] == nil {
		t.Fatalf("errors = %v", errs)
	}
	if got := logs.String(); !strings.Contains(got, "grouped create failed") || !strings.Contains(got, "tasks_account_id_fkey") {
		t.Errorf("the log does not say why the group failed:\n%s", got)
	}
	logs.Reset()
	if _, errs := d.ReadGroup(ctx, [][2]string{{a.ID, "tsk_0000000000000000"}, {a.ID, "tsk_0000000000000001"}}); errs[0] == nil {
		t.Fatal("unknown tasks were found")
	}
	if got := logs.String(); got != "" {
		t.Errorf("a group read that worked logged:\n%s", got)
	}
}

package db_test

import (
	"time"

	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestMigrate_OnePersonAccountsBecomeOwners migrates a store that an older
// release (one person per account) filled: the account becomes one owner,
// and its key, its task, its identity and its signed-in session all go on
// working.
func TestMigrate_OnePersonAccountsBecomeOwners(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			d, err := db.Open(ctx, dbtest.URL(t, dialect), db.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			if err := d.MigrateUpTo(ctx, 11); err != nil {
				t.Fatal(err)
			}
			const acct = "acct_0123456789abcdef"
			now := int64(arbiter.TimestampOf(time.Now()))
			sessionToken, keyPlaintext := arbiter.NewSecretToken(), arbiter.NewAPIKeyPlaintext()
			for _, q := range []struct {
				sql  string
				args []any
			}{
				{`INSERT INTO accounts (id, email, created_at) VALUES (?, ?, ?)`, []any{acct, "owner@example.com", now}},
				{`INSERT INTO accounts (id, email, created_at) VALUES (?, ?, ?)`, []any{arbiter.DemoAccountID, arbiter.DemoAccountEmail, now}},
				{`INSERT INTO identities (id, account_id, provider, subject, email, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
					[]any{"idn_1", acct, arbiter.SignInGitHub, "7", "owner@example.com", now}},
				{`INSERT INTO sessions (id, hash, account_id, method, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
					[]any{"ses_1", arbiter.HashToken(sessionToken), acct, arbiter.SignInGitHub, now, now + arbiter.SessionTTL.Milliseconds()}},
				{`INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
					[]any{"key_1", acct, "backend", arbiter.APIKeyDisplayPrefix(keyPlaintext), arbiter.HashToken(keyPlaintext), now}},
				{`INSERT INTO tasks (id, account_id, status, task_type, source, touchpoint, prompt, allowed_verdicts, confidence_threshold, created_at)
					VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
					[]any{"tsk_0123456789abcdef", acct, arbiter.StatusHumanNeeded, "decide", "", "chat", "Refund?", `["approve","reject"]`, 0.8, now}},
			} {
				if err := d.Exec(ctx, q.sql, q.args...); err != nil {
					t.Fatalf("%s: %v", q.sql, err)
				}
			}
			if err := d.Migrate(ctx); err != nil {
				t.Fatal(err)
			}

			// The session is still signed in, now as the account's owner.
			s, err := d.FindSessionByToken(ctx, sessionToken)
			if err != nil || s.AccountID != acct || s.Role != arbiter.RoleOwner || s.Email != "owner@example.com" || s.PersonID == "" {
				t.Fatalf("session after the migration = %+v, %v", s, err)
			}
			members, err := d.ListMembers(ctx, acct)
			if err != nil || len(members) != 1 || members[0].PersonID != s.PersonID || members[0].Role != arbiter.RoleOwner {
				t.Fatalf("members = %+v, %v", members, err)
			}
			// The key authenticates the same account.
			k, err := d.FindAPIKeyByHash(ctx, arbiter.HashToken(keyPlaintext))
			if err != nil || k.AccountID != acct || !k.Active() {
				t.Fatalf("key = %+v, %v", k, err)
			}
			// The task is the account's, still waiting for a human.
			task, err := d.FindTaskByID(ctx, acct, "tsk_0123456789abcdef")
			if err != nil || task.Status != arbiter.StatusHumanNeeded {
				t.Fatalf("task = %+v, %v", task, err)
			}
			// The identity signs in as the same person, in the same account.
			p, err := d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInGitHub, Subject: "7", Email: "owner@example.com", EmailVerified: true})
			if err != nil || p.ID != s.PersonID {
				t.Fatalf("sign-in with the old identity = %+v, %v", p, err)
			}
			fresh, _, err := d.CreateSession(ctx, p.ID, arbiter.SignInGitHub, arbiter.Client{})
			if err != nil || fresh.AccountID != acct {
				t.Fatalf("new session = %+v, %v", fresh, err)
			}
			// The owner decides the task as before.
			if _, err := d.DecideTask(ctx, acct, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: p.Email, ReviewerID: p.ID}); err != nil {
				t.Fatalf("decide after the migration: %v", err)
			}
			// Nobody became a member of the demo account.
			if demo, err := d.ListMembers(ctx, arbiter.DemoAccountID); err != nil || len(demo) != 0 {
				t.Errorf("demo members = %+v, %v", demo, err)
			}
		})
	}
}

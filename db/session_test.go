package db_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// movableClock is a store clock a test can move.
type movableClock struct{ t time.Time }

func (c *movableClock) now() time.Time { return c.t }

func TestSessionService(t *testing.T) {
	t.Parallel()
	clock := &movableClock{t: time.Now()}
	dbtest.Each(t, db.Options{Now: clock.now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		person := personOf(t, d, "a@example.com")
		s, token, err := d.CreateSession(ctx, person.ID, arbiter.SignInGitHub, arbiter.Client{IP: "192.0.2.1", UserAgent: "ua"})
		if err != nil {
			t.Fatal(err)
		}
		if len(token) != 64 || s.Email != "a@example.com" || s.Method != arbiter.SignInGitHub {
			t.Fatalf("session = %+v, token %q", s, token)
		}
		got, err := d.FindSessionByToken(ctx, token)
		if err != nil || got.ID != s.ID || got.AccountID != acct.ID || got.Email != "a@example.com" ||
			got.Role != arbiter.RoleOwner || got.PersonID != person.ID || len(got.Accounts) != 1 {
			t.Fatalf("find = %+v, %v", got, err)
		}
		// Only the hash is stored: the token itself finds nothing.
		_, err = d.FindSessionByToken(ctx, arbiter.HashToken(token))
		wantCode(t, err, arbiter.EUNAUTHORIZED)

		// The sign-in is audited in the same step.
		events, err := d.ListAuditEvents(ctx, acct.ID, 10)
		if err != nil || len(events) != 1 || events[0].Kind != arbiter.AuditSignIn || events[0].ClientIP != "192.0.2.1" || events[0].Actor != "a@example.com" {
			t.Fatalf("audit = %+v, %v", events, err)
		}

		if err := d.DeleteSession(ctx, token); err != nil {
			t.Fatal(err)
		}
		_, err = d.FindSessionByToken(ctx, token)
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		if err := d.DeleteSession(ctx, token); err != nil {
			t.Errorf("ending an ended session: %v", err)
		}

		// Sessions expire.
		_, token, _ = d.CreateSession(ctx, person.ID, arbiter.SignInEmail, arbiter.Client{})
		clock.t = clock.t.Add(arbiter.SessionTTL + time.Minute)
		_, err = d.FindSessionByToken(ctx, token)
		wantCode(t, err, arbiter.EUNAUTHORIZED)

		_, _, err = d.CreateSession(ctx, "per_nobody", arbiter.SignInEmail, arbiter.Client{})
		wantCode(t, err, arbiter.ENOTFOUND)
	})
}

func TestSessionService_SessionSecretIsKept(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			first, err := dbtest.OpenURL(t, url, db.Options{}).SessionSecret(ctx)
			if err != nil || len(first) < 64 {
				t.Fatalf("secret = %q, %v", first, err)
			}
			// A restart, or another process, reads the same secret.
			again, err := dbtest.OpenURL(t, url, db.Options{}).SessionSecret(ctx)
			if err != nil || again != first {
				t.Fatalf("secret after a restart = %q, %v; want the first one", again, err)
			}
		})
	}
}

func TestLoginTokenService(t *testing.T) {
	t.Parallel()
	clock := &movableClock{t: time.Now()}
	dbtest.Each(t, db.Options{Now: clock.now}, func(t *testing.T, d *db.DB) {
		token, err := d.CreateLoginToken(ctx, "Someone@Example.com")
		if err != nil || len(token) != 64 {
			t.Fatalf("token = %q, %v", token, err)
		}
		if email, err := d.CheckLoginToken(ctx, token); err != nil || email != "someone@example.com" {
			t.Fatalf("check = %q, %v", email, err)
		}
		email, err := d.RedeemLoginToken(ctx, token)
		if err != nil || email != "someone@example.com" {
			t.Fatalf("redeem = %q, %v", email, err)
		}
		_, err = d.RedeemLoginToken(ctx, token)
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		_, err = d.CheckLoginToken(ctx, token)
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		_, err = d.RedeemLoginToken(ctx, arbiter.NewSecretToken())
		wantCode(t, err, arbiter.EUNAUTHORIZED)

		late, _ := d.CreateLoginToken(ctx, "someone@example.com")
		clock.t = clock.t.Add(arbiter.LoginTokenTTL - time.Second)
		_, err = d.CheckLoginToken(ctx, late)
		wantCode(t, err, "")
		clock.t = clock.t.Add(2 * time.Second)
		_, err = d.CheckLoginToken(ctx, late)
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		_, err = d.RedeemLoginToken(ctx, late)
		wantCode(t, err, arbiter.EUNAUTHORIZED)

		_, err = d.CreateLoginToken(ctx, "not an address")
		wantCode(t, err, arbiter.EINVALID)
	})
}

func TestIdentityService_SignInWithIdentity(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		gh, err := d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInGitHub, Subject: "42", Email: "Ann@Example.com", EmailVerified: true})
		if err != nil || gh.Email != "ann@example.com" {
			t.Fatalf("first sign-in = %+v, %v", gh, err)
		}
		// Same verified address, another provider: the same account.
		oidc, err := d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInOIDC, Subject: "ann", Email: "ann@example.com", EmailVerified: true})
		if err != nil || oidc.ID != gh.ID {
			t.Fatalf("OIDC with the same address = %+v, %v; want account %s", oidc, err, gh.ID)
		}
		// A known identity keeps its account when its address changes.
		moved, err := d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInGitHub, Subject: "42", Email: "ann@new.example", EmailVerified: true})
		if err != nil || moved.ID != gh.ID {
			t.Fatalf("known identity with a new address = %+v, %v", moved, err)
		}
		// An unverified address never reaches an account.
		_, err = d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInGoogle, Subject: "g1", Email: "ann@example.com"})
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		_, err = d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInGoogle, Subject: "", Email: "ann@example.com", EmailVerified: true})
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		// A new address, a new account.
		bob, err := d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "bob@example.com", Email: "bob@example.com", EmailVerified: true})
		if err != nil || bob.ID == gh.ID {
			t.Fatalf("bob = %+v, %v", bob, err)
		}
	})
}

// personOf returns the person of the address, as signing in with an e-mail
// link makes them.
func personOf(t *testing.T, d *db.DB, email string) *arbiter.Person {
	t.Helper()
	p, err := d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: email, Email: email, EmailVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAuditService(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "a@example.com")
		b := newAccount(t, d, "b@example.com")
		long := make([]byte, 2000)
		for i := range long {
			long[i] = 'x'
		}
		for i, kind := range []string{arbiter.AuditKeyCreated, arbiter.AuditKeyRevoked} {
			e := &arbiter.AuditEvent{AccountID: a.ID, Kind: kind, Actor: "a@example.com", Detail: "ci (svc_live_abcd…)", ClientIP: "::1", UserAgent: string(long)}
			if err := d.RecordAuditEvent(ctx, e); err != nil || e.ID == 0 || e.CreatedAt == 0 {
				t.Fatalf("record %d: %+v, %v", i, e, err)
			}
		}
		d.RecordAuditEvent(ctx, &arbiter.AuditEvent{AccountID: b.ID, Kind: arbiter.AuditKeyCreated, Actor: "b@example.com"})
		events, err := d.ListAuditEvents(ctx, a.ID, 10)
		if err != nil || len(events) != 2 {
			t.Fatalf("events = %v, %v", events, err)
		}
		if events[0].Kind != arbiter.AuditKeyRevoked || events[1].Kind != arbiter.AuditKeyCreated {
			t.Errorf("not newest first: %s, %s", events[0].Kind, events[1].Kind)
		}
		if len(events[0].UserAgent) != arbiter.MaxUserAgentChars {
			t.Errorf("user agent kept at %d characters, want %d", len(events[0].UserAgent), arbiter.MaxUserAgentChars)
		}
		if events, _ := d.ListAuditEvents(ctx, a.ID, 1); len(events) != 1 {
			t.Errorf("limit 1 gave %d events", len(events))
		}
	})
}

func TestSignIn_DemoAccountIsNeverATarget(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		// An identity provider vouching for the demo account's address, by
		// any provider and in any case, links nothing and signs in nowhere.
		for _, id := range []arbiter.ExternalIdentity{
			{Provider: arbiter.SignInOIDC, Subject: "evil-1", Email: arbiter.DemoAccountEmail, EmailVerified: true},
			{Provider: arbiter.SignInGitHub, Subject: "evil-2", Email: "Demo@Arbiter.Invalid", EmailVerified: true},
			{Provider: arbiter.SignInEmail, Subject: arbiter.DemoAccountEmail, Email: arbiter.DemoAccountEmail, EmailVerified: true},
		} {
			a, err := d.SignInWithIdentity(ctx, id)
			wantCode(t, err, arbiter.EUNAUTHORIZED)
			if a != nil {
				t.Errorf("%s signed in to %s", id.Provider, a.ID)
			}
		}
		// No e-mail link is made for it.
		token, err := d.CreateLoginToken(ctx, arbiter.DemoAccountEmail)
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		if token != "" {
			t.Error("a sign-in link was made for the demo account")
		}
		// A person, identity and session made before these rules existed:
		// none of them works any more, no new session starts for the
		// person, and none is audited.
		old, person, err := d.InsertIdentityAndSession(ctx, arbiter.DemoAccountID, arbiter.SignInOIDC, "linked-before")
		if err != nil {
			t.Fatal(err)
		}
		_, err = d.FindSessionByToken(ctx, old)
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		_, _, err = d.CreateSession(ctx, person, arbiter.SignInEmail, arbiter.Client{})
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		if events, _ := d.ListAuditEvents(ctx, arbiter.DemoAccountID, 10); len(events) != 0 {
			t.Errorf("audit of the demo account = %+v", events)
		}
		// The provider still vouches for its old address, or a new one.
		for _, email := range []string{arbiter.DemoAccountEmail, "someone@example.com"} {
			_, err = d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInOIDC, Subject: "linked-before", Email: email, EmailVerified: true})
			wantCode(t, err, arbiter.EUNAUTHORIZED)
		}

		// Everyone else still signs in.
		if _, err := d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInOIDC, Subject: "ok", Email: "demo@example.com", EmailVerified: true}); err != nil {
			t.Errorf("demo@example.com: %v", err)
		}
	})
}

// TestSignIn_RefusesAddressesAtNoDomainName: sign-in links, identities and
// invitations refuse domain literals always, and dotless domains unless
// the store allows them (for development); nothing is stored for a refused
// address.
func TestSignIn_RefusesAddressesAtNoDomainName(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow dotless %v", allow), func(t *testing.T) {
			dbtest.Each(t, db.Options{AllowDotlessEmail: allow}, func(t *testing.T, d *db.DB) {
				acct := newAccount(t, d, "owner@example.com")
				owner := personOf(t, d, "owner@example.com")
				for _, c := range []struct {
					email string
					ok    bool
				}{
					{"x@[10.0.0.5]", false},
					{"x@[IPv6:::1]", false},
					{"x@localhost", allow},
					{"x@intranet", allow},
					{"x@example.com", true},
				} {
					_, err := d.CreateLoginToken(ctx, c.email)
					if (err == nil) != c.ok || (err != nil && arbiter.ErrorCode(err) != arbiter.EINVALID) {
						t.Errorf("CreateLoginToken(%q) = %v, want ok %v", c.email, err, c.ok)
					}
					_, err = d.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInGitHub, Subject: c.email, Email: c.email, EmailVerified: true})
					if (err == nil) != c.ok || (err != nil && arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED) {
						t.Errorf("SignInWithIdentity(%q) = %v, want ok %v", c.email, err, c.ok)
					}
					if c.email == "x@example.com" {
						continue // a member already, by the identity
					}
					_, _, err = d.CreateInvitation(ctx, acct.ID, c.email, arbiter.RoleReviewer, actor(owner))
					if (err == nil) != c.ok || (err != nil && arbiter.ErrorCode(err) != arbiter.EINVALID) {
						t.Errorf("CreateInvitation(%q) = %v, want ok %v", c.email, err, c.ok)
					}
				}
				if n, err := d.Count(ctx, `SELECT count(*) FROM people WHERE email LIKE ?`, "%[%"); err != nil || n != 0 {
					t.Errorf("%d people at a domain literal (%v)", n, err)
				}
			})
		})
	}
}

// TestSessionService_IdleSessionsEnd: a session unused for the idle limit
// is refused and deleted; one in use lives on, its last use written at
// most once an hour rather than on every request.
func TestSessionService_IdleSessionsEnd(t *testing.T) {
	t.Parallel()
	clock := &movableClock{t: time.Now()}
	dbtest.Each(t, db.Options{Now: clock.now}, func(t *testing.T, d *db.DB) {
		newAccount(t, d, "a@example.com")
		person := personOf(t, d, "a@example.com")
		s, token, err := d.CreateSession(ctx, person.ID, arbiter.SignInEmail, arbiter.Client{})
		if err != nil {
			t.Fatal(err)
		}
		lastSeen := func() int {
			t.Helper()
			n, err := d.Count(ctx, `SELECT last_seen_at FROM sessions WHERE id = ?`, s.ID)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		// Requests within the hour write nothing.
		created := lastSeen()
		for range 50 {
			clock.t = clock.t.Add(time.Minute)
			if _, err := d.FindSessionByToken(ctx, token); err != nil {
				t.Fatal(err)
			}
		}
		if got := lastSeen(); got != created {
			t.Fatalf("last_seen_at moved within the hour: %d → %d", created, got)
		}
		// Past the hour, the next request writes it once.
		clock.t = clock.t.Add(15 * time.Minute)
		if _, err := d.FindSessionByToken(ctx, token); err != nil {
			t.Fatal(err)
		}
		touched := lastSeen()
		if touched != int(clock.t.UnixMilli()) {
			t.Fatalf("last_seen_at = %d, want %d", touched, clock.t.UnixMilli())
		}
		// In use once a day, it outlives the idle limit (but not
		// SessionTTL: 15 days of use and 14 idle stay within its 30).
		for range 15 {
			clock.t = clock.t.Add(24 * time.Hour)
			if _, err := d.FindSessionByToken(ctx, token); err != nil {
				t.Fatalf("a session used daily ended: %v", err)
			}
		}
		// Unused for the idle limit: refused, and gone.
		clock.t = clock.t.Add(arbiter.DefaultSessionIdle)
		_, err = d.FindSessionByToken(ctx, token)
		wantCode(t, err, arbiter.EUNAUTHORIZED)
		if n, err := d.Count(ctx, `SELECT count(*) FROM sessions WHERE id = ?`, s.ID); err != nil || n != 0 {
			t.Errorf("the idle session is still stored (%d, %v)", n, err)
		}
		// Just short of it, a session lives.
		_, token, err = d.CreateSession(ctx, person.ID, arbiter.SignInEmail, arbiter.Client{})
		if err != nil {
			t.Fatal(err)
		}
		clock.t = clock.t.Add(arbiter.DefaultSessionIdle - time.Minute)
		if _, err := d.FindSessionByToken(ctx, token); err != nil {
			t.Errorf("a session idle just short of the limit: %v", err)
		}
	})
}

// TestSessionService_IdleLimitIsASetting: a shorter idle limit ends
// sessions sooner, and notes their use often enough that one in use does
// not end.
func TestSessionService_IdleLimitIsASetting(t *testing.T) {
	t.Parallel()
	clock := &movableClock{t: time.Now()}
	dbtest.Each(t, db.Options{Now: clock.now, SessionIdle: 20 * time.Minute}, func(t *testing.T, d *db.DB) {
		newAccount(t, d, "a@example.com")
		person := personOf(t, d, "a@example.com")
		_, token, err := d.CreateSession(ctx, person.ID, arbiter.SignInEmail, arbiter.Client{})
		if err != nil {
			t.Fatal(err)
		}
		for range 12 { // two hours, a request every ten minutes
			clock.t = clock.t.Add(10 * time.Minute)
			if _, err := d.FindSessionByToken(ctx, token); err != nil {
				t.Fatalf("a session in use ended: %v", err)
			}
		}
		clock.t = clock.t.Add(21 * time.Minute)
		_, err = d.FindSessionByToken(ctx, token)
		wantCode(t, err, arbiter.EUNAUTHORIZED)
	})
}

// TestSessionService_DeletePersonSessions: signing out everywhere ends
// every session of the person, and nobody else's.
func TestSessionService_DeletePersonSessions(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		newAccount(t, d, "a@example.com")
		newAccount(t, d, "b@example.com")
		a, b := personOf(t, d, "a@example.com"), personOf(t, d, "b@example.com")
		var tokens []string
		for range 2 {
			_, token, err := d.CreateSession(ctx, a.ID, arbiter.SignInEmail, arbiter.Client{})
			if err != nil {
				t.Fatal(err)
			}
			tokens = append(tokens, token)
		}
		_, other, err := d.CreateSession(ctx, b.ID, arbiter.SignInEmail, arbiter.Client{})
		if err != nil {
			t.Fatal(err)
		}
		if n, err := d.DeletePersonSessions(ctx, a.ID); err != nil || n != 2 {
			t.Fatalf("DeletePersonSessions = %d, %v; want 2", n, err)
		}
		for _, token := range tokens {
			_, err := d.FindSessionByToken(ctx, token)
			wantCode(t, err, arbiter.EUNAUTHORIZED)
		}
		if _, err := d.FindSessionByToken(ctx, other); err != nil {
			t.Errorf("another person's session ended: %v", err)
		}
	})
}

package arbiter_test

import (
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

func TestCheckSignIn_RefusesTheDemoAccount(t *testing.T) {
	for _, email := range []string{arbiter.DemoAccountEmail, "DEMO@arbiter.invalid", " demo@arbiter.invalid "} {
		if arbiter.ErrorCode(arbiter.CheckSignInEmail(email)) != arbiter.EUNAUTHORIZED {
			t.Errorf("CheckSignInEmail(%q) allowed the demo account", email)
		}
		id := arbiter.ExternalIdentity{Provider: arbiter.SignInOIDC, Subject: "s", Email: email, EmailVerified: true}
		if arbiter.ErrorCode(id.Validate()) != arbiter.EUNAUTHORIZED {
			t.Errorf("an identity vouching for %q is valid", email)
		}
	}
	if err := arbiter.CheckSignInAccount(&arbiter.Account{ID: arbiter.DemoAccountID, Email: "renamed@example.com"}); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
		t.Errorf("the demo account under another address: %v", err)
	}
	for _, email := range []string{"demo@example.com", "a@arbiter.invalid"} {
		if err := arbiter.CheckSignInEmail(email); err != nil {
			t.Errorf("CheckSignInEmail(%q) = %v", email, err)
		}
	}
	if err := arbiter.CheckSignInAccount(&arbiter.Account{ID: "acct_1", Email: "a@example.com"}); err != nil {
		t.Errorf("an ordinary account: %v", err)
	}
}

func TestCheckEmailDomain(t *testing.T) {
	for _, c := range []struct {
		email        string
		allowDotless bool
		want         string // error code, "" for accepted
		says         string
	}{
		{"you@example.com", false, "", ""},
		{"you@mail.example.co.uk", false, "", ""},
		{"you@xn--bcher-kva.example", false, "", ""},
		{"x@[10.0.0.5]", false, arbiter.EINVALID, "IP address"},
		{"x@[10.0.0.5]", true, arbiter.EINVALID, "IP address"},
		{"x@[IPv6:::1]", true, arbiter.EINVALID, "IP address"},
		{"x@localhost", false, arbiter.EINVALID, "localhost has no dot"},
		{"x@intranet", false, arbiter.EINVALID, "no dot"},
		{"x@localhost", true, "", ""},
		{"x@example.", false, arbiter.EINVALID, "full domain name"},
		{"x@.example.com", true, arbiter.EINVALID, "full domain name"},
		{"x@a..b", false, arbiter.EINVALID, "full domain name"},
		{"no-at-sign", true, arbiter.EINVALID, "not a valid"},
		{"x@", true, arbiter.EINVALID, "not a valid"},
	} {
		err := arbiter.CheckEmailDomain(c.email, c.allowDotless)
		if got := arbiter.ErrorCode(err); got != c.want || !strings.Contains(arbiter.ErrorMessage(err), c.says) {
			t.Errorf("CheckEmailDomain(%q, %v) = %v, want %q saying %q", c.email, c.allowDotless, err, c.want, c.says)
		}
	}
}

func TestSessionIdleAndTouch(t *testing.T) {
	const h = arbiter.Timestamp(time.Hour / time.Millisecond)
	day := 24 * h
	for _, c := range []struct {
		lastSeen, now arbiter.Timestamp
		idle          time.Duration
		wantIdle      bool
		wantTouch     bool
	}{
		{0, 0, arbiter.DefaultSessionIdle, false, false},
		{0, h - 1, arbiter.DefaultSessionIdle, false, false},
		{0, h, arbiter.DefaultSessionIdle, false, true},
		{0, 14*day - 1, arbiter.DefaultSessionIdle, false, true},
		{0, 14 * day, arbiter.DefaultSessionIdle, true, true},
		// A short limit writes a quarter of it apart, so a session in use
		// never looks idle.
		{0, 5*h/60 - 1, 20 * time.Minute, false, false},
		{0, 5 * h / 60, 20 * time.Minute, false, true},
		{0, 20 * h / 60, 20 * time.Minute, true, true},
	} {
		if got := arbiter.SessionIdle(c.lastSeen, c.now, c.idle); got != c.wantIdle {
			t.Errorf("SessionIdle(%d, %d, %v) = %v", c.lastSeen, c.now, c.idle, got)
		}
		if got := arbiter.SessionTouchDue(c.lastSeen, c.now, c.idle); got != c.wantTouch {
			t.Errorf("SessionTouchDue(%d, %d, %v) = %v", c.lastSeen, c.now, c.idle, got)
		}
	}
}

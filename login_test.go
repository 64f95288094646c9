package arbiter_test

import (
	"strings"
	"testing"

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

package arbiter_test

import (
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

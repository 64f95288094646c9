package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// TestEmailAddresses_AtNoDomainNameAreRefused: sign-in and invitations
// refuse a domain literal and a dotless domain with a sentence that says
// why, and send nothing.
func TestEmailAddresses_AtNoDomainNameAreRefused(t *testing.T) {
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		for _, c := range []struct{ email, says string }{
			{"x@[10.0.0.5]", "names a machine by its IP address"},
			{"x@localhost", "localhost has no dot"},
		} {
			r := b.post("/signin/email", url.Values{"email": {c.email}})
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, c.says) {
				t.Errorf("sign in as %s = %d\n%.2000s", c.email, r.status, r.body)
			}
		}
		owner := d.browser()
		owner.signIn("owner@example.com")
		for _, c := range []struct{ email, says string }{
			{"x@[10.0.0.5]", "names a machine by its IP address"},
			{"x@localhost", "localhost has no dot"},
		} {
			r := owner.post("/members/invite", url.Values{"email": {c.email}, "role": {arbiter.RoleReviewer}})
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, c.says) {
				t.Errorf("invite %s = %d\n%.2000s", c.email, r.status, r.body)
			}
		}
		if list, _ := d.store.ListInvitations(ctx, mustAccount(t, d, "owner@example.com")); len(list) != 0 {
			t.Errorf("refused invitations were stored: %+v", list)
		}
	})
}

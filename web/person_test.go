package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// TestSignOutEverywhere: the person's page ends every session of theirs,
// on every browser, with a form protected like every other; another
// person's session goes on.
func TestSignOutEverywhere(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		laptop, phone, other := d.browser(), d.browser(), d.browser()
		laptop.signIn("ann@example.com")
		phone.signIn("ann@example.com")
		other.signIn("bob@example.com")

		// The navigation links the person's page, which offers it.
		r := laptop.follow(laptop.get("/"))
		if !strings.Contains(r.body, `href="/me"`) {
			t.Errorf("the navigation does not link /me:\n%.2000s", r.body)
		}
		r = laptop.get("/me")
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="sign-out-everywhere"`) || !strings.Contains(r.body, "ann@example.com") ||
			!strings.Contains(r.body, "unused for 14 days") {
			t.Fatalf("the person's page:\n%.3000s", r.body)
		}

		// A form from another site changes nothing.
		r = laptop.do("POST", "/me/signout-everywhere", url.Values{},
			map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"})
		wantStatus(t, r, http.StatusForbidden)
		if !phone.signedIn() || !laptop.signedIn() {
			t.Fatal("a cross-site form ended a session")
		}

		r = laptop.post("/me/signout-everywhere", url.Values{})
		wantStatus(t, r, http.StatusSeeOther)
		if loc := r.header.Get("Location"); !strings.Contains(loc, "/signin?signed_out") {
			t.Errorf("signed out everywhere, sent to %q", loc)
		}
		if laptop.signedIn() {
			t.Error("the session that asked is still signed in")
		}
		if phone.signedIn() {
			t.Error("the other session of the person is still signed in")
		}
		if !other.signedIn() {
			t.Error("another person's session ended")
		}
		events, err := d.store.ListAuditEvents(ctx, mustAccount(t, d, "ann@example.com"), 10)
		if err != nil || len(events) == 0 || events[0].Kind != arbiter.AuditSignOut || events[0].Detail != "everywhere: 2 sessions" {
			t.Errorf("audit = %+v, %v", events, err)
		}
		// Signed out, the page and the form want a sign-in.
		if r := laptop.get("/me"); r.status != http.StatusSeeOther {
			t.Errorf("GET /me signed out = %d", r.status)
		}
	})
}

// TestSessions_IdleSessionIsRefused: a session unused for the idle limit
// (14 days by default) is refused at its next request; one used in time
// lives on.
func TestSessions_IdleSessionIsRefused(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		used, idle := d.browser(), d.browser()
		used.signIn("ann@example.com")
		idle.signIn("bob@example.com")
		for range 3 {
			d.clock.Advance(7 * 24 * time.Hour)
			if !used.signedIn() {
				t.Fatal("a session used weekly ended")
			}
		}
		if idle.signedIn() {
			t.Error("a session unused for 21 days is still accepted")
		}
	})
}

// TestEmailAddresses_AtNoDomainNameAreRefused: sign-in and invitations
// refuse a domain literal and a dotless domain with a sentence that says
// why, and send nothing.
func TestEmailAddresses_AtNoDomainNameAreRefused(t *testing.T) {
	t.Parallel()
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

package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestDashboard_AReloadAfterAFormRepeatsNothing: inviting, rotating a
// webhook secret and the callback secret answer 303 to a page that
// confirms them once, so a reload of that page posts nothing again; a
// refused deletion is answered at the address it posted to, and that
// address, like every other a dashboard form posts to, leads to its form
// when opened instead of answering 405.
func TestDashboard_AReloadAfterAFormRepeatsNothing(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner := d.browser()
		owner.signIn("owner@example.com")
		id, _ := owner.createEndpoint("https://example.com/hooks")

		for _, c := range []struct {
			path     string
			form     url.Values
			location string
			notice   string
		}{
			{"/members/invite", url.Values{"email": {"rev@example.com"}, "role": {"reviewer"}}, "/members", "Invitation"},
			{"/webhooks/" + id + "/rotate", url.Values{}, "/webhooks/" + id + "?notice=rotated", "The secret was rotated"},
			{"/webhooks/callback-secret/rotate", url.Values{}, "/webhooks?notice=callback-rotated", "The callback secret was rotated"},
		} {
			r := owner.post(c.path, c.form)
			if r.status != http.StatusSeeOther || r.header.Get("Location") != c.location {
				t.Fatalf("POST %s = %d to %q, want 303 to %s", c.path, r.status, r.header.Get("Location"), c.location)
			}
			if page := owner.follow(r); page.status != http.StatusOK || !strings.Contains(page.body, c.notice) {
				t.Errorf("%s after POST %s: %d without %q", c.location, c.path, page.status, c.notice)
			}
		}
		d.mail.next(t) // the invitation
		// The invitation's confirmation shows once.
		if r := owner.get("/members"); strings.Contains(r.body, `data-testid="members-notice"`) {
			t.Error("the members page confirms the invitation again when loaded again")
		}

		// A refused deletion is answered where it posted; opened, that
		// address leads to the settings.
		r := owner.post("/settings/delete", url.Values{"confirm": {"not-the-name"}})
		wantStatus(t, r, http.StatusBadRequest)
		for address, page := range map[string]string{
			"/settings/delete": "/settings", "/members/invite": "/members", "/members/per_x/role": "/members",
			"/members/per_x/remove": "/members", "/invitations/inv_x/revoke": "/members",
			"/webhooks/callback-secret/rotate": "/webhooks", "/webhooks/callback-secret/reveal": "/webhooks",
			"/webhooks/" + id + "/rotate": "/webhooks/" + id, "/webhooks/" + id + "/reveal": "/webhooks/" + id,
			"/webhooks/" + id + "/edit": "/webhooks/" + id,
		} {
			if r := owner.get(address); r.status != http.StatusSeeOther || r.header.Get("Location") != page {
				t.Errorf("GET %s = %d to %q, want 303 to %s", address, r.status, r.header.Get("Location"), page)
			}
		}
	})
}

package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestSettings_TheDigestIsNotAReservation: the settings page groups the
// reservation length under "Reservations" and the reviewers' e-mail
// digest under a heading of its own, not under "Reservations".
func TestSettings_TheDigestIsNotAReservation(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("owner@example.com")
		r := b.get("/settings")
		wantStatus(t, r, http.StatusOK)
		group := func(testid string) string {
			start := strings.Index(r.body, `data-testid="`+testid+`"`)
			if start < 0 {
				t.Fatalf("the settings page has no %s:\n%.3000s", testid, r.body)
			}
			end := strings.Index(r.body[start:], "</fieldset>")
			return r.body[start : start+end]
		}
		if reservations := group("reservation-settings"); !strings.Contains(reservations, "Reservations") ||
			!strings.Contains(reservations, `id="reservation-minutes"`) || strings.Contains(reservations, `id="notify-minutes"`) {
			t.Errorf("the reservations group holds:\n%s", reservations)
		}
		if digest := group("digest-settings"); !strings.Contains(digest, "E-mail digest") || !strings.Contains(digest, `id="notify-minutes"`) {
			t.Errorf("the digest group holds:\n%s", digest)
		}
	})
}

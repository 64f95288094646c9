package web_test

import (
	"net/http"
	"net/url"
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

// TestSettings_AnErrorSitsBesideItsField: a refused value is told inside
// its own group, right under its field, which is marked invalid, described
// by the error and takes the focus when the answer loads, so the error is
// in view wherever the field sits on the page; nothing is saved.
func TestSettings_AnErrorSitsBesideItsField(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("owner@example.com")
		for _, tc := range []struct {
			form       url.Values
			group, id  string
			help, says string
		}{
			{url.Values{"reservation_minutes": {"0"}, "gold_percent": {"10"}}, "reservation-settings", "reservation-minutes", "reservation-help", "A reservation lasts from"},
			{url.Values{"reservation_minutes": {"10"}, "notify_minutes": {"100000"}, "gold_percent": {"10"}}, "digest-settings", "notify-minutes", "notify-help", "Reviewers can be e-mailed"},
			{url.Values{"reservation_minutes": {"10"}, "gold_percent": {"120"}}, "gold-settings", "gold-percent", "gold-help", "The gold rate must be"},
		} {
			r := b.post("/settings", tc.form)
			wantStatus(t, r, http.StatusBadRequest)
			_, group, _ := strings.Cut(r.body, `data-testid="`+tc.group+`"`)
			group, _, _ = strings.Cut(group, "</fieldset>")
			_, input, _ := strings.Cut(group, `id="`+tc.id+`"`)
			input, _, _ = strings.Cut(input, ">")
			if !strings.Contains(group, `data-testid="settings-error">`+tc.says) {
				t.Errorf("%v: the error is not in its group:\n%.4000s", tc.form, r.body)
			}
			if !strings.Contains(input, `aria-describedby="`+tc.help+` settings-error"`) || !strings.Contains(input, `aria-invalid="true"`) || !strings.Contains(input, "autofocus") {
				t.Errorf("%v: the field is not marked, described and focused: <…%s>", tc.form, input)
			}
			if n := strings.Count(r.body, "autofocus"); n != 1 {
				t.Errorf("%v: %d elements take the focus", tc.form, n)
			}
		}
		if r := b.get("/settings"); !strings.Contains(r.body, `id="reservation-minutes" name="reservation_minutes" type="number" min="1" max="120" required value="10"`) {
			t.Errorf("a refused form changed the settings:\n%.3000s", r.body)
		}
	})
}

package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestReviewStats_TeamAndOwnLines(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, admin, reviewer := d.team()
		var ids []string
		for _, p := range []string{"One?", "Two?", "Three?", "Four?"} {
			d.clock.Advance(time.Second)
			ids = append(ids, humanTask(t, d.store, "owner@example.com", p, "").ID)
		}
		d.clock.Advance(5*time.Minute - 3*time.Second)
		// The reviewer's second decision reserves the third task for them,
		// so the admin decides the fourth.
		for _, step := range []struct {
			i int
			b *browser
		}{{0, reviewer}, {1, reviewer}, {3, admin}} {
			i, b := step.i, step.b
			if r := b.post("/review/tasks/"+ids[i], url.Values{"verdict": {"approve"}}); r.status != http.StatusSeeOther {
				t.Fatalf("decide %d: %d\n%.1000s", i, r.status, r.body)
			}
		}
		d.clock.Advance(5 * time.Minute)

		r := reviewer.get("/review/stats")
		wantStatus(t, r, http.StatusOK)
		team := between(r.body, `data-testid="stats-team"`, `</tr>`)
		// About five minutes from human_needed to each decision (the
		// clock is the real one, moved on).
		if !strings.Contains(team, `data-testid="stats-decisions">3<`) || !(strings.Contains(team, ">4m 5") || strings.Contains(team, ">5m 0")) {
			t.Errorf("the team's line:\n%s", team)
		}
		if !strings.Contains(r.body, "rev@example.com (you)") || strings.Contains(r.body, "admin@example.com") {
			t.Errorf("a reviewer sees lines other than the team's and their own:\n%.4000s", r.body)
		}
		if !strings.Contains(r.body, `data-testid="stats-waiting">1<`) || !(strings.Contains(between(r.body, `data-testid="stats-oldest"`, `</dd>`), ">9m 5") || strings.Contains(between(r.body, `data-testid="stats-oldest"`, `</dd>`), ">10m 0")) {
			t.Errorf("the queue now:\n%s", between(r.body, `data-testid="queue-now"`, `</section>`))
		}
		// Owners see everyone's line.
		r = owner.get("/review/stats?window=24h")
		if !strings.Contains(r.body, "rev@example.com") || !strings.Contains(r.body, "admin@example.com") {
			t.Errorf("the owner does not see every reviewer:\n%.4000s", r.body)
		}
		// A bad window is a readable 400.
		if r := owner.get("/review/stats?window=forever"); r.status != http.StatusBadRequest || !strings.Contains(r.body, "window must be 24h, 7d or 30d.") {
			t.Errorf("bad window = %d", r.status)
		}
		// Nobody signed in is sent to sign in.
		if r := d.browser().get("/review/stats"); r.status != http.StatusSeeOther {
			t.Errorf("signed out = %d", r.status)
		}
	})
}

// between returns the text of s from the first from up to the next to.
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	j := strings.Index(s[i:], to)
	if j < 0 {
		return s[i:]
	}
	return s[i : i+j]
}

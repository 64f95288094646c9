package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// TestReservations_OverHTTP has two reviewers of one team open the same
// task: the first holds it, the second is told who does and cannot decide
// it; skipping hands the first the next task and leaves the skipped one to
// the second.
func TestReservations_OverHTTP(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		_, admin, reviewer := d.team()
		first := humanTask(t, d.store, "owner@example.com", "First refund?", "")
		d.clock.Advance(time.Second)
		second := humanTask(t, d.store, "owner@example.com", "Second refund?", "")

		r := admin.get("/review/tasks/" + first.ID)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, "Reserved for you until") || !strings.Contains(r.body, `hx-trigger="every 60s"`) {
			t.Fatalf("the desk does not hold the task for its opener:\n%.3000s", r.body)
		}
		r = reviewer.get("/review/tasks/" + first.ID)
		if !strings.Contains(r.body, "admin@example.com is working on this task") {
			t.Fatalf("the second reviewer is not told who holds it:\n%.3000s", r.body)
		}
		// The queue says so too.
		if r := reviewer.get("/review"); !strings.Contains(r.body, "admin@example.com is working on it") {
			t.Errorf("the queue does not show who holds the task:\n%.3000s", r.body)
		}
		// The second reviewer's verdict is a conflict that names the holder.
		r = reviewer.post("/review/tasks/"+first.ID, url.Values{"verdict": {"approve"}})
		if r.status != http.StatusConflict || !strings.Contains(r.body, "admin@example.com is working on this task") {
			t.Fatalf("a verdict on another's task = %d\n%.2000s", r.status, r.body)
		}
		// The holder's page keeps it: the extension answers the fragment.
		r = admin.post("/review/tasks/"+first.ID+"/reservation", url.Values{})
		if r.status != http.StatusOK || !strings.Contains(r.body, "Reserved for you until") {
			t.Errorf("extend = %d %q", r.status, r.body)
		}
		// Skip: the holder lets it go and gets the next.
		r = admin.post("/review/tasks/"+first.ID+"/skip", url.Values{})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/review/tasks/"+second.ID {
			t.Fatalf("skip = %d → %q", r.status, r.header.Get("Location"))
		}
		// Now the other reviewer decides the first.
		r = reviewer.get("/review/tasks/" + first.ID)
		if !strings.Contains(r.body, "Reserved for you until") {
			t.Fatalf("after the skip, the first is not free:\n%.2000s", r.body)
		}
		r = reviewer.post("/review/tasks/"+first.ID, url.Values{"verdict": {"reject"}})
		if r.status != http.StatusSeeOther {
			t.Fatalf("decide after the skip = %d\n%.2000s", r.status, r.body)
		}
		// Bad addresses are not found, and change nothing.
		for _, path := range []string{"/review/tasks/tsk_0000000000000000/skip", "/review/tasks/nonsense/reservation", "/review/tasks/nonsense/skip"} {
			if r := admin.post(path, url.Values{}); r.status != http.StatusNotFound {
				t.Errorf("POST %s = %d", path, r.status)
			}
		}
		task, _ := d.store.FindTaskByID(ctx, first.AccountID, first.ID)
		if task.Status != arbiter.StatusCompleted || *task.FinalVerdict != "reject" {
			t.Errorf("first = %+v", task)
		}
	})
}

func TestSettings_ReservationLength(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner := d.browser()
		owner.signIn("owner@example.com")
		r := owner.get("/settings")
		if r.status != http.StatusOK || !strings.Contains(r.body, `value="10"`) {
			t.Fatalf("settings = %d\n%.2000s", r.status, r.body)
		}
		// Bad input answers the page with why, and changes nothing.
		for _, typed := range []string{"", "0", "-5", "abc", "121", "99999999999999999999", "1.5"} {
			r := owner.post("/settings", url.Values{"reservation_minutes": {typed}})
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, "A reservation lasts from 1 to 120 whole minutes.") {
				t.Errorf("reservation_minutes=%q = %d\n%.1000s", typed, r.status, r.body)
			}
		}
		acct, err := d.store.FindAccountByEmail(ctx, "owner@example.com")
		if err != nil || acct.ReservationLength != arbiter.DefaultReservation {
			t.Fatalf("after refused input = %+v, %v", acct, err)
		}
		r = owner.post("/settings", url.Values{"reservation_minutes": {"3"}})
		if r.status != http.StatusOK || !strings.Contains(r.body, `data-testid="settings-saved"`) {
			t.Fatalf("save = %d\n%.1000s", r.status, r.body)
		}
		// Opening a task now holds it for three minutes.
		task := humanTask(t, d.store, "owner@example.com", "Refund?", "")
		person, _ := d.store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "owner@example.com", Email: "owner@example.com", EmailVerified: true})
		res, err := d.store.ReserveTask(ctx, task.AccountID, task.ID, person.ID)
		if err != nil {
			t.Fatal(err)
		}
		if left := time.Until(res.Until.Time()); left < 2*time.Minute || left > 4*time.Minute {
			t.Errorf("the reservation lasts %v, want 3 minutes", left)
		}
		if events, _ := d.store.ListAuditEvents(ctx, acct.ID, 1); events[0].Kind != arbiter.AuditSettingsChanged {
			t.Errorf("latest audit event = %+v", events[0])
		}
	})
}

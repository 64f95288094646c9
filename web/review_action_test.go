package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// TestReview_ActionTask: the desk shows the action with its digest and
// its form carries the digest; a decision without it, or with another
// digest, is a 409 that changes nothing; with it, the task completes with
// the approved action.
func TestReview_ActionTask(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		task := actionHumanTask(t, d.store, "alice@example.com")
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		alice := d.browser()
		alice.signIn("alice@example.com")

		r := alice.get("/review/tasks/" + task.ID)
		wantStatus(t, r, http.StatusOK)
		for _, want := range []string{`data-testid="action"`, "issue_refund", arbiter.ShortDigest(task.Action.Digest),
			`name="action_digest" value="` + task.Action.Digest + `"`, `data-view="tool-call"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the desk lacks %s", want)
			}
		}
		for _, digest := range []string{"", "sha256:" + strings.Repeat("1", 64)} {
			r = alice.post("/review/tasks/"+task.ID, url.Values{"verdict": {"approve"}, "action_digest": {digest}})
			wantStatus(t, r, http.StatusConflict)
			if !strings.Contains(r.body, "action changed") {
				t.Errorf("a stale copy was told: %s", r.body)
			}
		}
		if got, _ := d.store.FindTaskByID(ctx, acct.ID, task.ID); got.Status != arbiter.StatusHumanNeeded {
			t.Fatalf("a stale decision changed the task: %s", got.Status)
		}
		r = alice.post("/review/tasks/"+task.ID, url.Values{"verdict": {"approve"}, "action_digest": {task.Action.Digest}})
		wantStatus(t, r, http.StatusSeeOther)
		got, _ := d.store.FindTaskByID(ctx, acct.ID, task.ID)
		if got.Status != arbiter.StatusCompleted || got.ApprovedAction == nil || got.ApprovedAction.Digest != task.Action.Digest || got.Receipt == "" {
			t.Fatalf("decided: %s %+v", got.Status, got.ApprovedAction)
		}
		r = alice.get("/review/tasks/" + task.ID)
		if !strings.Contains(r.body, "Approved action") {
			t.Error("a decided task's page does not show the approved action")
		}
	})
}

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

// TestReview_EditOnApprove: the desk's edit form (arg.<member>) and a
// script's args approve the edited action; an unchanged form is no edit;
// another verdict leaves the action as proposed; a value of the wrong
// kind or one the schema refuses is a 400 that keeps what was typed and
// changes nothing.
func TestReview_EditOnApprove(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		acct, _ := d.store.FindOrCreateAccountByEmail(ctx, "alice@example.com")
		alice := d.browser()
		alice.signIn("alice@example.com")
		decide := func(form url.Values) (*arbiter.Task, response) {
			t.Helper()
			task := actionHumanTask(t, d.store, "alice@example.com")
			form.Set("action_digest", task.Action.Digest)
			r := alice.post("/review/tasks/"+task.ID, form)
			got, err := d.store.FindTaskByID(ctx, acct.ID, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got, r
		}

		page := alice.get("/review/tasks/" + actionHumanTask(t, d.store, "alice@example.com").ID)
		for _, want := range []string{`data-testid="action-edit"`, `name="arg.amount"`, `name="arg.currency"`, `<option value="USD"`, `inputmode="decimal"`} {
			if !strings.Contains(page.body, want) {
				t.Errorf("the desk's edit form lacks %s", want)
			}
		}

		got, r := decide(url.Values{"verdict": {"approve"}, "arg.amount": {"75.5"}, "arg.currency": {"USD"}})
		wantStatus(t, r, http.StatusSeeOther)
		if got.ApprovedAction == nil || !got.ApprovedAction.Edited || string(got.ApprovedAction.Args) != `{"amount":75.5,"currency":"USD","order":"o-1"}` {
			t.Errorf("edited on the desk: %+v", got.ApprovedAction)
		}
		got, r = decide(url.Values{"verdict": {"approve"}, "args": {`{"order": "o-1", "currency": "EUR", "amount": 10}`}})
		wantStatus(t, r, http.StatusSeeOther)
		if got.ApprovedAction == nil || !got.ApprovedAction.Edited || string(got.ApprovedAction.Args) != `{"amount":10,"currency":"EUR","order":"o-1"}` {
			t.Errorf("edited by args: %+v", got.ApprovedAction)
		}
		got, r = decide(url.Values{"verdict": {"approve"}, "arg.amount": {"120.0"}, "arg.currency": {"EUR"}})
		wantStatus(t, r, http.StatusSeeOther)
		if got.ApprovedAction == nil || got.ApprovedAction.Edited {
			t.Errorf("an unchanged form was taken for an edit: %+v", got.ApprovedAction)
		}
		got, r = decide(url.Values{"verdict": {"reject"}, "arg.amount": {"1"}, "arg.currency": {"EUR"}})
		wantStatus(t, r, http.StatusSeeOther)
		if *got.FinalVerdict != "reject" || got.ApprovedAction == nil || got.ApprovedAction.Edited {
			t.Errorf("a reject with changed fields: %s %+v", *got.FinalVerdict, got.ApprovedAction)
		}
		for _, c := range []struct{ name, amount, want string }{
			{"not a number", "eighty", "amount must be a number"},
			{"over the schema's maximum", "900", "maximum"},
		} {
			got, r = decide(url.Values{"verdict": {"approve"}, "arg.amount": {c.amount}, "arg.currency": {"EUR"}})
			wantStatus(t, r, http.StatusBadRequest)
			if !strings.Contains(r.body, c.want) || !strings.Contains(r.body, `value="`+c.amount+`"`) || got.Status != arbiter.StatusHumanNeeded {
				t.Errorf("%s: %s, the task %s", c.name, r.body, got.Status)
			}
		}
	})
}

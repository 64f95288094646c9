package web_test

import (
	"net/http"
	"net/url"
	"strconv"
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

// TestReview_BulkDecide: fifty marked tasks, one verdict and rationale,
// become fifty decisions, each its own attempt, after a confirmation that
// states the count; a task not marked is left alone; consensus tasks and
// tasks with different actions are refused, and nothing is decided.
func TestReview_BulkDecide(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		acct, _ := d.store.FindOrCreateAccountByEmail(ctx, "alice@example.com")
		alice := d.browser()
		alice.signIn("alice@example.com")
		var marks []string
		for i := range 50 {
			task := humanTask(t, d.store, "alice@example.com", "Refund "+strconv.Itoa(i)+"?", "")
			marks = append(marks, task.ID)
		}
		unmarked := humanTask(t, d.store, "alice@example.com", "Not marked", "")

		queue := alice.get("/review")
		if n := strings.Count(queue.body, `data-testid="bulk-mark"`); n != 51 {
			t.Errorf("the queue offers %d marks, want one per task (51)", n)
		}
		if !strings.Contains(queue.body, `data-testid="bulk-form"`) {
			t.Error("the queue has no bulk form")
		}
		form := url.Values{"task": marks, "verdict": {"approve"}, "rationale": {"Checked the batch."}}
		r := alice.post("/review/bulk", form)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, "Decide 50 tasks “approve”?") {
			t.Fatalf("the confirmation does not state the count: %s", r.body)
		}
		if got, _ := d.store.FindTaskByID(ctx, acct.ID, marks[0]); got.Status != arbiter.StatusHumanNeeded {
			t.Fatal("the confirmation page decided already")
		}
		form.Set("confirm", "yes")
		r = alice.post("/review/bulk", form)
		wantStatus(t, r, http.StatusSeeOther)
		for _, id := range marks {
			got, err := d.store.FindTaskByID(ctx, acct.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			var humans int
			for _, a := range got.Attempts {
				if a.Tier == arbiter.TierHuman {
					humans++
					if a.Rationale != "Checked the batch." || *a.Reviewer != "alice@example.com" {
						t.Errorf("%s: attempt %+v", id, a)
					}
				}
			}
			if got.Status != arbiter.StatusCompleted || *got.FinalVerdict != "approve" || humans != 1 || got.Receipt == "" {
				t.Errorf("%s: %s, %d human attempts", id, got.Status, humans)
			}
		}
		if got, _ := d.store.FindTaskByID(ctx, acct.ID, unmarked.ID); got.Status != arbiter.StatusHumanNeeded {
			t.Errorf("a task not marked was decided: %s", got.Status)
		}
		events, _ := d.store.ListAuditEvents(ctx, acct.ID, 100)
		var bulk int
		for _, e := range events {
			if e.Kind == arbiter.AuditReviewDecided && strings.HasSuffix(e.Detail, "via the desk, in bulk") {
				bulk++
			}
		}
		if bulk != 50 {
			t.Errorf("%d audit lines of bulk decisions, want 50", bulk)
		}

		// Refused: a consensus task among the marks; two different
		// actions; a task of nobody's queue. Nothing is decided.
		voting, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Vote?", AllowedVerdicts: []string{"approve"},
			ConfidenceThreshold: 0.8, TaskType: "t", Touchpoint: "t", Review: &arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: arbiter.ConsensusUnanimous}})
		if err != nil {
			t.Fatal(err)
		}
		in, _ := arbiter.ParseTaskCreate([]byte(`{"prompt": "Other?", "allowed_verdicts": ["approve"], "action": {"name": "send", "args": {"to": "x"}}}`))
		other, err := d.store.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		a1 := actionHumanTask(t, d.store, "alice@example.com") // takes the others to a person too
		other, _ = d.store.FindTaskByID(ctx, acct.ID, other.ID)
		bob, _ := d.store.FindOrCreateAccountByEmail(ctx, "bob@example.com")
		bobs, err := d.store.CreateTask(ctx, bob.ID, arbiter.TaskCreate{Prompt: "Bob's?", AllowedVerdicts: []string{"approve"},
			ConfidenceThreshold: 0.8, TaskType: "t", Touchpoint: "t"})
		if err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]struct {
			tasks   []string
			verdict string
			why     string
		}{
			"a consensus task":   {[]string{unmarked.ID, voting.ID}, "approve", "several people to vote"},
			"two actions":        {[]string{arbiter.BulkMarkOf(a1).String(), arbiter.BulkMarkOf(other).String()}, "approve", "different actions"},
			"another account's":  {[]string{unmarked.ID, bobs.ID}, "approve", "not in this account"},
			"nothing marked":     {nil, "approve", "Mark the tasks to decide first"},
			"no verdict":         {[]string{unmarked.ID}, "", "Pick the verdict"},
			"a verdict not held": {[]string{unmarked.ID}, "maybe", "does not allow “maybe”"},
			"not a task id":      {[]string{"everything"}, "approve", "not one the queue listed"},
		} {
			r := alice.post("/review/bulk", url.Values{"task": c.tasks, "verdict": {c.verdict}, "confirm": {"yes"}})
			if r.status/100 != 4 || !strings.Contains(r.body, `data-testid="bulk-error"`) || !strings.Contains(r.body, c.why) {
				t.Errorf("%s: %d %s", name, r.status, r.body)
			}
		}
		// Like every form of the site, a post from another origin is
		// refused (CSRF).
		r = alice.do("POST", "/review/bulk", url.Values{"task": {unmarked.ID}, "verdict": {"approve"}, "confirm": {"yes"}},
			map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"})
		wantStatus(t, r, http.StatusForbidden)
		if got, _ := d.store.FindTaskByID(ctx, acct.ID, unmarked.ID); got.Status != arbiter.StatusHumanNeeded {
			t.Errorf("a refused bulk decided a task: %s", got.Status)
		}
		if got, _ := d.store.FindTaskByID(ctx, bob.ID, bobs.ID); got.Status == arbiter.StatusCompleted {
			t.Errorf("another account's task was decided: %s", got.Status)
		}
	})
}

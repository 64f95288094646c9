package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// The gold page tests' verdicts: a page that shows the gold one more often
// than the other gives it away.
const (
	goldKestrel = "verdict-kestrel" // the gold verdict
	goldPlover  = "verdict-plover"  // the other
)

// wantNoGold fails unless the page neither names gold nor shows the gold
// verdict more often than the other one.
func wantNoGold(t *testing.T, what, body string) {
	t.Helper()
	if strings.Contains(strings.ToLower(body), "gold") {
		i := strings.Index(strings.ToLower(body), "gold")
		t.Errorf("%s mentions gold: …%s…", what, body[max(0, i-200):min(len(body), i+200)])
	}
	if k, p := strings.Count(body, goldKestrel), strings.Count(body, goldPlover); k != p {
		t.Errorf("%s shows the gold verdict %d times and the other %d", what, k, p)
	}
}

// TestGold_ReviewersNeverSeeTheGoldVerdict: a reviewer's desk page, queue
// and next task show a gold task as any other; after their answer the desk
// says their own answer, not the gold one. The owner's and the admin's
// task page show the gold verdict; a reviewer cannot open that page.
func TestGold_ReviewersNeverSeeTheGoldVerdict(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, admin, reviewer := d.team()
		acct, err := d.store.FindAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		task, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund order 77?", AllowedVerdicts: []string{goldKestrel, goldPlover},
			ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email", Context: []byte(`{"amount":40}`), GoldVerdict: goldKestrel})
		if err != nil {
			t.Fatal(err)
		}
		desk := "/review/tasks/" + task.ID
		for _, target := range []string{desk, "/review", "/review/queue"} {
			r := reviewer.get(target)
			wantStatus(t, r, http.StatusOK)
			wantNoGold(t, "the reviewer's "+target, r.body)
		}
		if r := reviewer.get(desk); !strings.Contains(r.body, `value="`+goldKestrel+`"`) || !strings.Contains(r.body, `value="`+goldPlover+`"`) {
			t.Errorf("the desk does not offer both verdicts:\n%.3000s", r.body)
		}
		for name, b := range map[string]*browser{"owner": owner, "admin": admin} {
			r := b.get("/tasks/" + task.ID)
			wantStatus(t, r, http.StatusOK)
			if !strings.Contains(r.body, `data-testid="task-gold">`+goldKestrel+`<`) {
				t.Errorf("the %s's task page lacks the gold verdict:\n%.3000s", name, r.body)
			}
		}
		wantStatus(t, reviewer.get("/tasks/"+task.ID), http.StatusNotFound)

		r := reviewer.post(desk, url.Values{"verdict": {goldPlover}})
		if r.status != http.StatusSeeOther && r.status != http.StatusOK {
			t.Fatalf("the answer = %d\n%.2000s", r.status, r.body)
		}
		r = reviewer.get(desk)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, "decided by rev@example.com: "+goldPlover+".") {
			t.Errorf("after the answer the desk does not say the reviewer's own answer:\n%.3000s", r.body)
		}
		if strings.Count(r.body, goldKestrel) > strings.Count(r.body, goldPlover)-1 {
			t.Errorf("after the answer the desk shows the gold verdict beside the answer")
		}
		wantNoGold(t, "the queue after the answer", reviewer.get("/review/queue").body)
		r = owner.get("/tasks/" + task.ID)
		if !strings.Contains(r.body, `data-testid="task-verdict">`+goldKestrel+`<`) {
			t.Errorf("the owner's page does not show the task completed with the gold verdict:\n%.3000s", r.body)
		}
	})
}

// TestSettings_GoldRate: the settings page shows the account's gold rate
// as a percentage (10 by default), saves a new one, and refuses one out
// of range without saving anything.
func TestSettings_GoldRate(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("owner@example.com")
		r := b.get("/settings")
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `name="gold_percent"`) || !strings.Contains(r.body, `value="10"`) {
			t.Errorf("the settings page lacks the gold rate at 10%%:\n%.4000s", r.body)
		}
		r = b.post("/settings", url.Values{"reservation_minutes": {"5"}, "gold_percent": {"25%"}})
		wantStatus(t, r, http.StatusOK)
		acct, err := d.store.FindAccountByEmail(ctx, "owner@example.com")
		if err != nil || acct.GoldRate != 0.25 {
			t.Fatalf("gold rate = %v, %v; want 0.25", acct.GoldRate, err)
		}
		r = b.post("/settings", url.Values{"reservation_minutes": {"7"}, "gold_percent": {"150"}})
		wantStatus(t, r, http.StatusBadRequest)
		if !strings.Contains(r.body, "gold rate") || !strings.Contains(r.body, `value="150"`) {
			t.Errorf("the refusal does not say why, or lost what was typed:\n%.4000s", r.body)
		}
		acct, err = d.store.FindAccountByEmail(ctx, "owner@example.com")
		if err != nil || acct.GoldRate != 0.25 || acct.ReservationLength.Minutes() != 5 {
			t.Errorf("after a refusal: gold rate %v, reservation %v (%v); want both unchanged", acct.GoldRate, acct.ReservationLength, err)
		}
	})
}

// TestGold_ADecisionLinkSaysTheReviewersOwnAnswer: a gold task waits in
// the digest like any other; the page after its decision link is used
// says the reviewer's answer, not the gold verdict the task completed
// with.
func TestGold_ADecisionLinkSaysTheReviewersOwnAnswer(t *testing.T) {
	t.Parallel()
	eachDash(t, func(d *dash) { d.router.Services.DecisionLinks = d.store }, func(t *testing.T, d *dash) {
		_, _, reviewer := d.team()
		acct, err := d.store.FindAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		task, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund order 78?", AllowedVerdicts: []string{"approve", "reject"},
			ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email", GoldVerdict: "reject"})
		if err != nil {
			t.Fatal(err)
		}
		minute := time.Minute
		if err := d.store.SetNotifyAfter(ctx, acct.ID, &minute, arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
			t.Fatal(err)
		}
		d.clock.Advance(2 * time.Minute)
		mine := digestLinks(t, d)["rev@example.com"]
		if len(mine) != 2 {
			t.Fatalf("the reviewer's links: %v", mine)
		}
		r := reviewer.post(mine["approve"], url.Values{})
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="decision-link-done">Decided: approve<`) || strings.Contains(strings.ToLower(r.body), "gold") {
			t.Errorf("after the link the page does not say the reviewer's answer alone:\n%.2000s", r.body)
		}
		got, err := d.store.FindTaskByID(ctx, acct.ID, task.ID)
		if err != nil || *got.FinalVerdict != "reject" {
			t.Errorf("the task = %+v, %v; want completed with the gold verdict", got, err)
		}
	})
}

// TestGold_AReviewersStatsDoNotTellAGoldAnswer: a reviewer answers a gold
// task, wrongly. Their stats page changes with the answer as for any
// other task: it neither names gold nor gives them a line of gold
// accuracy, which would tell them the task was gold and, with two
// verdicts, its gold verdict. The owner's stats page shows the accuracy.
func TestGold_AReviewersStatsDoNotTellAGoldAnswer(t *testing.T) {
	t.Parallel()
	eachDash(t, func(d *dash) { d.router.Services.Agreement = d.store }, func(t *testing.T, d *dash) {
		owner, _, reviewer := d.team()
		acct, err := d.store.FindAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		task, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund order 78?", AllowedVerdicts: []string{goldKestrel, goldPlover},
			ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email", Context: []byte(`{"amount":40}`), GoldVerdict: goldKestrel})
		if err != nil {
			t.Fatal(err)
		}
		r := reviewer.post("/review/tasks/"+task.ID, url.Values{"verdict": {goldPlover}})
		if r.status != http.StatusSeeOther && r.status != http.StatusOK {
			t.Fatalf("the answer = %d\n%.2000s", r.status, r.body)
		}
		r = reviewer.get("/review/stats")
		wantStatus(t, r, http.StatusOK)
		wantNoGold(t, "the reviewer's stats after a gold answer", r.body)
		if strings.Contains(r.body, `data-testid="agreement-reviewer"`) || strings.Contains(r.body, "0 of 1") {
			t.Errorf("the reviewer's stats give them a line for their gold answer:\n%.3000s", between(r.body, `data-testid="agreement"`, `</section>`))
		}
		r = owner.get("/review/stats")
		wantStatus(t, r, http.StatusOK)
		if gold := between(r.body, `data-testid="agreement-gold"`, `</td>`); !strings.Contains(gold, "0 of 1") {
			t.Errorf("the owner's stats lack the reviewer's gold accuracy: %q", gold)
		}
	})
}

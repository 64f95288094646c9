package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/db"
)

// TestPolicies_API_NotifyAndReview: a policy's notify targets and review
// requirement are put, answered and checked as the create's; a create
// without the review fields takes the policy's requirement, one with them
// keeps its own, and a change of the policy leaves tasks created before
// alone. Every answer is checked against the OpenAPI document.
func TestPolicies_API_NotifyAndReview(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		status, _, body := a.do("PUT", "/v1/policies/refund", key,
			`{"notify":["slack:#refunds"],"reviews_required":3,"consensus":"quorum","quorum":2,"veto":["reject"],"tiebreak":"role:admin"}`)
		if status != http.StatusOK {
			t.Fatalf("put = %d %s", status, body)
		}
		for _, want := range []string{`"notify":["slack:#refunds"]`, `"reviews_required":3`, `"consensus":"quorum"`, `"quorum":2`,
			`"veto":["reject"]`, `"exclude_requester":false`, `"tiebreak":"role:admin"`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("put answered %s, without %s", body, want)
			}
		}
		if status, _, got := a.do("GET", "/v1/policies/refund", key, ""); status != http.StatusOK || string(got) != string(body) {
			t.Errorf("get = %d %s, want %s", status, got, body)
		}
		status, _, body = a.do("PUT", "/v1/policies/default", key, `{"deadline_seconds":120}`)
		if status != http.StatusOK || !strings.Contains(string(body), `"notify":null,`) || !strings.Contains(string(body), `"reviews_required":null,`) {
			t.Errorf("a policy without them = %d %s", status, body)
		}

		for _, bad := range []struct{ body, field string }{
			{`{"notify":["#refunds"]}`, "notify"},
			{`{"notify":[]}`, "notify"},
			{`{"reviews_required":9}`, "reviews_required"},
			{`{"reviews_required":2,"consensus":"any"}`, "consensus"},
			{`{"consensus":"quorum"}`, "quorum"},
			{`{"tiebreak":"role:admin"}`, "tiebreak"},
			{`{"veto":"reject"}`, "veto"},
			{`{"requested_by":"a@example.com"}`, "requested_by"},
		} {
			status, h, b := a.do("PUT", "/v1/policies/refund", key, bad.body)
			if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, bad.field) {
				t.Errorf("%s: %q does not name %s", bad.body, msg, bad.field)
			}
		}

		review := func(task map[string]any) string {
			r, _ := task["review"].(map[string]any)
			b, _ := json.Marshal(map[string]any{"n": r["reviews_required"], "c": r["consensus"], "veto": r["veto"]})
			return string(b)
		}
		const refund = `{"prompt":"p","allowed_verdicts":["approve","reject"],"task_type":"refund"`
		taken := createTask(t, a, key, refund+`}`)
		if got := review(taken); got != `{"c":"quorum","n":3,"veto":["reject"]}` {
			t.Errorf("a create without the fields took %s", got)
		}
		given := createTask(t, a, key, refund+`,"reviews_required":2}`)
		if got := review(given); got != `{"c":"unanimous","n":2,"veto":null}` {
			t.Errorf("a create with reviews_required 2 kept %s", got)
		}
		status, h, b := a.do("POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["yes","no"],"task_type":"refund"}`)
		if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, `"reject"`) || !strings.Contains(msg, "veto") {
			t.Errorf("a create its policy's veto does not fit: %q", msg)
		}

		if status, _, _ := a.do("PUT", "/v1/policies/refund", key, `{"reviews_required":2}`); status != http.StatusOK {
			t.Fatal("put")
		}
		_, _, b = a.do("GET", "/v1/tasks/"+taken["id"].(string), key, "")
		var again map[string]any
		if err := json.Unmarshal(b, &again); err != nil || review(again) != review(taken) {
			t.Errorf("after the change the task reads %s", b)
		}
		if later := createTask(t, a, key, refund+`}`); review(later) != `{"c":"unanimous","n":2,"veto":null}` {
			t.Errorf("a create after the change took %s", review(later))
		}
	})
}

// TestDashboard_PolicyNotifyAndReview: the policy page sets a policy's
// Slack channels and review requirement, shows them again, lists them, and
// refuses a bad channel or requirement without changing the policy.
func TestDashboard_PolicyNotifyAndReview(t *testing.T) {
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, _, _ := d.team()
		acct, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")
		form := url.Values{"task_type": {"refund"}, "notify": {"slack:#refunds slack:C0VIP0001"}, "reviews_required": {"3"},
			"consensus": {"quorum"}, "quorum": {"2"}, "veto": {"reject"}, "exclude_requester": {"true"}, "tiebreak": {"role:admin"}}
		r := owner.post("/settings/policy", form)
		if r.status != http.StatusSeeOther {
			t.Fatalf("saving: %d\n%.2000s", r.status, r.body)
		}
		p, err := d.store.FindPolicy(ctx, acct.ID, "refund")
		if err != nil || strings.Join(p.Notify, ",") != "slack:#refunds,slack:C0VIP0001" || p.Review == nil ||
			p.Review.Describe() != "3 reviews, quorum 2, veto reject, requester excluded, tiebreak role:admin" {
			t.Fatalf("stored %+v (%v)", p, err)
		}
		r = owner.follow(r)
		for _, want := range []string{`value="slack:#refunds slack:C0VIP0001"`, `value="3"`, `value="quorum"`, `value="2"`,
			`value="reject"`, `value="role:admin"`, `name="exclude_requester" type="checkbox" value="true" checked`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("after saving, the form lacks %s:\n%.4000s", want, r.body)
			}
		}
		if r := owner.get("/settings/policies"); !strings.Contains(r.body, "slack:#refunds slack:C0VIP0001") ||
			!strings.Contains(r.body, "3 reviews, quorum 2") {
			t.Errorf("the list does not show the channels and the requirement:\n%.4000s", r.body)
		}
		two := url.Values{"task_type": {"refund"}, "reviews_required": {"2"}}
		if r := owner.post("/settings/policy", two); r.status != http.StatusSeeOther {
			t.Fatalf("saving two reviews: %d", r.status)
		}
		if p, _ := d.store.FindPolicy(ctx, acct.ID, "refund"); p.Review == nil || p.Review.Consensus != "unanimous" || p.Notify != nil {
			t.Errorf("two reviews stored %+v", p)
		}

		for _, bad := range []struct {
			form  url.Values
			field string
		}{
			{url.Values{"task_type": {"refund"}, "notify": {"#refunds"}}, "notify"},
			{url.Values{"task_type": {"refund"}, "reviews_required": {"many"}}, "reviews_required"},
			{url.Values{"task_type": {"refund"}, "reviews_required": {"2"}, "consensus": {"quorum"}}, "quorum"},
			{url.Values{"task_type": {"refund"}, "tiebreak": {"role:admin"}}, "tiebreak"},
		} {
			r := owner.post("/settings/policy", bad.form)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, `data-testid="policy-error"`) || !strings.Contains(r.body, bad.field) {
				t.Errorf("%v: %d, want 400 naming %s", bad.form, r.status, bad.field)
			}
		}
		if p, _ := d.store.FindPolicy(ctx, acct.ID, "refund"); p.Review == nil || p.Review.ReviewsRequired != 2 {
			t.Errorf("a refused form changed the policy: %+v", p)
		}
	})
}

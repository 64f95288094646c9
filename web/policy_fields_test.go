package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
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
		for _, want := range []string{`value="slack:#refunds slack:C0VIP0001"`, `value="3"`, `value="quorum" selected`, `value="2"`,
			`value="reject"`, `value="role:admin" selected`, `name="exclude_requester" type="checkbox" value="true" checked`} {
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
			if r.status != http.StatusBadRequest || fieldError(r.body, bad.field) == "" {
				t.Errorf("%v: %d, want 400 naming %s", bad.form, r.status, bad.field)
			}
		}
		if p, _ := d.store.FindPolicy(ctx, acct.ID, "refund"); p.Review == nil || p.Review.ReviewsRequired != 2 {
			t.Errorf("a refused form changed the policy: %+v", p)
		}
	})
}

// fieldError returns the error the form shows beside its field named name
// (components.Field), "" when it shows none there.
func fieldError(body, name string) string {
	_, field, ok := strings.Cut(body, `data-testid="field-`+name+`"`)
	if !ok {
		return ""
	}
	field, _, _ = strings.Cut(field, `<div data-testid="field-`)
	_, msg, ok := strings.Cut(field, `data-testid="field-error">`)
	if !ok {
		return ""
	}
	msg, _, _ = strings.Cut(msg, "<")
	return msg
}

// TestDashboard_PolicyFormSpeaksPlainly: the policy page takes durations
// as the rest of the product writes them ("1h30m") and shows them so, in
// the form and the list, with the reminders and escalation in the list; a
// refused value is told beside its field in a person's words, the field
// marked invalid, described by the error and focused; fixed choices are
// selects; and a delete asks first.
func TestDashboard_PolicyFormSpeaksPlainly(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, _, _ := d.team()
		acct, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")
		form := url.Values{"task_type": {"refund"}, "deadline": {"1h30m"}, "on_expiry": {"verdict"}, "on_expiry_verdict": {"reject"},
			"reminders": {"15m"}, "escalation": {"30m role:admin, 1h email:rev@example.com"}}
		if r := owner.post("/settings/policy", form); r.status != http.StatusSeeOther {
			t.Fatalf("saving: %d\n%.3000s", r.status, r.body)
		}
		if p, err := d.store.FindPolicy(ctx, acct.ID, "refund"); err != nil || p.DeadlineSeconds == nil || *p.DeadlineSeconds != 5400 || p.OnExpiry.Outcome != "verdict:reject" {
			t.Fatalf("stored %+v (%v)", p, err)
		}
		r := owner.get("/settings/policy?task_type=refund")
		for _, want := range []string{`name="deadline" type="text" maxlength="220" value="1h30m"`, `<select id="policy-on-expiry" name="on_expiry"`,
			`value="verdict" selected`, `name="on_expiry_verdict" type="text" maxlength="220" value="reject"`,
			`<select id="policy-consensus" name="consensus"`, `<select id="policy-tiebreak" name="tiebreak"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the form lacks %s:\n%.5000s", want, r.body)
			}
		}
		r = owner.get("/settings/policies")
		for _, want := range []string{">1h30m<", `data-testid="policy-reminders">15m<`, `data-testid="policy-escalation">30m admins, 1h rev@example.com<`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the list lacks %s:\n%.5000s", want, r.body)
			}
		}

		for _, bad := range []struct {
			form         url.Values
			field, id    string
			says, unsaid string
		}{
			{url.Values{"deadline": {"90 minutes"}}, "deadline", "policy-deadline", "Write the deadline as a duration such as 30m, 1h or 2d", "deadline_seconds"},
			{url.Values{"deadline": {""}, "on_expiry": {"verdict"}, "on_expiry_verdict": {"reject"}}, "deadline", "policy-deadline", "Deciding at the deadline needs a deadline", "on_expiry"},
			{url.Values{"reviews_required": {"2"}, "consensus": {"quorum"}, "quorum": {"1"}}, "quorum", "policy-quorum", "the reviews required", "reviews_required"},
			{url.Values{"deadline": {"1h"}, "on_expiry": {"verdict"}}, "on_expiry_verdict", "policy-on-expiry-verdict", "Give the verdict that decides", "on_expiry"},
		} {
			bad.form.Set("task_type", "refund")
			r := owner.post("/settings/policy", bad.form)
			msg := fieldError(r.body, bad.field)
			if r.status != http.StatusBadRequest || !strings.Contains(msg, bad.says) || strings.Contains(msg, bad.unsaid) {
				t.Errorf("%v: %d, the %s field says %q; want %q in a person's words\n%.3000s", bad.form, r.status, bad.field, msg, bad.says, r.body)
			}
			_, input, _ := strings.Cut(r.body, `id="`+bad.id+`"`)
			input, _, _ = strings.Cut(input, ">")
			if !strings.Contains(input, `aria-invalid="true"`) || !strings.Contains(input, bad.id+`-error`) || !strings.Contains(input, "autofocus") {
				t.Errorf("%v: the field at fault is not marked, described and focused: <…%s>", bad.form, input)
			}
			if n := strings.Count(r.body, "autofocus"); n != 1 {
				t.Errorf("%v: %d fields take the focus, want the one at fault", bad.form, n)
			}
		}
		if p, _ := d.store.FindPolicy(ctx, acct.ID, "refund"); *p.DeadlineSeconds != 5400 {
			t.Errorf("a refused form changed the policy: %+v", p)
		}

		// A delete asks first: the page's button opens the question, which
		// deletes nothing until it is answered.
		r = owner.get("/settings/policy?task_type=refund")
		if !strings.Contains(r.body, `href="/settings/policy/delete?task_type=refund"`) {
			t.Fatalf("the page does not lead to the delete's question:\n%.4000s", r.body)
		}
		r = owner.get("/settings/policy/delete?task_type=refund")
		if r.status != http.StatusOK || !strings.Contains(r.body, `data-testid="policy-delete-confirm"`) || !strings.Contains(r.body, "Delete the policy of refund?") {
			t.Fatalf("the question: %d\n%.3000s", r.status, r.body)
		}
		if _, err := d.store.FindPolicy(ctx, acct.ID, "refund"); err != nil {
			t.Fatalf("asking deleted the policy: %v", err)
		}
		if r := owner.get("/settings/policy/delete?task_type=nothing"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/policies" {
			t.Errorf("the question for a policy that does not exist: %d %s", r.status, r.header.Get("Location"))
		}
		if r := owner.post("/settings/policy/delete", url.Values{"task_type": {"refund"}}); r.status != http.StatusSeeOther {
			t.Fatalf("deleting: %d", r.status)
		}
		if _, err := d.store.FindPolicy(ctx, acct.ID, "refund"); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("after the answer: %v", err)
		}
	})
}

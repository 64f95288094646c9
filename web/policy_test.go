package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

func TestPolicies_API(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key, other := a.newKey("a@example.com"), a.newKey("b@example.com")

		status, _, body := a.do("GET", "/v1/policies", key, "")
		if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"policies":[]}` {
			t.Fatalf("no policies = %d %s", status, body)
		}
		status, _, body = a.do("PUT", "/v1/policies/refund", key,
			`{"confidence_threshold":0.95,"deadline_seconds":600,"on_expiry":"agent_verdict","agent_floor":0.9,"on_expiry_fallback":"verdict:reject"}`)
		if status != http.StatusOK {
			t.Fatalf("put = %d %s", status, body)
		}
		var p map[string]any
		if err := json.Unmarshal(body, &p); err != nil {
			t.Fatal(err)
		}
		if p["task_type"] != "refund" || p["confidence_threshold"] != 0.95 || p["deadline_seconds"] != 600.0 || p["audit_rate"] != nil ||
			p["on_expiry"] != "agent_verdict" || p["agent_floor"] != 0.9 || p["on_expiry_fallback"] != "verdict:reject" {
			t.Errorf("put answered %s", body)
		}
		if status, _, got := a.do("GET", "/v1/policies/refund", key, ""); status != http.StatusOK || string(got) != string(body) {
			t.Errorf("get = %d %s, want %s", status, got, body)
		}
		if status, _, _ := a.do("PUT", "/v1/policies/default", key, `{"deadline_seconds":120}`); status != http.StatusOK {
			t.Fatalf("put default = %d", status)
		}
		status, _, body = a.do("GET", "/v1/policies", key, "")
		if status != http.StatusOK || strings.Count(string(body), `"task_type"`) != 2 || !strings.Contains(string(body), `"on_expiry":"expire"`) {
			t.Errorf("list = %d %s", status, body)
		}

		for _, bad := range []struct{ body, field string }{
			{`{"on_expiry":"agent_verdict"}`, "agent_floor"},
			{`{"on_expiry":"maybe"}`, "on_expiry"},
			{`{"agent_floor":0.5}`, "on_expiry"},
			{`{"deadline_seconds":59}`, "deadline_seconds"},
			{`{"confidence_threshold":"high"}`, "confidence_threshold"},
			{`{"threshold":0.5}`, ""},
		} {
			status, h, b := a.do("PUT", "/v1/policies/refund", key, bad.body)
			msg := wantError(t, status, h, b, http.StatusBadRequest)
			if !strings.Contains(msg, bad.field) {
				t.Errorf("%s: %q does not name %s", bad.body, msg, bad.field)
			}
		}
		if status, _, got := a.do("GET", "/v1/policies/refund", key, ""); status != http.StatusOK || !strings.Contains(string(got), `"agent_floor":0.9`) {
			t.Errorf("a refused put changed the policy: %s", got)
		}

		// Another account sees none of them, and cannot delete them.
		status, h, b := a.do("GET", "/v1/policies/refund", other, "")
		wantError(t, status, h, b, http.StatusNotFound)
		status, h, b = a.do("DELETE", "/v1/policies/refund", other, "")
		wantError(t, status, h, b, http.StatusNotFound)
		if status, _, b := a.do("GET", "/v1/policies", other, ""); strings.Contains(string(b), "refund") {
			t.Errorf("another account lists %d %s", status, b)
		}
		status, h, b = a.do("GET", "/v1/policies", "", "")
		wantError(t, status, h, b, http.StatusUnauthorized)

		// A create takes the policy of its type for what it leaves out.
		taken := createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["approve","reject"],"task_type":"refund"}`)
		if taken["confidence_threshold"] != 0.95 || taken["deadline_at"].(float64)-taken["created_at"].(float64) < 599.9 {
			t.Errorf("a create without fields = %v", taken)
		}
		given := createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["approve","reject"],"task_type":"refund",
			"confidence_threshold":0.5,"deadline_seconds":60,"on_expiry":"verdict:approve"}`)
		if given["confidence_threshold"] != 0.5 || given["deadline_at"].(float64)-given["created_at"].(float64) > 60.1 {
			t.Errorf("a create with fields = %v", given)
		}
		status, h, b = a.do("POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["yes","no"],"task_type":"refund"}`)
		if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, `"reject"`) {
			t.Errorf("a create its policy's fallback cannot decide: %q", msg)
		}

		// Changing the policy leaves the tasks created before alone.
		if status, _, _ := a.do("PUT", "/v1/policies/refund", key, `{"confidence_threshold":0.2}`); status != http.StatusOK {
			t.Fatal("put")
		}
		_, _, b = a.do("GET", "/v1/tasks/"+taken["id"].(string), key, "")
		var again map[string]any
		if err := json.Unmarshal(b, &again); err != nil || again["confidence_threshold"] != 0.95 || again["deadline_at"] != taken["deadline_at"] {
			t.Errorf("after the change the task reads %s", b)
		}
		if later := createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["approve","reject"],"task_type":"refund"}`); later["confidence_threshold"] != 0.2 {
			t.Errorf("a create after the change = %v", later)
		}

		if status, _, b := a.do("DELETE", "/v1/policies/refund", key, ""); status != http.StatusNoContent || len(b) != 0 {
			t.Errorf("delete = %d %s", status, b)
		}
		status, h, b = a.do("GET", "/v1/policies/refund", key, "")
		wantError(t, status, h, b, http.StatusNotFound)
		status, h, b = a.do("DELETE", "/v1/policies/refund", key, "")
		wantError(t, status, h, b, http.StatusNotFound)
	})
}

// TestTaskGet_WaitReturnsTheOnExpiryOutcome waits for a task whose
// deadline has passed (its creation is two minutes back by the store's
// clock) until a sweep, in another process on Postgres, decides it by its
// on-expiry outcome: the waiter gets it completed with final_tier fallback.
func TestTaskGet_WaitReturnsTheOnExpiryOutcome(t *testing.T) {
	opts := db.Options{Now: func() time.Time { return time.Now().Add(-2 * time.Minute) }}
	eachAPI(t, opts, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id := createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["approve","reject"],"deadline_seconds":60,
			"on_expiry":"verdict:reject"}`)["id"].(string)
		answer := make(chan waited, 1)
		go func() { answer <- getWaiting(t, a.srv.Client(), a.srv.URL, key, id, 30) }()
		waitForWatchers(t, a.store, 1)

		if swept, err := decider(t, a).ExpireTasks(ctx, 10); err != nil || len(swept) != 1 || swept[0] != id {
			t.Fatalf("swept %v (%v)", swept, err)
		}
		w := <-answer
		if w.err != nil || w.status != http.StatusOK || w.elapsed >= 20*time.Second {
			t.Fatalf("the waiting request answered %d %s after %s (%v)", w.status, w.body, w.elapsed, w.err)
		}
		if task := w.task; task["status"] != "completed" || task["final_verdict"] != "reject" || task["final_tier"] != "fallback" ||
			task["final_confidence"] != nil || task["completed_at"] == nil || task["expired_at"] != nil {
			t.Errorf("the task decided by its outcome = %s", w.body)
		}
		// Read again through the validating client: the document knows
		// the fallback tier and its attempt.
		status, _, body := a.do("GET", "/v1/tasks/"+id, key, "")
		if status != http.StatusOK || !strings.Contains(string(body), `"tier":"fallback"`) {
			t.Errorf("read = %d %s", status, body)
		}
	})
}

// TestReview_ExpiryOutcome: the desk tells a reviewer what happens if
// nobody decides the task, and, once its outcome decided it, says so.
func TestReview_ExpiryOutcome(t *testing.T) {
	eachDash(t, nil, func(t *testing.T, d *dash) {
		alice := d.browser()
		alice.signIn("alice@example.com")
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		task, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
			ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email", DeadlineSeconds: 3600,
			OnExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"}})
		if err != nil {
			t.Fatal(err)
		}
		plain, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Plain?", AllowedVerdicts: []string{"approve"},
			ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email", DeadlineSeconds: 3600})
		if err != nil {
			t.Fatal(err)
		}
		sendToHuman(t, d.store)

		r := alice.get("/review/tasks/" + task.ID)
		wantStatus(t, r, http.StatusOK)
		when := task.DeadlineAt.Time().UTC().Format("2006-01-02 15:04 UTC")
		if !strings.Contains(r.body, `data-testid="expiry-outcome"`) || !strings.Contains(r.body, "reject at "+when) {
			t.Errorf("the desk does not say what happens at the deadline (reject at %s):\n%.3000s", when, r.body)
		}
		if r := alice.get("/review/tasks/" + plain.ID); strings.Contains(r.body, `data-testid="expiry-outcome"`) {
			t.Error("a task that only expires shows an outcome line")
		}

		// Another, created two hours ago with a minute to live: the sweep
		// decides it by its outcome.
		d.clock.Advance(-2 * time.Hour)
		late, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Late?", AllowedVerdicts: []string{"approve", "reject"},
			ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email", DeadlineSeconds: 60,
			OnExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"}})
		d.clock.Advance(2 * time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if swept, err := d.store.ExpireTasks(ctx, 10); err != nil || len(swept) != 1 || swept[0] != late.ID {
			t.Fatalf("swept %v (%v)", swept, err)
		}
		task = late
		r = alice.get("/review/tasks/" + task.ID)
		if !strings.Contains(r.body, `data-testid="decided"`) || !strings.Contains(r.body, "its on-expiry outcome (reject)") ||
			!strings.Contains(r.body, "At the deadline:") || strings.Contains(r.body, `data-testid="expiry-outcome"`) {
			t.Errorf("the decided task's page:\n%.3000s", r.body)
		}
		r = alice.post("/review/tasks/"+task.ID, url.Values{"verdict": {"approve"}})
		wantStatus(t, r, http.StatusConflict)
		if !strings.Contains(r.body, "on-expiry outcome (reject)") {
			t.Errorf("a late verdict's page does not say how the task ended:\n%.2000s", r.body)
		}
	})
}

// TestDashboard_Policies: owners and admins manage policies on the
// dashboard, audited; reviewers get the page any missing page gets; a bad
// value is shown again and changes nothing; a cross-origin post changes
// nothing.
func TestDashboard_Policies(t *testing.T) {
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, admin, reviewer := d.team()
		acct, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")

		r := owner.get("/settings")
		if !strings.Contains(r.body, `href="/settings/policies"`) {
			t.Errorf("the settings do not link the policies:\n%.2000s", r.body)
		}
		r = owner.get("/settings/policies")
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="no-policies"`) {
			t.Errorf("an account without policies:\n%.2000s", r.body)
		}
		form := url.Values{"task_type": {"refund"}, "confidence_threshold": {"0.95"}, "deadline": {"1h"},
			"audit_rate": {""}, "on_expiry": {"agent_verdict"}, "agent_floor": {"0.9"}, "on_expiry_fallback": {"verdict"},
			"on_expiry_fallback_verdict": {"reject"}}
		r = owner.post("/settings/policy", form)
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/policy?saved=1&task_type=refund" {
			t.Fatalf("saving: %d %q\n%.1000s", r.status, r.header.Get("Location"), r.body)
		}
		p, err := d.store.FindPolicy(ctx, acct.ID, "refund")
		if err != nil || *p.ConfidenceThreshold != 0.95 || *p.DeadlineSeconds != 3600 || p.AuditRate != nil ||
			p.OnExpiry.Outcome != "agent_verdict" || *p.OnExpiry.AgentFloor != 0.9 || p.OnExpiry.Fallback != "verdict:reject" {
			t.Fatalf("stored %+v (%v)", p, err)
		}
		r = owner.follow(r)
		if !strings.Contains(r.body, `data-testid="policy-saved"`) || !strings.Contains(r.body, `value="0.95"`) || !strings.Contains(r.body, `value="1h"`) ||
			!strings.Contains(r.body, `value="agent_verdict" selected`) || !strings.Contains(r.body, `value="reject"`) || !strings.Contains(r.body, `data-testid="delete-policy"`) {
			t.Errorf("after saving:\n%.3000s", r.body)
		}
		if r := owner.get("/settings/policies"); !strings.Contains(r.body, "the agent&#39;s verdict at confidence 0.9 or more, else reject") &&
			!strings.Contains(r.body, "the agent's verdict at confidence 0.9 or more, else reject") {
			t.Errorf("the list does not describe the outcome:\n%.3000s", r.body)
		}

		bad := url.Values{"task_type": {"refund"}, "confidence_threshold": {"high"}}
		r = admin.post("/settings/policy", bad)
		if r.status != http.StatusBadRequest || fieldError(r.body, "confidence_threshold") == "" || !strings.Contains(r.body, `value="high"`) {
			t.Errorf("a bad value: %d\n%.2000s", r.status, r.body)
		}
		r = admin.post("/settings/policy", url.Values{"task_type": {"refund"}, "on_expiry": {"agent_verdict"}})
		if r.status != http.StatusBadRequest || fieldError(r.body, "agent_floor") == "" {
			t.Errorf("an outcome without its floor: %d", r.status)
		}
		if p, _ := d.store.FindPolicy(ctx, acct.ID, "refund"); *p.ConfidenceThreshold != 0.95 {
			t.Errorf("a refused form changed the policy: %+v", p)
		}

		// Reviewers may not see or change policies.
		for _, c := range []struct {
			method, path string
			form         url.Values
		}{
			{"GET", "/settings/policies", nil},
			{"GET", "/settings/policy?task_type=refund", nil},
			{"POST", "/settings/policy", url.Values{"task_type": {"refund"}, "confidence_threshold": {"0.1"}}},
			{"POST", "/settings/policy/delete", url.Values{"task_type": {"refund"}}},
		} {
			if r := reviewer.do(c.method, c.path, c.form, nil); r.status != http.StatusNotFound {
				t.Errorf("%s %s as a reviewer = %d", c.method, c.path, r.status)
			}
		}
		// Nor may another site post the form.
		r = owner.do("POST", "/settings/policy", url.Values{"task_type": {"refund"}, "confidence_threshold": {"0.1"}},
			map[string]string{"Origin": "https://elsewhere.example", "Sec-Fetch-Site": "cross-site"})
		if r.status != http.StatusForbidden {
			t.Errorf("a cross-origin post = %d", r.status)
		}
		if p, _ := d.store.FindPolicy(ctx, acct.ID, "refund"); *p.ConfidenceThreshold != 0.95 {
			t.Errorf("a refused post changed the policy: %+v", p)
		}

		r = admin.post("/settings/policy/delete", url.Values{"task_type": {"refund"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/settings/policies?deleted=refund" {
			t.Fatalf("deleting: %d %q", r.status, r.header.Get("Location"))
		}
		if _, err := d.store.FindPolicy(ctx, acct.ID, "refund"); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("after the delete: %v", err)
		}
		events, _ := d.store.ListAuditEvents(ctx, acct.ID, 50)
		var kinds []string
		for _, e := range events {
			if strings.HasPrefix(e.Kind, "policy_") {
				kinds = append(kinds, e.Kind+" by "+e.Actor)
			}
		}
		if strings.Join(kinds, ", ") != "policy_deleted by admin@example.com, policy_changed by owner@example.com" {
			t.Errorf("audit log: %v", kinds)
		}
	})
}

// TestPolicies_APIRemindersAndEscalation: a policy's reminders and
// escalation are put, read and refused as the document says; a create
// takes them; a task that reached a rung shows it, and its answers stay
// valid against the document.
func TestPolicies_APIRemindersAndEscalation(t *testing.T) {
	c := &movableClock{t: time.Now().Truncate(time.Millisecond)}
	eachAPI(t, db.Options{Now: c.Now}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		status, _, body := a.do("PUT", "/v1/policies/refund", key,
			`{"deadline_seconds":7200,"reminders":["1h","15m"],"escalation":[{"after":"30m","to":"role:owner"},{"after":"2h","to":"email:A@Example.com"}]}`)
		if status != http.StatusOK || !strings.Contains(string(body),
			`"reminders":["15m","1h"],"escalation":[{"after":"30m","to":"role:owner"},{"after":"2h","to":"email:a@example.com"}]`) {
			t.Fatalf("put = %d %s", status, body)
		}
		for _, bad := range []struct{ body, field string }{
			{`{"reminders":["soon"]}`, "reminders"},
			{`{"reminders":["50%"]}`, "deadline_seconds"},
			{`{"reminders":"15m"}`, "reminders"},
			{`{"escalation":[{"after":"30m","to":"admin"}]}`, "escalation"},
			{`{"escalation":[{"after":"30m","to":"email:root@localhost"}]}`, "escalation"},
			// A rung tells the account's members only.
			{`{"escalation":[{"after":"30m","to":"email:lead@example.com"}]}`, "lead@example.com, who is not a member of this account"},
			{`{"escalation":[{"after":"1h","to":"role:admin"},{"after":"30m","to":"role:owner"}]}`, "escalation"},
		} {
			status, h, b := a.do("PUT", "/v1/policies/refund", key, bad.body)
			if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, bad.field) {
				t.Errorf("%s: %q does not name %s", bad.body, msg, bad.field)
			}
		}
		status, h, b := a.do("POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a"],"reminders":["50%"]}`)
		if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, "deadline") {
			t.Errorf("a share without a deadline: %q", msg)
		}
		task := createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["approve","reject"],"task_type":"refund"}`)
		id := task["id"].(string)
		if _, ok := task["escalation"]; ok {
			t.Errorf("a new task shows an escalation: %v", task)
		}
		claimed, err := a.store.ClaimTasks(t.Context(), "w", 10, time.Minute)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claimed %v (%v)", claimed, err)
		}
		if err := a.store.FinishAgentAttempt(t.Context(), "w", id, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: 1},
			Next: arbiter.StatusHumanNeeded}); err != nil {
			t.Fatal(err)
		}
		c.Add(30 * time.Minute)
		for range 2 { // the reminder, then the rung
			if _, err := a.store.FireDueAlerts(t.Context(), 10); err != nil {
				t.Fatal(err)
			}
		}
		status, _, body = a.do("GET", "/v1/tasks/"+id, key, "")
		if status != http.StatusOK || !strings.Contains(string(body), `"escalation":{"rung":1,"after":"30m","to":"role:owner","escalated_at":`) ||
			!strings.Contains(string(body), `"deadline_at":`+strconv.FormatFloat(task["deadline_at"].(float64), 'f', -1, 64)) {
			t.Errorf("the escalated task = %d %s", status, body)
		}
		// A create's own rung tells members only too, and the refusal
		// stores nothing.
		status, h, b = a.do("POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a"],"task_type":"other",
			"escalation":[{"after":"30m","to":"email:lead@example.com"}]}`)
		if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, "not a member") {
			t.Errorf("a create's rung to an outsider: %q", msg)
		}
		if status, _, b := a.do("GET", "/v1/tasks?task_type=other", key, ""); status != http.StatusOK || strings.Contains(string(b), `"id"`) {
			t.Errorf("the refused create stored a task: %d %s", status, b)
		}
		if status, _, b := a.do("POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a"],"task_type":"other",
			"escalation":[{"after":"30m","to":"email:a@example.com"}]}`); status != http.StatusOK {
			t.Errorf("a create's rung to a member: %d %s", status, b)
		}
	})
}

// movableClock is a store clock a test moves.
type movableClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *movableClock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *movableClock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestDashboard_PolicyRemindersAndEscalation: the policy page saves
// reminders and rungs, shows them again as typed, and refuses a rung it
// cannot read, naming the field, changing nothing.
func TestDashboard_PolicyRemindersAndEscalation(t *testing.T) {
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, _, _ := d.team()
		acct, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")
		form := url.Values{"task_type": {"refund"}, "deadline": {"1h"}, "reminders": {"1h, 15m 50%"},
			"escalation": {"30m role:admin, 45m email:Rev@Example.com"}}
		r := owner.post("/settings/policy", form)
		if r.status != http.StatusSeeOther {
			t.Fatalf("saving: %d\n%.1000s", r.status, r.body)
		}
		p, err := d.store.FindPolicy(ctx, acct.ID, "refund")
		if err != nil || len(p.Alerts.Reminders) != 3 || len(p.Alerts.Escalation) != 2 || p.Alerts.Escalation[1].To != "email:rev@example.com" {
			t.Fatalf("stored %+v (%v)", p, err)
		}
		r = owner.follow(r)
		if !strings.Contains(r.body, `value="15m, 1h, 50%"`) || !strings.Contains(r.body, `value="30m role:admin, 45m email:rev@example.com"`) {
			t.Errorf("after saving:\n%.4000s", r.body)
		}
		for _, bad := range []string{"30m", "30m role:boss", "1h role:admin, 30m role:owner", "30m email:lead@example.com"} {
			r = owner.post("/settings/policy", url.Values{"task_type": {"refund"}, "escalation": {bad}})
			if r.status != http.StatusBadRequest || fieldError(r.body, "escalation") == "" {
				t.Errorf("%q: %d", bad, r.status)
			}
		}
		// The outsider's refusal says why, on the form.
		if !strings.Contains(r.body, "lead@example.com, who is not a member of this account") {
			t.Errorf("a rung to an outsider:\n%.4000s", r.body)
		}
		if p, _ := d.store.FindPolicy(ctx, acct.ID, "refund"); len(p.Alerts.Escalation) != 2 {
			t.Errorf("a refused form changed the policy: %+v", p)
		}
	})
}

// TestReview_EscalatedFirstAndOutcomeLines: the queue puts the escalated
// tasks first in its default view, keeps only them when asked, orders by
// the time left when asked, and says on each task what happens if nobody
// decides it and whom it was escalated to.
func TestReview_EscalatedFirstAndOutcomeLines(t *testing.T) {
	eachDash(t, nil, func(t *testing.T, d *dash) {
		alice := d.browser()
		alice.signIn("alice@example.com")
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		create := func(prompt string, deadline int, onExpiry string, alerts arbiter.Alerts) *arbiter.Task {
			t.Helper()
			in := arbiter.TaskCreate{Prompt: prompt, AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8,
				TaskType: "refund", Touchpoint: "email", DeadlineSeconds: deadline, Alerts: alerts}
			if onExpiry != "" {
				in.OnExpiry = arbiter.OnExpiry{Outcome: onExpiry}
			}
			task, err := d.store.CreateTask(ctx, acct.ID, in)
			if err != nil {
				t.Fatal(err)
			}
			d.clock.Advance(time.Second)
			return task
		}
		old := create("Oldest?", 0, "", arbiter.Alerts{})
		mid := create("Escalated?", 3600, "verdict:reject", arbiter.Alerts{
			Escalation: []arbiter.Rung{{After: arbiter.AlertWait{After: 30 * time.Minute}, To: "role:owner"}}})
		late := create("Newest?", 7200, "verdict:approve", arbiter.Alerts{})
		sendToHuman(t, d.store)
		d.clock.Advance(31 * time.Minute)
		for range 2 {
			if _, err := d.store.FireDueAlerts(ctx, 10); err != nil {
				t.Fatal(err)
			}
		}
		order := func(body string, prompts ...string) bool {
			last := -1
			for _, p := range prompts {
				i := strings.Index(body, p)
				if i < last {
					return false
				}
				last = i
			}
			return true
		}
		r := alice.get("/review")
		wantStatus(t, r, http.StatusOK)
		if !order(r.body, "Escalated?", "Oldest?", "Newest?") {
			t.Errorf("the default view is not escalated first, then oldest:\n%.4000s", r.body)
		}
		if strings.Count(r.body, `data-testid="queue-item-escalated"`) != 1 || !strings.Contains(r.body, "Escalated to owners") {
			t.Errorf("the queue does not say whom the task was escalated to:\n%.4000s", r.body)
		}
		for _, task := range []*arbiter.Task{mid, late} {
			line := task.OnExpiry.Describe() + " at " + task.DeadlineAt.Time().UTC().Format("2006-01-02 15:04 UTC") + " unless someone decides"
			if !strings.Contains(r.body, line) {
				t.Errorf("the queue lacks %q:\n%.4000s", line, r.body)
			}
		}
		if n := strings.Count(r.body, `data-testid="queue-item-outcome"`); n != 2 {
			t.Errorf("%d outcome lines, want 2 (the oldest only expires)", n)
		}
		r = alice.get("/review?escalated=1")
		if !strings.Contains(r.body, "Escalated?") || strings.Contains(r.body, "Oldest?") || strings.Contains(r.body, "Newest?") ||
			!strings.Contains(r.body, "in this view") || !strings.Contains(r.body, `name="escalated" value="1" checked`) {
			t.Errorf("the escalated view:\n%.4000s", r.body)
		}
		if r := alice.get("/review?order=deadline"); !order(r.body, "Escalated?", "Newest?", "Oldest?") {
			t.Errorf("by time left:\n%.4000s", r.body)
		}
		r = alice.get("/review/tasks/" + mid.ID)
		if !strings.Contains(r.body, `data-testid="task-escalated"`) || !strings.Contains(r.body, "to owners") {
			t.Errorf("the desk does not say the task was escalated:\n%.3000s", r.body)
		}
		if r := alice.get("/review/tasks/" + old.ID); strings.Contains(r.body, `data-testid="task-escalated"`) {
			t.Error("a task never escalated says it was")
		}
	})
}

// TestPolicies_Target puts a policy's target through the API and the
// dashboard's form: the answer and the form show it, a form saved without
// touching it keeps it, and a bad one is refused naming its field.
func TestPolicies_Target(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		status, _, body := a.do("PUT", "/v1/policies/refund", key, `{"confidence_threshold":0.9,"target_error_rate":0.15,"target_confidence":0.9}`)
		if status != http.StatusOK || !strings.Contains(string(body), `"target_error_rate":0.15,"target_confidence":0.9`) {
			t.Fatalf("put = %d %s", status, body)
		}
		status, h, b := a.do("PUT", "/v1/policies/refund", key, `{"target_confidence":0.9}`)
		if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, "target_error_rate") {
			t.Errorf("a confidence alone: %q", msg)
		}
	})
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, _, _ := d.team()
		acct, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")
		r := owner.post("/settings/policy", url.Values{"task_type": {"refund"}, "target_error_rate": {"0.15"}, "target_confidence": {"0.9"}})
		if r.status != http.StatusSeeOther {
			t.Fatalf("saving: %d\n%.1000s", r.status, r.body)
		}
		r = owner.follow(r)
		if !strings.Contains(r.body, `value="0.15"`) || !strings.Contains(r.body, `value="0.9"`) {
			t.Errorf("the form does not show the target:\n%.4000s", r.body)
		}
		if p, err := d.store.FindPolicy(ctx, acct.ID, "refund"); err != nil || p.Target == nil || *p.Target != (arbiter.ErrorTarget{ErrorRate: 0.15, Confidence: 0.9}) {
			t.Fatalf("stored %+v (%v)", p, err)
		}
		if r := owner.post("/settings/policy", url.Values{"task_type": {"refund"}, "target_error_rate": {"high"}}); r.status != http.StatusBadRequest ||
			fieldError(r.body, "target_error_rate") == "" {
			t.Errorf("a bad target: %d", r.status)
		}
		if p, _ := d.store.FindPolicy(ctx, acct.ID, "refund"); p.Target == nil || p.Target.ErrorRate != 0.15 {
			t.Errorf("a refused form changed the policy: %+v", p)
		}
	})
}

// TestPolicies_Cascade puts a policy's say on the cascade through the API
// and the dashboard's form: both show it, saving the form keeps it, and a
// require_person_if that does not compile is refused naming the field.
func TestPolicies_Cascade(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		status, _, body := a.do("PUT", "/v1/policies/refund", key, `{"cascade":["rules","small","large"],"thresholds":{"small":0.97},
			"certified":{"target_error_rate":0.05},"require_person_if":"context.amount > 1000"}`)
		if status != http.StatusOK || !strings.Contains(string(body), `"cascade":["rules","small","large"],"thresholds":{"small":0.97},"certified":{"target_error_rate":0.05,"confidence":0.95},"require_person_if":"context.amount \u003e 1000"`) {
			t.Fatalf("put = %d %s", status, body)
		}
		status, h, b := a.do("PUT", "/v1/policies/refund", key, `{"require_person_if":"context.amount >"}`)
		if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, "require_person_if does not compile") {
			t.Errorf("a bad expression: %q", msg)
		}
	})
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, _, _ := d.team()
		acct, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")
		form := url.Values{"task_type": {"refund"}, "cascade": {"small large"}, "thresholds": {"small 0.97, large 0.9"},
			"certified": {"0.05 0.9"}, "require_person_if": {"context.amount > 1000"}}
		if r := owner.post("/settings/policy", form); r.status != http.StatusSeeOther {
			t.Fatalf("saving: %d\n%.1000s", r.status, r.body)
		}
		p, err := d.store.FindPolicy(ctx, acct.ID, "refund")
		if err != nil || strings.Join(p.Agent.Cascade, " ") != "small large" || *p.Agent.Thresholds["large"] != 0.9 ||
			*p.Agent.Certified != (arbiter.ErrorTarget{ErrorRate: 0.05, Confidence: 0.9}) || p.Agent.RequirePersonIf != "context.amount > 1000" {
			t.Fatalf("stored %+v (%v)", p.Agent, err)
		}
		r := owner.get("/settings/policy?task_type=refund")
		for _, want := range []string{`value="small large"`, `value="large 0.9, small 0.97"`, `value="0.05 0.9"`, `value="context.amount &gt; 1000"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the form lacks %s", want)
			}
		}
		if r := owner.post("/settings/policy", url.Values{"task_type": {"refund"}, "thresholds": {"small high"}}); r.status != http.StatusBadRequest ||
			!strings.Contains(r.body, `<p id="policy-thresholds-error"`) || !strings.Contains(r.body, "Thresholds are pairs of a verifier and a number") {
			t.Errorf("bad thresholds are not told beside their field: %d\n%.3000s", r.status, r.body)
		}
		if r := owner.post("/settings/policy", url.Values{"task_type": {"refund"}, "require_person_if": {"context.amount >"}}); r.status != http.StatusBadRequest ||
			!strings.Contains(r.body, `<p id="policy-require-person-if-error"`) || !strings.Contains(r.body, "The condition for a person does not compile") {
			t.Errorf("a bad expression is not told beside its field in the form's words: %d\n%.3000s", r.status, r.body)
		}
	})
}

// TestReview_PlainDeadlineShows: a task whose deadline only expires it says
// when, on the desk and in the queue ("Expires 14:32 UTC, in 10 minutes"),
// and "Least time left" says of a task without a deadline that it has
// none, which is why it comes last.
func TestReview_PlainDeadlineShows(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		alice := d.browser()
		alice.signIn("alice@example.com")
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		create := func(prompt string, deadline int) *arbiter.Task {
			task, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: prompt, AllowedVerdicts: []string{"approve", "reject"},
				ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email", DeadlineSeconds: deadline})
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		timed, open := create("Timed?", 600), create("Open-ended?", 0)
		sendToHuman(t, d.store)
		when := timed.DeadlineAt.Time().UTC().Format("15:04") + " UTC, in 10 minutes"

		r := alice.get("/review/tasks/" + timed.ID)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="task-expires"`) || !strings.Contains(r.body, when) {
			t.Errorf("the desk does not say when the task expires (%s):\n%.3000s", when, r.body)
		}
		if r := alice.get("/review/tasks/" + open.ID); strings.Contains(r.body, `data-testid="task-expires"`) {
			t.Error("a task without a deadline says it expires")
		}

		r = alice.get("/review")
		if !strings.Contains(r.body, `data-testid="queue-item-expires"`) || !strings.Contains(r.body, "Expires ") || !strings.Contains(r.body, when) {
			t.Errorf("the queue does not say when the task expires (%s):\n%.4000s", when, r.body)
		}
		if strings.Contains(r.body, "No deadline") {
			t.Error("the oldest-first queue speaks of deadlines it does not sort by")
		}
		r = alice.get("/review?order=deadline")
		if !strings.Contains(r.body, when) || strings.Count(r.body, `data-testid="queue-item-no-deadline"`) != 1 ||
			strings.Index(r.body, "Timed?") > strings.Index(r.body, "No deadline") {
			t.Errorf("least time left does not show the times it sorts by:\n%.4000s", r.body)
		}
	})
}

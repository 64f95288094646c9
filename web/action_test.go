package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// actionTask is a create whose action is action.
func actionTask(action string) string {
	return `{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"action":` + action + `}`
}

const refundAction = `{"name":"issue_refund","args":{"amount":120,"currency":"EUR","note":"late"},
	"schema":{"type":"object","properties":{"amount":{"type":"number","minimum":0}}},"editable":["amount","note"]}`

func TestTaskCreate_ActionDigest(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		digest := func(args string) string {
			t.Helper()
			task := createTask(t, a, key, actionTask(`{"name":"issue_refund","args":`+args+`}`))
			action, _ := task["action"].(map[string]any)
			d, _ := action["digest"].(string)
			if !strings.HasPrefix(d, "sha256:") {
				t.Fatalf("action = %v, want a digest", task["action"])
			}
			return d
		}
		one := digest(`{"amount":120,"currency":"EUR","order":{"id":7,"lines":[1,2]}}`)
		if other := digest(`{"order":{"lines":[1,2],"id":7},"currency":"EUR","amount":1.2e2}`); other != one {
			t.Errorf("equal args in another key order: digest %s, want %s", other, one)
		}
		if other := digest(`{"amount":121,"currency":"EUR","order":{"id":7,"lines":[1,2]}}`); other == one {
			t.Error("different args have the same digest")
		}

		task := createTask(t, a, key, actionTask(refundAction))
		action, _ := task["action"].(map[string]any)
		args, _ := json.Marshal(action["args"])
		if string(args) != `{"amount":120,"currency":"EUR","note":"late"}` {
			t.Errorf("args = %s", args)
		}
		if ev, _ := json.Marshal(task["edit_verdicts"]); string(ev) != `["approve"]` {
			t.Errorf("edit_verdicts = %s, want the first allowed verdict", ev)
		}
		if _, ok := task["approved_action"]; ok {
			t.Error("a pending task answers an approved_action")
		}
	})
}

// TestTaskCreate_ActionErrors: every bad input of an action is a 400
// naming its code and field, and stores nothing.
func TestTaskCreate_ActionErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, body, field string }{
		{"args not an object", actionTask(`{"name":"t","args":[1,2]}`), "action.args"},
		{"args missing", actionTask(`{"name":"t"}`), "action.args"},
		{"args not I-JSON", actionTask(`{"name":"t","args":{"a":1,"a":2}}`), "action.args"},
		{"args with a big integer", actionTask(`{"name":"t","args":{"a":9007199254740993}}`), "action.args"},
		{"a schema that does not compile", actionTask(`{"name":"t","args":{},"schema":{"type":"nothing"}}`), "action.schema"},
		{"a schema with a remote ref", actionTask(`{"name":"t","args":{},"schema":{"$ref":"http://169.254.169.254/s"}}`), "action.schema"},
		{"args that fail the schema", actionTask(`{"name":"t","args":{"amount":-5},"schema":{"properties":{"amount":{"minimum":0}}}}`), "action.args"},
		{"editable naming a field not in args", actionTask(`{"name":"t","args":{"amount":1},"editable":["note"]}`), "action.editable"},
		{"no name", actionTask(`{"args":{}}`), "action.name"},
		{"action not an object", actionTask(`"issue_refund"`), "action"},
		{"action null", actionTask(`null`), "action"},
		{"edit_verdicts without an editable action", `{"prompt":"p","allowed_verdicts":["a"],"edit_verdicts":["a"]}`, "edit_verdicts"},
		{"edit_verdicts not allowed", `{"prompt":"p","allowed_verdicts":["a"],"edit_verdicts":["b"],"action":{"name":"t","args":{"x":1},"editable":["x"]}}`, "edit_verdicts"},
	}
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		for _, c := range cases {
			for _, path := range []string{"/v1/tasks", "/v1/tasks/batch"} {
				body := c.body
				if path == "/v1/tasks/batch" {
					body = `{"tasks":[` + c.body + `]}`
				}
				status, header, b := a.do("POST", path, key, body)
				if path == "/v1/tasks/batch" {
					// A batch answers 200 with the item's error.
					var res struct {
						Results []struct{ Kind, Code, Field string }
					}
					if status != http.StatusOK || json.Unmarshal(b, &res) != nil || len(res.Results) != 1 ||
						res.Results[0].Code != arbiter.CodeInvalidField || res.Results[0].Field != c.field {
						t.Errorf("%s (batch): %d %s, want the item refused naming %s", c.name, status, b, c.field)
					}
					continue
				}
				wantError(t, status, header, b, http.StatusBadRequest)
				var e struct{ Code, Field string }
				_ = json.Unmarshal(b, &e)
				if e.Code != arbiter.CodeInvalidField || e.Field != c.field {
					t.Errorf("%s: code %q field %q, want invalid_field %q (%s)", c.name, e.Code, e.Field, c.field, b)
				}
			}
		}
		status, _, b := a.do("GET", "/v1/tasks", key, "")
		var list struct{ Tasks []any }
		if status != http.StatusOK || json.Unmarshal(b, &list) != nil || len(list.Tasks) != 0 {
			t.Errorf("after the refused creates the account lists %s", b)
		}
	})
}

// decideHuman moves the account's pending tasks to a person and decides
// each approve, on the action shown.
func decideHuman(t *testing.T, a *api, email string) {
	t.Helper()
	acct, err := a.store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := a.store.ClaimTasks(ctx, "wrk_test", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if err := a.store.FinishAgentAttempt(ctx, "wrk_test", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, ActionDigest: c.ProposedDigest()}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := a.store.ListTasks(ctx, acct.ID, arbiter.TaskFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range page.Tasks {
		if task.Status != arbiter.StatusHumanNeeded {
			continue
		}
		dec := arbiter.HumanDecision{Verdict: "approve", Reviewer: email}
		if task.Action != nil {
			dec.ActionDigest = task.Action.Digest
		}
		if _, err := a.store.DecideTask(ctx, acct.ID, task.ID, dec); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAuditExport_API: the export verifies against the keys the server
// publishes, holds the account's decisions (with the approved action) and
// events and none of another account's; a bad since is a 400 naming it,
// and without a key a 401.
func TestAuditExport_API(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key, otherKey := a.newKey("a@example.com"), a.newKey("b@example.com")
		own := createTask(t, a, key, actionTask(refundAction))
		createTask(t, a, key, goodTask)
		other := createTask(t, a, otherKey, goodTask)
		decideHuman(t, a, "a@example.com")
		decideHuman(t, a, "b@example.com")

		status, header, jwks := a.do("GET", "/.well-known/arbiter/jwks.json", "", "")
		var keys arbiter.JWKS
		if status != http.StatusOK || json.Unmarshal(jwks, &keys) != nil || len(keys.Keys) == 0 || header.Get("Cache-Control") == "" {
			t.Fatalf("jwks = %d %s", status, jwks)
		}
		status, header, export := a.do("GET", "/v1/audit/export", key, "")
		if status != http.StatusOK || header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("export = %d %s %s", status, header.Get("Content-Type"), export)
		}
		rep, err := arbiter.VerifyAuditExport(strings.NewReader(string(export)), &keys)
		if err != nil {
			t.Fatalf("the export does not verify: %v\n%s", err, export)
		}
		if rep.Decisions != 2 || rep.Events < 2 {
			t.Errorf("report = %+v, want 2 decisions and the decisions' audit lines", rep)
		}
		text := string(export)
		if !strings.Contains(text, own["id"].(string)) || strings.Contains(text, other["id"].(string)) {
			t.Error("the export does not hold the account's task, or holds another account's")
		}
		if !strings.Contains(text, `"approved_action":{"args":{"amount":120`) {
			t.Errorf("the decision line does not carry the approved action:\n%s", text)
		}
		// since after everything: the export line and the end alone.
		status, _, later := a.do("GET", "/v1/audit/export?since=4102444800", key, "")
		if rep, err := arbiter.VerifyAuditExport(strings.NewReader(string(later)), &keys); status != http.StatusOK || err != nil || rep.Lines != 2 {
			t.Errorf("a later since = %d %+v %v", status, rep, err)
		}
		status, header, b := a.do("GET", "/v1/audit/export?since=someday", key, "")
		wantError(t, status, header, b, http.StatusBadRequest)
		if !strings.Contains(string(b), `"field":"since"`) {
			t.Errorf("a bad since: %s", b)
		}
		status, header, b = a.do("GET", "/v1/audit/export", "", "")
		wantError(t, status, header, b, http.StatusUnauthorized)
	})
}

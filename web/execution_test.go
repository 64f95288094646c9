package web_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// decideAction creates the refund action's task with key, passes it to a
// person and has them approve it with the amount edited to 80; it returns
// the task's id and the approved action's digest.
func decideAction(t *testing.T, a *api, key string) (id, approved string) {
	t.Helper()
	task := createTask(t, a, key, actionTask(refundAction))
	id = task["id"].(string)
	claimed, err := a.store.ClaimTasks(ctx, "w", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if err := a.store.FinishAgentAttempt(ctx, "w", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
	}
	account, err := a.store.FindOrCreateAccountByEmail(ctx, "a@example.com")
	if err != nil {
		t.Fatal(err)
	}
	proposed := task["action"].(map[string]any)["digest"].(string)
	if _, err := a.store.DecideTask(ctx, account.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com",
		ActionDigest: proposed, EditedArgs: json.RawMessage(`{"amount":80,"currency":"EUR","note":"late"}`)}); err != nil {
		t.Fatal(err)
	}
	status, _, b := a.do("GET", "/v1/tasks/"+id, key, "")
	var got struct {
		Approved struct {
			Digest string `json:"digest"`
		} `json:"approved_action"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &got) != nil || got.Approved.Digest == "" || got.Approved.Digest == proposed {
		t.Fatalf("the decided task = %d %s, want an edited approved_action", status, b)
	}
	return id, got.Approved.Digest
}

func TestTaskExecutionClaim(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id, approved := decideAction(t, a, key)
		path := "/v1/tasks/" + id + "/execution"
		claim := `{"digest":"` + approved + `","claim_id":"gw-1","executor":"arbiter gateway on host-1","verdicts":["approve"]}`

		status, _, b := a.do("POST", path, key, claim)
		var first map[string]any
		if status != http.StatusOK || json.Unmarshal(b, &first) != nil || first["task_id"] != id || first["digest"] != approved ||
			first["claim_id"] != "gw-1" || first["executor"] != "arbiter gateway on host-1" {
			t.Fatalf("claim = %d %s", status, b)
		}
		// The same claim again: the same answer.
		if status, _, again := a.do("POST", path, key, claim); status != http.StatusOK || string(again) != string(b) {
			t.Errorf("the same claim again = %d %s, want %s", status, again, b)
		}
		// Another claim: 409 already_executed.
		status, h, b := a.do("POST", path, key, `{"digest":"`+approved+`","claim_id":"gw-2"}`)
		wantError(t, status, h, b, http.StatusConflict)
		if code := errorCode(t, b); code != arbiter.ReasonAlreadyExecuted {
			t.Errorf("another claim's code = %q", code)
		}
		// Another account's key: 404.
		other := a.newKey("other@example.com")
		status, h, b = a.do("POST", path, other, claim)
		wantError(t, status, h, b, http.StatusNotFound)
	})
}

// TestTaskExecutionClaim_Refusals: a bad body is 400 naming its field; a
// task that may not run is 409 conflict; nothing is recorded, and the
// right claim still holds after them.
func TestTaskExecutionClaim_Refusals(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id, approved := decideAction(t, a, key)
		path := "/v1/tasks/" + id + "/execution"
		for _, c := range []struct{ body, field string }{
			{`{"claim_id":"c"}`, "digest"},
			{`{"digest":"sha256:abc","claim_id":"c"}`, "digest"},
			{`{"digest":"` + approved + `"}`, "claim_id"},
			{`{"digest":"` + approved + `","claim_id":""}`, "claim_id"},
			{`{"digest":"` + approved + `","claim_id":"c\u00e9"}`, "claim_id"},
			{`{"digest":"` + approved + `","claim_id":"c","executor":null}`, "executor"},
			{`{"digest":"` + approved + `","claim_id":"c","verdicts":"approve"}`, "verdicts"},
			{`{"digest":"` + approved + `","claim_id":"c","verdicts":[""]}`, "verdicts"},
		} {
			status, h, b := a.do("POST", path, key, c.body)
			wantError(t, status, h, b, http.StatusBadRequest)
			var e struct{ Field string }
			if json.Unmarshal(b, &e) != nil || e.Field != c.field {
				t.Errorf("%s: %s, want field %s", c.body, b, c.field)
			}
		}
		status, h, b := a.do("POST", path, key, `{"digest":"`+approved+`","claim_id":"c","unknown":1}`)
		wantError(t, status, h, b, http.StatusBadRequest)
		for _, body := range []string{
			// The proposal's digest, not the approved one.
			`{"digest":"sha256:` + "0000000000000000000000000000000000000000000000000000000000000000" + `","claim_id":"c"}`,
			// Verdicts that do not approve it.
			`{"digest":"` + approved + `","claim_id":"c","verdicts":["reject"]}`,
		} {
			status, h, b := a.do("POST", path, key, body)
			wantError(t, status, h, b, http.StatusConflict)
			if code := errorCode(t, b); code != arbiter.CodeConflict {
				t.Errorf("%s: code %q, want conflict", body, code)
			}
		}
		pending := createTask(t, a, key, actionTask(refundAction))
		status, h, b = a.do("POST", "/v1/tasks/"+pending["id"].(string)+"/execution", key, `{"digest":"`+approved+`","claim_id":"c"}`)
		wantError(t, status, h, b, http.StatusConflict)
		if status, _, b := a.do("POST", path, key, `{"digest":"`+approved+`","claim_id":"c"}`); status != http.StatusOK {
			t.Errorf("the claim after the refusals = %d %s", status, b)
		}
	})
}

// errorCode reads an error answer's code.
func errorCode(t *testing.T, b []byte) string {
	t.Helper()
	var e struct{ Code string }
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e.Code
}

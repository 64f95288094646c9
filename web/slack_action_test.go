package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/slack/slackfake"
)

// actionHumanTask is humanTask with the refund action, its amount and
// currency editable, waiting for a person.
func actionHumanTask(t *testing.T, store *db.DB, email string) *arbiter.Task {
	t.Helper()
	acct, err := store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	in, err := arbiter.ParseTaskCreate([]byte(`{"prompt": "Refund?", "allowed_verdicts": ["approve", "reject"],
		"action": {"name": "issue_refund", "args": {"amount": 120, "currency": "EUR", "order": "o-1"},
			"schema": {"type": "object", "properties": {"amount": {"type": "number", "minimum": 0, "maximum": 500},
				"currency": {"enum": ["EUR", "USD"]}, "order": {"type": "string"}}},
			"editable": ["amount", "currency"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	task, err := store.CreateTask(ctx, acct.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := store.ClaimTasks(ctx, "wrk_test", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if err := store.FinishAgentAttempt(ctx, "wrk_test", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, ActionDigest: c.ProposedDigest()}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
	}
	return task
}

// interaction is the body Slack posts for payload.
func interaction(payload map[string]any) []byte {
	payload["team"] = map[string]any{"id": "T0FAKE"}
	b, _ := json.Marshal(payload)
	return []byte(url.Values{"payload": {string(b)}}.Encode())
}

// TestSlackInteractions_TheActionsDigest: the question shows the action's
// digest and every button carries it; a click whose digest is not the
// action's in force is refused and changes nothing; "Edit and approve"
// opens a modal of the editable members, whose submission approves the
// edited action, answered at the message's response URL.
func TestSlackInteractions_TheActionsDigest(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			s := newSlackSite(t, dialect, db.Options{})
			task := actionHumanTask(t, s.store, "owner@example.com")
			digest := task.Action.Digest
			current, err := s.store.FindTaskByID(ctx, s.accountID, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			q, _ := json.Marshal(slack.Question(current, "https://desk.example.com/t").Blocks)
			if !strings.Contains(string(q), arbiter.ShortDigest(digest)) || !strings.Contains(string(q), "issue_refund") {
				t.Errorf("the question does not show the action and its digest: %s", q)
			}
			if strings.Contains(string(q), slack.EncodeValue(task.ID, "", "approve")) || !strings.Contains(string(q), slack.EncodeValue(task.ID, digest, "approve")) {
				t.Errorf("the buttons do not carry the digest: %s", q)
			}
			if !strings.Contains(string(q), slack.ActionEdit) {
				t.Errorf("no Edit and approve for a simple schema: %s", q)
			}

			click := func(value string) {
				t.Helper()
				body := interaction(map[string]any{"type": "block_actions", "user": map[string]any{"id": "UOWNER"},
					"response_url": s.fake.ResponseURL, "trigger_id": "trig",
					"actions": []map[string]any{{"type": "button", "block_id": "decide", "action_id": slack.ActionDecide + "_0", "value": value}}})
				if got := s.post(t, body, slackfake.Signed(body, slackSecret, time.Now())); got != http.StatusOK {
					t.Fatalf("click: %d", got)
				}
			}
			// A copy that predates actions, and one of another action.
			click(slack.EncodeValue(task.ID, "", "approve"))
			click(slack.EncodeValue(task.ID, "sha256:"+strings.Repeat("0", 64), "approve"))
			for _, text := range s.responses(t, 2) {
				if !strings.Contains(text, "action changed") {
					t.Errorf("a stale click was answered %q", text)
				}
			}
			if n := len(s.humanAttempts(t, task.ID)); n != 0 {
				t.Fatalf("stale clicks recorded %d attempts", n)
			}

			// Edit and approve: the modal, then its submission.
			body := interaction(map[string]any{"type": "block_actions", "user": map[string]any{"id": "UOWNER"},
				"response_url": s.fake.ResponseURL, "trigger_id": "trig",
				"actions": []map[string]any{{"type": "button", "block_id": "decide", "action_id": slack.ActionEdit,
					"value": slack.EncodeValue(task.ID, digest, "edit")}}})
			if got := s.post(t, body, slackfake.Signed(body, slackSecret, time.Now())); got != http.StatusOK {
				t.Fatalf("edit click: %d", got)
			}
			opened := s.fake.WaitCalls(t, "views.open", 1)[0]
			var open struct {
				View struct {
					CallbackID      string `json:"callback_id"`
					PrivateMetadata string `json:"private_metadata"`
					Blocks          []struct {
						BlockID string `json:"block_id"`
					} `json:"blocks"`
				} `json:"view"`
			}
			if err := json.Unmarshal([]byte(opened.Body), &open); err != nil {
				t.Fatal(err)
			}
			view := open.View
			var inputs []string
			for _, b := range view.Blocks {
				if strings.HasPrefix(b.BlockID, "arg:") {
					inputs = append(inputs, b.BlockID)
				}
			}
			if view.CallbackID != slack.CallbackEdit || strings.Join(inputs, ",") != "arg:amount,arg:currency" {
				t.Fatalf("the edit modal = %s", opened.Body)
			}
			submit := func(amount string) {
				t.Helper()
				body := interaction(map[string]any{"type": "view_submission", "user": map[string]any{"id": "UOWNER"},
					"view": map[string]any{"callback_id": slack.CallbackEdit, "private_metadata": view.PrivateMetadata,
						"state": map[string]any{"values": map[string]any{
							"arg:amount":   map[string]any{"value": map[string]any{"type": "plain_text_input", "value": amount}},
							"arg:currency": map[string]any{"value": map[string]any{"type": "static_select", "selected_option": map[string]any{"value": "USD"}}},
						}}}})
				if got := s.post(t, body, slackfake.Signed(body, slackSecret, time.Now())); got != http.StatusOK {
					t.Fatalf("submission: %d", got)
				}
			}
			submit("9000") // over the schema's maximum: refused, said at the response URL
			if got := s.responses(t, 3)[2]; !strings.Contains(got, "maximum") {
				t.Errorf("an edit the schema refuses was answered %q", got)
			}
			submit("75.5")
			if got := s.responses(t, 4)[3]; !strings.Contains(got, "approve") {
				t.Errorf("the edit was answered %q", got)
			}
			done, err := s.store.FindTaskByID(ctx, s.accountID, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if done.Status != arbiter.StatusCompleted || done.ApprovedAction == nil || !done.ApprovedAction.Edited ||
				string(done.ApprovedAction.Args) != `{"amount":75.5,"currency":"USD","order":"o-1"}` {
				t.Fatalf("after the edit: %s, approved %+v", done.Status, done.ApprovedAction)
			}
		})
	}
}

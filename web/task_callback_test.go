package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/db"
)

// TestTaskCreate_CallbackURL: a create's callback_url must be an https://
// URL on a public address (unless ARBITER_WEBHOOK_ALLOW_PRIVATE); one that
// is not is a 400 naming it, and stores nothing; in a batch, only its item
// is refused.
func TestTaskCreate_CallbackURL(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		task := createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["a"],"callback_url":"https://example.com/resume/1"}`)
		if task["status"] != "pending" {
			t.Fatalf("created %v", task)
		}
		for body, want := range map[string]string{
			`{"prompt":"p","allowed_verdicts":["a"],"callback_url":"http://example.com/x"}`:      "https://",
			`{"prompt":"p","allowed_verdicts":["a"],"callback_url":"https://127.0.0.1/x"}`:       "public address",
			`{"prompt":"p","allowed_verdicts":["a"],"callback_url":"https://169.254.169.254/x"}`: "public address",
			`{"prompt":"p","allowed_verdicts":["a"],"callback_url":"https://u:p@example.com/x"}`: "password",
			`{"prompt":"p","allowed_verdicts":["a"],"callback_url":42}`:                          "must be a string",
			`{"prompt":"p","allowed_verdicts":["a"],"callback_url":"not a url"}`:                 "callback_url",
			`{"prompt":"p","allowed_verdicts":["a"],"callback_url":"https://example.com/#frag"}`: "fragment",
		} {
			status, h, b := a.do("POST", "/v1/tasks", key, body)
			if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, want) || !strings.Contains(msg, "callback_url") {
				t.Errorf("%s: %q, want it to name callback_url and say %q", body, msg, want)
			}
		}
		status, _, b := a.do("POST", "/v1/tasks/batch", key, `{"tasks":[
			{"prompt":"p","allowed_verdicts":["a"],"callback_url":"https://example.com/ok"},
			{"prompt":"p","allowed_verdicts":["a"],"callback_url":"http://10.0.0.1/x"}]}`)
		var batch struct {
			Results []struct {
				Status int    `json:"status"`
				Error  string `json:"error"`
			} `json:"results"`
		}
		if err := json.Unmarshal(b, &batch); err != nil || status != http.StatusOK || len(batch.Results) != 2 {
			t.Fatalf("batch: %d %s", status, b)
		}
		if batch.Results[0].Status != 200 || batch.Results[1].Status != 400 || !strings.Contains(batch.Results[1].Error, "callback_url") {
			t.Errorf("batch results %+v", batch.Results)
		}
		status, _, b = a.do("GET", "/v1/tasks?limit=100", key, "")
		var page struct {
			Tasks []json.RawMessage `json:"tasks"`
		}
		if err := json.Unmarshal(b, &page); err != nil || status != 200 || len(page.Tasks) != 2 {
			t.Errorf("the account has %d tasks after the refusals, want 2: %s", len(page.Tasks), b)
		}
	})
}

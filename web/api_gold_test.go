package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

func TestTaskCreate_GoldVerdict(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		const create = `{"prompt":"Refund 40 EUR?","allowed_verdicts":["verdict-kestrel","verdict-plover"],"gold_verdict":"verdict-kestrel"}`
		task := createTask(t, a, key, create)
		id := task["id"].(string)
		if task["status"] != arbiter.StatusHumanNeeded {
			t.Errorf("a gold task's create answered status %v, want human_needed", task["status"])
		}
		// The account's own reads return the gold verdict.
		status, _, b := a.do("GET", "/v1/tasks/"+id, key, "")
		var got map[string]any
		if status != http.StatusOK || json.Unmarshal(b, &got) != nil || got["gold_verdict"] != "verdict-kestrel" {
			t.Errorf("get = %d %s, want gold_verdict verdict-kestrel", status, b)
		}
		plain := createTask(t, a, key, goodTask)
		status, _, b = a.do("GET", "/v1/tasks", key, "")
		var page struct {
			Tasks []map[string]any `json:"tasks"`
		}
		if status != http.StatusOK || json.Unmarshal(b, &page) != nil || len(page.Tasks) != 2 {
			t.Fatalf("list = %d %s", status, b)
		}
		for _, tk := range page.Tasks {
			want := any(nil)
			if tk["id"] == id {
				want = "verdict-kestrel"
			}
			if _, has := tk["gold_verdict"]; tk["gold_verdict"] != want || (want == nil && has) {
				t.Errorf("listed task %v has gold_verdict %v, want %v", tk["id"], tk["gold_verdict"], want)
			}
		}
		if status, _, b := a.do("GET", "/v1/tasks/"+plain["id"].(string), key, ""); status != http.StatusOK || strings.Contains(string(b), "gold") {
			t.Errorf("a plain task's read = %d %s, want no gold_verdict", status, b)
		}
		// Another account: 404, as for any task.
		other := a.newKey("other@example.com")
		if status, _, _ := a.do("GET", "/v1/tasks/"+id, other, ""); status != http.StatusNotFound {
			t.Errorf("another account's read = %d, want 404", status)
		}

		// Not an allowed verdict: 400 naming the field, nothing created.
		before := countTasks(t, a, key)
		for _, body := range []string{
			`{"prompt":"p","allowed_verdicts":["approve","reject"],"gold_verdict":"maybe"}`,
			`{"prompt":"p","allowed_verdicts":["approve","reject"],"gold_verdict":null}`,
			`{"prompt":"p","allowed_verdicts":["approve","reject"],"gold_verdict":"reject","reviews_required":2}`,
		} {
			status, h, b := a.do("POST", "/v1/tasks", key, body)
			if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, "gold_verdict") {
				t.Errorf("%s answered %q, want a sentence naming gold_verdict", body, msg)
			}
		}
		if after := countTasks(t, a, key); after != before {
			t.Errorf("refused creates stored %d tasks", after-before)
		}
		// In a batch: the bad item refused, the good one created gold.
		status, _, b = a.do("POST", "/v1/tasks/batch", key, `{"tasks":[{"prompt":"p","allowed_verdicts":["a","b"],"gold_verdict":"c"},
			{"prompt":"p","allowed_verdicts":["a","b"],"gold_verdict":"b"}]}`)
		var results struct {
			Results []struct {
				Status int            `json:"status"`
				Task   map[string]any `json:"task"`
			} `json:"results"`
		}
		if status != http.StatusMultiStatus && status != http.StatusOK || json.Unmarshal(b, &results) != nil || len(results.Results) != 2 ||
			results.Results[0].Status != http.StatusBadRequest || results.Results[1].Task == nil {
			t.Fatalf("batch = %d %s", status, b)
		}
		status, _, b = a.do("GET", "/v1/tasks/"+results.Results[1].Task["id"].(string), key, "")
		if status != http.StatusOK || !strings.Contains(string(b), `"gold_verdict":"b"`) {
			t.Errorf("the batch's gold task = %d %s", status, b)
		}
	})
}

// countTasks counts the key's account's tasks through the API.
func countTasks(t *testing.T, a *api, key string) int {
	t.Helper()
	status, _, b := a.do("GET", "/v1/tasks?limit=100", key, "")
	var page struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &page) != nil {
		t.Fatalf("list = %d %s", status, b)
	}
	return len(page.Tasks)
}

func TestAgreementGet_GoldAccuracy(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("owner@example.com")
		acct, err := a.store.FindOrCreateAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		for _, verdict := range []string{"reject", "approve", "reject"} {
			task := createTask(t, a, key, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"gold_verdict":"reject"}`)
			if _, err := a.store.DecideTask(ctx, acct.ID, task["id"].(string), arbiter.HumanDecision{Verdict: verdict, Reviewer: "ann@example.com"}); err != nil {
				t.Fatal(err)
			}
		}
		status, _, b := a.do("GET", "/v1/agreement", key, "")
		var report arbiter.AgreementReport
		if status != http.StatusOK || json.Unmarshal(b, &report) != nil {
			t.Fatalf("agreement = %d %s", status, b)
		}
		if report.Tasks != 0 || report.Pairs != 0 || len(report.Reviewers) != 1 {
			t.Fatalf("report = %s; want no tasks or pairs, ann's line", b)
		}
		ann := report.Reviewers[0]
		if ann.Email != "ann@example.com" || ann.GoldAnswered != 3 || ann.GoldCorrect != 2 || ann.GoldAccuracy == nil ||
			*ann.GoldAccuracy != 2.0/3 || ann.Votes != 0 {
			t.Errorf("ann = %+v; want 2 of 3 gold right, no votes", ann)
		}
	})
}

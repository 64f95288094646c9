package web_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/arbiterhq/arbiter/db"
)

func TestTaskCreate_ReviewRequirement(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		task := createTask(t, a, key, `{"prompt":"Release 12,000 EUR?","allowed_verdicts":["approve","reject"],
			"reviews_required":3,"consensus":"quorum","quorum":2,"veto":["reject"],
			"requested_by":"CFO@example.com","exclude_requester":true,"tiebreak":"role:admin"}`)
		want := `map[consensus:quorum exclude_requester:true quorum:2 requested_by:cfo@example.com reviews_required:3 tiebreak:role:admin veto:[reject]]`
		if got := fmt.Sprint(task["review"]); got != want {
			t.Errorf("review = %s, want %s", got, want)
		}
		status, _, b := a.do("GET", "/v1/tasks/"+task["id"].(string), key, "")
		var got map[string]any
		if status != http.StatusOK || json.Unmarshal(b, &got) != nil || fmt.Sprint(got["review"]) != want {
			t.Errorf("get = %d %s, want the review requirement", status, b)
		}
		if plain := createTask(t, a, key, goodTask); plain["review"] != nil {
			t.Errorf("a plain task has review %v", plain["review"])
		}
		// A bad requirement is a 400 naming its field, and stores nothing.
		status, h, b := a.do("POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a","b"],"reviews_required":2,"consensus":"quorum","quorum":1}`)
		if msg := wantError(t, status, h, b, 400); msg == "" {
			t.Error("no error sentence")
		}
	})
}

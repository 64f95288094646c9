package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/db"
)

// TestTaskCreate_Display: a create's display hint is returned with the
// task, on create and on every read, alone and in a batch; a hint that
// does not fit the context is a 400 about display that stores nothing.
func TestTaskCreate_Display(t *testing.T) {
	const hint = `{"fields":[{"field":"summary","view":"markdown"},{"field":"order"}]}`
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		task := createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["a"],"context":{"order":"A1","summary":"# Hi"},"display":`+hint+`}`)
		if got, _ := json.Marshal(task["display"]); string(got) != hint {
			t.Errorf("the created task's display = %s, want %s", got, hint)
		}
		status, _, b := a.do("GET", "/v1/tasks/"+task["id"].(string), key, "")
		if status != http.StatusOK || !strings.Contains(string(b), `"display":`+hint) {
			t.Errorf("GET = %d %s", status, b)
		}
		if plain := createTask(t, a, key, goodTask); plain["display"] != nil {
			t.Errorf("a task without a hint has display %v", plain["display"])
		}
		for bad, want := range map[string]string{
			`{"fields":[{"field":"total"}]}`:                `"total" is not a member of context`,
			`{"fields":[{"field":"order","view":"video"}]}`: "view must be one of",
			`{"fields":[]}`: "array of 1 to 16",
			`null`:          "display must be an object",
			`{"fields":[{"field":"order"}],"sort":"reversed"}`: `unknown field "sort"`,
		} {
			status, h, b := a.do("POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a"],"context":{"order":"A1"},"display":`+bad+`}`)
			if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, want) || !strings.Contains(string(b), `"field":"display"`) {
				t.Errorf("display %s: %s", bad, b)
			}
		}
		if l := a.list(key, ""); len(l.Tasks) != 2 {
			t.Errorf("the refused creates stored tasks: %v", l.ids())
		}
		status, _, b = a.do("POST", "/v1/tasks/batch", key, `{"tasks":[{"prompt":"p","allowed_verdicts":["a"],"context":{"order":"A1","summary":"# Hi"},"display":`+hint+`},
			{"prompt":"p","allowed_verdicts":["a"],"display":`+hint+`}]}`)
		if status != http.StatusOK || !strings.Contains(string(b), `"display":`+hint) || !strings.Contains(string(b), `"status":400`) {
			t.Errorf("batch with display hints = %d %s", status, b)
		}
	})
}

package worker_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/worker"
)

// TestWorker_OpenAIBackend drives the worker through the openai backend
// against a fake Chat Completions server: each answer the server gives ends
// the task where the routing rule says.
func TestWorker_OpenAIBackend(t *testing.T) {
	content := func(verdict string, confidence float64) string {
		b, _ := json.Marshal(map[string]any{"verdict": verdict, "confidence": confidence, "rationale": "checked"})
		return string(b)
	}
	cases := []struct {
		name     string
		status   int
		content  string
		delay    time.Duration
		want     string
		attempts int
	}{
		{"Confident", 200, content("approve", 0.93), 0, arbiter.StatusCompleted, 1},
		{"Unconfident", 200, content("approve", 0.4), 0, arbiter.StatusHumanNeeded, 1},
		{"MalformedContent", 200, "approve, probably", 0, arbiter.StatusHumanNeeded, 3},
		{"VerdictOutsideSet", 200, content("maybe", 0.99), 0, arbiter.StatusHumanNeeded, 3},
		{"HTTP500", 500, "", 0, arbiter.StatusHumanNeeded, 3},
		{"Timeout", 200, content("approve", 0.99), time.Second, arbiter.StatusHumanNeeded, 3},
	}
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		for i, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				var sawSchema, sawKey atomic.Bool
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					var req struct {
						ResponseFormat struct {
							JSONSchema struct {
								Schema struct {
									Properties struct {
										Verdict struct {
											Enum []string `json:"enum"`
										} `json:"verdict"`
									} `json:"properties"`
								} `json:"schema"`
							} `json:"json_schema"`
						} `json:"response_format"`
					}
					json.NewDecoder(r.Body).Decode(&req)
					sawSchema.Store(strings.Join(req.ResponseFormat.JSONSchema.Schema.Properties.Verdict.Enum, ",") == "approve,reject")
					sawKey.Store(r.Header.Get("Authorization") == "Bearer sk-test")
					if tc.delay > 0 {
						select {
						case <-time.After(tc.delay):
						case <-r.Context().Done():
							return
						}
					}
					if tc.status != 200 {
						http.Error(w, "overloaded", tc.status)
						return
					}
					json.NewEncoder(w).Encode(map[string]any{"choices": []any{
						map[string]any{"message": map[string]any{"role": "assistant", "content": tc.content}},
					}})
				}))
				defer srv.Close()
				v, err := agent.New(agent.Config{Backend: "openai", BaseURL: srv.URL, APIKey: "sk-test",
					Model: "fake-model", Timeout: 100 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				stop := start(t, store, v, func(c *worker.Config) { c.AttemptTimeout = 100 * time.Millisecond })
				defer stop()
				acct, id := createTask(t, store, "case"+string(rune('a'+i))+"@example.com")
				task := waitFor(t, store, acct, id, settled)
				if task.Status != tc.want || len(task.Attempts) != tc.attempts {
					t.Fatalf("task = %s with %d attempts, want %s with %d", task.Status, len(task.Attempts), tc.want, tc.attempts)
				}
				if !sawSchema.Load() || !sawKey.Load() {
					t.Errorf("request carried the schema %v and the bearer key %v", sawSchema.Load(), sawKey.Load())
				}
				if tc.want == arbiter.StatusCompleted && (*task.FinalTier != "agent" || *task.Attempts[0].Model != "fake-model") {
					t.Errorf("completed task = %+v", task)
				}
				if tc.attempts == 3 {
					for _, a := range task.Attempts {
						if a.Error == nil || strings.Contains(*a.Error, "sk-test") {
							t.Errorf("failed attempt error = %v", a.Error)
						}
					}
				}
			})
		}
	})
}

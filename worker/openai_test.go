package worker_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
		reason   string // each failed attempt's error, as API callers read it
	}{
		{"Confident", 200, content("approve", 0.93), 0, arbiter.StatusCompleted, 1, ""},
		{"Unconfident", 200, content("approve", 0.4), 0, arbiter.StatusHumanNeeded, 1, ""},
		{"MalformedContent", 200, "approve, probably", 0, arbiter.StatusHumanNeeded, 3, arbiter.VerifierUnreadable},
		{"VerdictOutsideSet", 200, content("maybe", 0.99), 0, arbiter.StatusHumanNeeded, 3, arbiter.VerifierVerdictOutsideSet},
		{"HTTP500", 500, "", 0, arbiter.StatusHumanNeeded, 3, "the verifier answered HTTP 500"},
		// The worker's limit is the call's only one, so the verifier
		// says in its own words that time ran out.
		{"Timeout", 200, content("approve", 0.99), time.Minute, arbiter.StatusHumanNeeded, 3, arbiter.VerifierTimedOut},
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
				v, err := agent.New(agent.Config{Backend: "openai", BaseURL: srv.URL, APIKey: "sk-test", Model: "fake-model"})
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
				if tc.reason != "" {
					wantAttemptErrors(t, task, tc.reason, srv.URL)
				}
				// Every attempt, failed ones too, names the model called.
				for _, a := range task.Attempts {
					if a.Model == nil || *a.Model != "fake-model" {
						t.Errorf("attempt %+v does not name the model called", a)
					}
				}
			})
		}
	})
}

// TestWorker_UnreachableVerifier points the openai backend at a closed
// port: the attempts say the verifier could not be reached, and name no
// address; the log has the full error.
func TestWorker_UnreachableVerifier(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		v, err := agent.New(agent.Config{Backend: "openai", BaseURL: closed + "/v1", Model: "fake-model"})
		if err != nil {
			t.Fatal(err)
		}
		var logs syncBuffer
		start(t, store, v, func(c *worker.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
		acct, id := createTask(t, store, "a@example.com")
		task := waitFor(t, store, acct, id, settled)
		if task.Status != arbiter.StatusHumanNeeded || len(task.Attempts) != 3 {
			t.Fatalf("task = %s with %d attempts, want human_needed after 3", task.Status, len(task.Attempts))
		}
		wantAttemptErrors(t, task, arbiter.VerifierUnreachable, closed)
		if got := logs.String(); !strings.Contains(got, "verifier call failed") || !strings.Contains(got, ln.Addr().String()) {
			t.Errorf("the log does not hold the full error:\n%s", got)
		}
	})
}

// wantAttemptErrors checks that every attempt of task failed with reason
// and that none names the verifier's address or its key.
func wantAttemptErrors(t *testing.T, task *arbiter.Task, reason, verifierURL string) {
	t.Helper()
	host := strings.TrimPrefix(verifierURL, "http://")
	for _, a := range task.Attempts {
		switch {
		case a.Error == nil:
			t.Errorf("attempt %+v did not fail", a)
		case *a.Error != reason:
			t.Errorf("attempt error = %q, want %q", *a.Error, reason)
		case strings.Contains(*a.Error, host), strings.Contains(*a.Error, "127.0.0.1"), strings.Contains(*a.Error, "sk-test"):
			t.Errorf("attempt error %q names an address or the key", *a.Error)
		}
	}
}

// syncBuffer is an io.Writer safe for the worker's goroutines and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

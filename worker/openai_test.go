package worker_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/worker"
)

// TestWorker_OpenAIBackend drives the worker through the openai backend
// against a fake Chat Completions server: each answer the server gives ends
// the task where the routing rule says.
func TestWorker_OpenAIBackend(t *testing.T) {
	t.Parallel()
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
				// Only the case about the limit meets it; the others get
				// one a loaded machine never reaches, so a slow round trip
				// is not taken for a timed-out verifier.
				timeout := 30 * time.Second
				if tc.delay > 0 {
					timeout = 100 * time.Millisecond
				}
				stop := start(t, store, v, func(c *worker.Config) { c.AttemptTimeout = timeout })
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
	t.Parallel()
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
		var logs testutil.SyncBuffer
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

// TestWorker_ThrottlingProvider is the 20 s storm of 429s with
// Retry-After: 5, compressed to 3 s of 429s with Retry-After: 1 for 24
// tasks on 8 slots: no task goes to a human, each task's call after a 429
// comes at least its Retry-After later, the whole backend slows down while
// the provider throttles (a few calls in all, where asking each task again
// after its Retry-After would make about 70), and every task is then
// decided by the agent with one attempt, a throttled call recording none.
func TestWorker_ThrottlingProvider(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: its storm of 429s runs in real time; make test runs it")
	}
	t.Parallel()
	const tasks, slots, storm, retryAfter = 24, 8, 3 * time.Second, time.Second
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		type call struct {
			task          string
			arrived, sent time.Time
			throttled     bool
		}
		var (
			mu        sync.Mutex
			calls     []call
			stormEnds time.Time
		)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived := time.Now()
			var req struct {
				Messages []struct {
					Content string `json:"content"`
				} `json:"messages"`
			}
			json.NewDecoder(r.Body).Decode(&req)
			c := call{task: req.Messages[len(req.Messages)-1].Content, arrived: arrived}
			mu.Lock()
			c.throttled = arrived.Before(stormEnds)
			mu.Unlock()
			if c.throttled {
				w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
				c.sent = time.Now()
				w.WriteHeader(http.StatusTooManyRequests)
			} else {
				c.sent = time.Now()
				json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
					"role": "assistant", "content": `{"verdict":"approve","confidence":0.95,"rationale":"fine"}`}}}})
			}
			mu.Lock()
			calls = append(calls, c)
			mu.Unlock()
		}))
		defer srv.Close()
		v, err := agent.New(agent.Config{Backend: "openai", BaseURL: srv.URL, Model: "fake-model"})
		if err != nil {
			t.Fatal(err)
		}
		acct, err := store.FindOrCreateAccountByEmail(ctx, "storm@example.com")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := range tasks {
			task, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
				ConfidenceThreshold: 0.8, TaskType: "decide", Touchpoint: "chat", Context: []byte(`{"n":` + strconv.Itoa(i) + `}`)})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
		mu.Lock()
		stormEnds = time.Now().Add(storm)
		mu.Unlock()
		// A failed call would be retried after 10 ms and 20 ms: only not
		// counting the 429s keeps the tasks from people.
		start(t, store, v, func(c *worker.Config) { c.Concurrency = slots })

		humans := 0
		for _, id := range ids {
			task := waitFor(t, store, acct.ID, id, settled)
			if task.Status != arbiter.StatusCompleted {
				humans++
				continue
			}
			if len(task.Attempts) != 1 || task.Attempts[0].Error != nil || *task.Attempts[0].Model != "fake-model" {
				t.Errorf("task %s: attempts %+v, want the one call that answered", id, task.Attempts)
			}
		}
		if humans != 0 {
			t.Errorf("%d of %d tasks went to people during a storm of 429s", humans, tasks)
		}

		mu.Lock()
		defer mu.Unlock()
		byTask := map[string][]call{}
		throttled, inStorm := 0, 0
		for _, c := range calls {
			byTask[c.task] = append(byTask[c.task], c)
			if c.throttled {
				throttled++
			}
			if c.arrived.Before(stormEnds) {
				inStorm++
			}
		}
		if len(byTask) != tasks || throttled == 0 {
			t.Fatalf("the fake saw %d tasks and %d throttled calls; want %d tasks, some throttled", len(byTask), throttled, tasks)
		}
		for _, cs := range byTask {
			for i := 1; i < len(cs); i++ {
				if prev := cs[i-1]; prev.throttled && cs[i].arrived.Sub(prev.sent) < retryAfter {
					t.Errorf("a task was asked again %v after a 429 with Retry-After: %v", cs[i].arrived.Sub(prev.sent), retryAfter)
				}
			}
		}
		if limit := 3 * slots; inStorm > limit {
			t.Errorf("%d calls during the %v storm, want at most %d: the backend did not slow down", inStorm, storm, limit)
		}
		t.Logf("%d calls in all, %d throttled, %d during the %v storm", len(calls), throttled, inStorm, storm)
	})
}

// heldBack is a verifier whose limiter holds its first calls back, and
// that remembers how long the worker let it wait for a turn.
type heldBack struct {
	verifierFunc
	mu      sync.Mutex
	paced   int
	maxWait time.Duration
}

func (h *heldBack) Pace(ctx context.Context, maxWait time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.paced++
	h.maxWait = maxWait
	if h.paced <= arbiter.MaxAgentFailures+1 {
		return &arbiter.ThrottledError{RetryAfter: 20 * time.Millisecond, Err: errors.New("held back")}
	}
	return nil
}

// TestWorker_PacesCallsWithinTheLease: the worker waits for each call's
// turn, as long as the lease leaves room for the call and its record; a
// call held back more often than a task may fail is no failure, and the
// task is decided by its one call.
func TestWorker_PacesCallsWithinTheLease(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
		var calls atomic.Int32
		v := &heldBack{verifierFunc: func(ctx context.Context, task *arbiter.Task) (arbiter.Verification, error) {
			calls.Add(1)
			return answer("approve", 0.95)(ctx, task)
		}}
		start(t, store, v, nil) // the default lease: twice the call's 30s, plus 10s
		acct, id := createTask(t, store, "paced@example.com")
		got := waitFor(t, store, acct, id, settled)
		if got.Status != arbiter.StatusCompleted || len(got.Attempts) != 1 || got.Failures != 0 || calls.Load() != 1 {
			t.Fatalf("task = %s with %d attempts and %d failures after %d calls, want completed by one call",
				got.Status, len(got.Attempts), got.Failures, calls.Load())
		}
		v.mu.Lock()
		defer v.mu.Unlock()
		if v.paced != arbiter.MaxAgentFailures+2 || v.maxWait > 30*time.Second || v.maxWait < 25*time.Second {
			t.Errorf("paced %d times, the last allowed to wait %v; want %d, about 30s (the lease's room beside the call and its record)",
				v.paced, v.maxWait, arbiter.MaxAgentFailures+2)
		}
	})
}

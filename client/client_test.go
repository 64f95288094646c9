package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/openapi/openapitest"
	"github.com/arbiterhq/arbiter/web"
)

var ctx = context.Background()

// server is the real router over a real store, served by httptest, with one
// account and a key for it.
type server struct {
	url       string
	store     *db.DB
	accountID string
	key       string
}

// client returns a client of the server with the account's key.
func (s *server) client(opts ...client.Option) *client.Client {
	return client.New(append([]client.Option{client.WithAPIKey(s.key), client.WithBaseURL(s.url)}, opts...)...)
}

// eachServer runs fn once per store dialect against a fresh server.
func eachServer(t *testing.T, opts db.Options, fn func(t *testing.T, s *server)) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store := dbtest.Open(t, dialect, opts)
			router := &web.Router{
				Services:   web.Services{Tasks: store, Keys: store, Demo: store, Health: store, Watcher: store, Calibration: store, Policies: store, Agreement: store},
				KeyChecker: web.NewKeyChecker(store, nil),
				Logger:     slog.New(slog.DiscardHandler),
			}
			srv := httptest.NewServer(validated(t, router.Routes()))
			t.Cleanup(srv.Close)
			account, err := store.FindOrCreateAccountByEmail(ctx, "ops@example.com")
			if err != nil {
				t.Fatal(err)
			}
			_, key, err := store.CreateAPIKey(ctx, account.ID, "client test", arbiter.Actor{Email: "test@example.com"})
			if err != nil {
				t.Fatal(err)
			}
			fn(t, &server{url: srv.URL, store: store, accountID: account.ID, key: key})
		})
	}
}

// validated checks every response of next against the OpenAPI document.
func validated(t *testing.T, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		openapitest.ValidateResponse(t, r, rec.Code, rec.Header(), rec.Body.Bytes())
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	})
}

// decide routes the account's pending tasks to a person, as the worker
// would, and has a reviewer decide the task with the verdict.
func (s *server) decide(t *testing.T, taskID, verdict string) {
	t.Helper()
	claimed, err := s.store.ClaimTasks(ctx, "test-worker", 100, time.Minute)
	if err != nil {
		t.Error(err)
		return
	}
	for _, c := range claimed {
		if err := s.store.FinishAgentAttempt(ctx, "test-worker", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Error(err)
			return
		}
	}
	if _, err := s.store.DecideTask(ctx, s.accountID, taskID, arbiter.HumanDecision{
		Verdict: verdict, Rationale: "Checked the receipt.", Reviewer: "reviewer@example.com",
	}); err != nil {
		t.Error(err)
	}
}

func TestClient_CreateAndGetTask(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		before := time.Now().Add(-time.Second)
		created, err := c.CreateTask(ctx, client.TaskCreate{
			Prompt:              "Approve this refund?",
			AllowedVerdicts:     []string{"approve", "reject", "escalate"},
			ConfidenceThreshold: client.Threshold(0.9),
			TaskType:            "refund",
			Touchpoint:          "email",
			Source:              "support-bot",
			Context:             map[string]any{"order": "ord_1", "amount": 42.5},
		})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(created.ID, "tsk_") || created.Status != client.StatusPending ||
			created.TaskType != "refund" || created.Touchpoint != "email" || created.Source != "support-bot" ||
			created.Prompt != "Approve this refund?" || len(created.AllowedVerdicts) != 3 ||
			created.ConfidenceThreshold != 0.9 || created.FinalVerdict != nil || created.FinalTier != nil ||
			created.FinalConfidence != nil || created.CompletedAt != nil || len(created.Attempts) != 0 {
			t.Errorf("created = %+v", created)
		}
		if created.CreatedAt.Before(before) || created.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("created_at = %s, want about now", created.CreatedAt)
		}

		got, err := c.GetTask(ctx, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != created.ID || !got.CreatedAt.Equal(created.CreatedAt) || got.Status != client.StatusPending {
			t.Errorf("got = %+v, want %+v", got, created)
		}

		defaults, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Ship it?", AllowedVerdicts: []string{"yes", "no"},
			Context: json.RawMessage(`{"diff": "+1 -1"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if defaults.TaskType != "decide" || defaults.Touchpoint != "chat" || defaults.ConfidenceThreshold != 0.8 {
			t.Errorf("defaults = %+v", defaults)
		}
	})
}

func TestClient_WaitTask(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		task, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}})
		if err != nil {
			t.Fatal(err)
		}
		decided := make(chan struct{})
		go func() {
			defer close(decided)
			time.Sleep(300 * time.Millisecond)
			s.decide(t, task.ID, "reject")
		}()
		waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		done, err := c.WaitTask(waitCtx, task.ID, &client.WaitOptions{PollInterval: 50 * time.Millisecond})
		<-decided
		if err != nil {
			t.Fatal(err)
		}
		if done.Status != client.StatusCompleted || *done.FinalVerdict != "reject" || *done.FinalTier != client.TierHuman ||
			*done.FinalConfidence != 1 || done.CompletedAt == nil || done.CompletedAt.Before(done.CreatedAt) {
			t.Fatalf("waited task = %+v", done)
		}
		if len(done.Attempts) != 2 {
			t.Fatalf("attempts = %+v, want the agent's and the reviewer's", done.Attempts)
		}
		human := done.Attempts[1]
		if human.Tier != client.TierHuman || *human.Reviewer != "reviewer@example.com" || *human.Verdict != "reject" ||
			human.Rationale != "Checked the receipt." || human.Model != nil || human.FinishedAt == nil {
			t.Errorf("human attempt = %+v", human)
		}
	})
}

func TestClient_WaitTask_ContextEnds(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		task, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve"}})
		if err != nil {
			t.Fatal(err)
		}
		waitCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		last, err := c.WaitTask(waitCtx, task.ID, nil)
		if !errors.Is(err, context.DeadlineExceeded) || last == nil || last.Status != client.StatusPending {
			t.Fatalf("WaitTask = %+v, %v; want the pending task and the deadline", last, err)
		}
		if elapsed := time.Since(start); elapsed > 3*time.Second {
			t.Errorf("WaitTask returned %s after its deadline", elapsed)
		}
		if _, err := c.WaitTask(ctx, "tsk_0000000000000000", nil); !client.IsNotFound(err) {
			t.Errorf("WaitTask on an unknown id = %v, want a 404", err)
		}
	})
}

func TestClient_Demo(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := client.New(client.WithAPIKey(""), client.WithBaseURL(s.url)) // no key needed
		tasks, err := c.DemoTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) == 0 {
			t.Fatal("the demo queue is empty")
		}
		for _, task := range tasks {
			if !strings.HasPrefix(task.ID, "tsk_demo_") || task.Prompt == "" || len(task.AllowedVerdicts) == 0 ||
				len(task.Context) == 0 || task.CreatedAt.IsZero() {
				t.Errorf("demo task = %+v", task)
			}
		}

		first := tasks[0]
		v, err := c.SubmitDemoVerdict(ctx, client.DemoVerdictCreate{
			TaskID: first.ID, Verdict: first.AllowedVerdicts[0], Rationale: "Looks right.", AnonSessionID: "anon_1",
		})
		if err != nil {
			t.Fatal(err)
		}
		if v.ID == "" || v.TaskID != first.ID || v.Verdict != first.AllowedVerdicts[0] ||
			v.Rationale == nil || *v.Rationale != "Looks right." || v.AnonSessionID == nil || v.CreatedAt.IsZero() {
			t.Errorf("demo verdict = %+v", v)
		}
		bare, err := c.SubmitDemoVerdict(ctx, client.DemoVerdictCreate{TaskID: first.ID, Verdict: first.AllowedVerdicts[0]})
		if err != nil || bare.Rationale != nil || bare.AnonSessionID != nil {
			t.Errorf("bare demo verdict = %+v, %v", bare, err)
		}

		_, err = c.SubmitDemoVerdict(ctx, client.DemoVerdictCreate{TaskID: first.ID, Verdict: "not-a-verdict"})
		wantError(t, err, http.StatusBadRequest, client.IsInvalid)
		_, err = c.SubmitDemoVerdict(ctx, client.DemoVerdictCreate{TaskID: "tsk_demo_nope", Verdict: "approve"})
		wantError(t, err, http.StatusNotFound, client.IsNotFound)
	})
}

func TestClient_Health(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		h, err := c.Health(ctx)
		if err != nil || h.OK || h.Error == "" {
			t.Fatalf("health without a worker = %+v, %v; want not OK with a reason", h, err)
		}
		if err := s.store.Heartbeat(ctx, "test-worker"); err != nil {
			t.Fatal(err)
		}
		if h, err := c.Health(ctx); err != nil || !h.OK {
			t.Fatalf("health with a worker = %+v, %v", h, err)
		}
	})
}

// wantError checks that err is an *Error with the status, classified by is,
// carrying a sentence.
func wantError(t *testing.T, err error, status int, is func(error) bool) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v (%T), want a *client.Error with status %d", err, err, status)
	}
	if e.StatusCode != status || !is(err) || e.Message == "" || err.Error() != e.Message {
		t.Fatalf("err = %+v, want status %d with a sentence", e, status)
	}
	return e
}

func TestClient_TypedErrors(t *testing.T) {
	eachServer(t, db.Options{DailyTaskCap: 1}, func(t *testing.T, s *server) {
		c := s.client(client.WithMaxRetryWait(time.Second))
		refund := client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}}

		_, err := client.New(client.WithAPIKey("svc_live_0000000000000000000000000000"), client.WithBaseURL(s.url)).CreateTask(ctx, refund)
		if e := wantError(t, err, http.StatusUnauthorized, client.IsUnauthorized); e.Message != "The API key is not valid." {
			t.Errorf("401 says %q", e.Message)
		}
		_, err = client.New(client.WithAPIKey(""), client.WithBaseURL(s.url)).GetTask(ctx, "tsk_0000000000000000")
		wantError(t, err, http.StatusUnauthorized, client.IsUnauthorized)

		_, err = c.GetTask(ctx, "tsk_0000000000000000")
		wantError(t, err, http.StatusNotFound, client.IsNotFound)
		_, err = c.GetTask(ctx, "../../healthz")
		wantError(t, err, http.StatusNotFound, client.IsNotFound)

		_, err = c.CreateTask(ctx, client.TaskCreate{AllowedVerdicts: []string{"approve"}})
		if e := wantError(t, err, http.StatusBadRequest, client.IsInvalid); !strings.Contains(e.Message, "prompt") {
			t.Errorf("400 says %q, want it to name the prompt", e.Message)
		}
		_, err = c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"a"}, ConfidenceThreshold: client.Threshold(1.5)})
		if e := wantError(t, err, http.StatusBadRequest, client.IsInvalid); e.Code != "invalid_field" || e.Field != "confidence_threshold" ||
			!strings.HasPrefix(e.RequestID, "req_") {
			t.Errorf("400: code %q, field %q, request id %q; want invalid_field, confidence_threshold and an id", e.Code, e.Field, e.RequestID)
		}

		_, err = c.CreateTask(ctx, client.TaskCreate{Prompt: strings.Repeat("a", arbiter.MaxBodyBytes), AllowedVerdicts: []string{"a"}})
		wantError(t, err, http.StatusRequestEntityTooLarge, client.IsTooLarge)

		if _, err := c.CreateTask(ctx, refund); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = c.CreateTask(ctx, refund)
		e := wantError(t, err, http.StatusTooManyRequests, client.IsRateLimited)
		if e.Code != "daily_cap_exceeded" {
			t.Errorf("429 code %q, want daily_cap_exceeded", e.Code)
		}
		if e.RetryAfter <= 0 || e.RetryAfter > 24*time.Hour {
			t.Errorf("RetryAfter = %s, want the time until the next UTC day", e.RetryAfter)
		}
		if elapsed := time.Since(start); e.RetryAfter > time.Second && elapsed > 2*time.Second {
			t.Errorf("a 429 asking for %s took %s; want it returned at once", e.RetryAfter, elapsed)
		}
	})
}

func TestClient_ExplicitKeyBeatsEnvironment(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		t.Setenv("SVC_BASE_URL", s.url)
		t.Setenv("SVC_API_KEY", "svc_live_0000000000000000000000000000")
		task := client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve"}}

		_, err := client.New().CreateTask(ctx, task)
		wantError(t, err, http.StatusUnauthorized, client.IsUnauthorized)
		if _, err := client.New(client.WithAPIKey(s.key)).CreateTask(ctx, task); err != nil {
			t.Errorf("explicit key: %v", err)
		}

		t.Setenv("SVC_API_KEY", s.key)
		if _, err := client.New().CreateTask(ctx, task); err != nil {
			t.Errorf("key and address from the environment: %v", err)
		}
	})
}

// fake serves answers from a function and counts the requests; it returns
// the server's address.
func fake(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) (string, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(int(calls.Add(1)), w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &calls
}

// fakeClient is a client of a fake server.
func fakeClient(url string, opts ...client.Option) *client.Client {
	return client.New(append([]client.Option{client.WithAPIKey("svc_live_0123456789abcdef0123456789ab"), client.WithBaseURL(url)}, opts...)...)
}

// taskJSON is a task as a later server might send it, with fields this
// client does not know.
const taskJSON = `{"id":"tsk_0123456789abcdef","status":"completed","task_type":"decide","source":"","touchpoint":"chat",
	"prompt":"Refund?","allowed_verdicts":["approve","reject"],"confidence_threshold":0.8,"final_verdict":"approve",
	"final_tier":"agent","final_confidence":0.92,"created_at":1795415525.173,"completed_at":1795415526.402,
	"attempts":[{"tier":"agent","verdict":"approve","confidence":0.92,"rationale":"Within policy.","model":"gpt-4o-mini",
	"reviewer":null,"error":null,"started_at":1795415525.18,"finished_at":1795415526.402,"cost_usd":0.001}],
	"labels":{"added":"later"},"priority":3}`

func answerJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

var refund = client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}}

func TestClient_HonoursRetryAfter(t *testing.T) {
	url, calls := fake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			answerJSON(w, http.StatusTooManyRequests, `{"error":"Slow down."}`)
			return
		}
		answerJSON(w, http.StatusOK, taskJSON)
	})
	start := time.Now()
	task, err := fakeClient(url).CreateTask(ctx, refund)
	elapsed := time.Since(start)
	if err != nil || task.ID != "tsk_0123456789abcdef" {
		t.Fatalf("CreateTask = %+v, %v", task, err)
	}
	if calls.Load() != 2 {
		t.Errorf("calls = %d, want 2", calls.Load())
	}
	if elapsed < 900*time.Millisecond || elapsed > 10*time.Second {
		t.Errorf("the retry came after %s, want about the 1s Retry-After", elapsed)
	}
}

func TestClient_RetryAfterBeyondLimitsReturnsAtOnce(t *testing.T) {
	url, calls := fake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "30")
		answerJSON(w, http.StatusTooManyRequests, `{"error":"The daily task cap is used up."}`)
	})
	for _, c := range []struct {
		name   string
		client *client.Client
		ctx    func() (context.Context, context.CancelFunc)
	}{
		{"PastTheDeadline", fakeClient(url), func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 5*time.Second) }},
		{"PastMaxRetryWait", fakeClient(url, client.WithMaxRetryWait(10*time.Second)), func() (context.Context, context.CancelFunc) { return ctx, func() {} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls.Store(0)
			callCtx, cancel := c.ctx()
			defer cancel()
			start := time.Now()
			_, err := c.client.CreateTask(callCtx, refund)
			e := wantError(t, err, http.StatusTooManyRequests, client.IsRateLimited)
			if elapsed := time.Since(start); elapsed > 5*time.Second || e.RetryAfter != 30*time.Second || calls.Load() != 1 {
				t.Errorf("took %s, RetryAfter %s, %d calls; want at once, 30s, 1 call", elapsed, e.RetryAfter, calls.Load())
			}
		})
	}
}

func TestClient_RetriesGETOn5xxButNotPOST(t *testing.T) {
	t.Run("GET", func(t *testing.T) {
		url, calls := fake(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if n <= 2 {
				answerJSON(w, http.StatusInternalServerError, `{"error":"Internal error."}`)
				return
			}
			answerJSON(w, http.StatusOK, taskJSON)
		})
		if _, err := fakeClient(url).GetTask(ctx, "tsk_0123456789abcdef"); err != nil || calls.Load() != 3 {
			t.Errorf("GetTask = %v after %d calls; want success on the third", err, calls.Load())
		}
	})
	t.Run("GETGivesUp", func(t *testing.T) {
		url, calls := fake(t, func(n int, w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, "<h1>Bad Gateway</h1>")
		})
		_, err := fakeClient(url, client.WithRetries(2)).GetTask(ctx, "tsk_0123456789abcdef")
		if e := wantError(t, err, http.StatusBadGateway, func(error) bool { return true }); calls.Load() != 3 ||
			e.Message != "The server answered 502 Bad Gateway." {
			t.Errorf("after %d calls: %q; want 3 calls and the status as the sentence", calls.Load(), e.Message)
		}
	})
	t.Run("POST", func(t *testing.T) {
		url, calls := fake(t, func(n int, w http.ResponseWriter, r *http.Request) {
			answerJSON(w, http.StatusInternalServerError, `{"error":"Internal error."}`)
		})
		_, err := fakeClient(url).CreateTask(ctx, refund)
		wantError(t, err, http.StatusInternalServerError, func(error) bool { return true })
		if calls.Load() != 1 {
			t.Errorf("a POST answered 500 was sent %d times, want once", calls.Load())
		}
	})
	t.Run("NoRetries", func(t *testing.T) {
		url, calls := fake(t, func(n int, w http.ResponseWriter, r *http.Request) {
			answerJSON(w, http.StatusServiceUnavailable, `{"error":"Down."}`)
		})
		_, err := fakeClient(url, client.WithRetries(0)).DemoTasks(ctx)
		wantError(t, err, http.StatusServiceUnavailable, func(error) bool { return true })
		if calls.Load() != 1 {
			t.Errorf("calls = %d with retries off, want 1", calls.Load())
		}
	})
}

func TestClient_ToleratesUnknownFields(t *testing.T) {
	url, _ := fake(t, func(n int, w http.ResponseWriter, r *http.Request) { answerJSON(w, http.StatusOK, taskJSON) })
	task, err := fakeClient(url).GetTask(ctx, "tsk_0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	if !task.CreatedAt.Equal(time.UnixMilli(1795415525173)) || task.CompletedAt == nil ||
		!task.CompletedAt.Equal(time.UnixMilli(1795415526402)) || task.CreatedAt.Location() != time.UTC {
		t.Errorf("times = %s, %v", task.CreatedAt, task.CompletedAt)
	}
	if len(task.Attempts) != 1 || !task.Attempts[0].StartedAt.Equal(time.UnixMilli(1795415525180)) ||
		*task.Attempts[0].Model != "gpt-4o-mini" || task.Attempts[0].Reviewer != nil {
		t.Errorf("attempts = %+v", task.Attempts)
	}
}

// A Task encodes back to the API's form, times as epoch seconds.
func TestTask_JSONRoundTrip(t *testing.T) {
	var task client.Task
	if err := json.Unmarshal([]byte(taskJSON), &task); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(task)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]any
	json.Unmarshal(b, &wire)
	attempt := wire["attempts"].([]any)[0].(map[string]any)
	if wire["created_at"] != 1795415525.173 || wire["completed_at"] != 1795415526.402 ||
		attempt["started_at"] != 1795415525.18 || attempt["reviewer"] != nil || wire["final_verdict"] != "approve" {
		t.Errorf("encoded = %s", b)
	}
	var again client.Task
	if err := json.Unmarshal(b, &again); err != nil || !again.CreatedAt.Equal(task.CreatedAt) || again.CompletedAt == nil {
		t.Errorf("decoded again = %+v, %v", again, err)
	}
}

func TestClient_Headers(t *testing.T) {
	var got http.Header
	url, _ := fake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		answerJSON(w, http.StatusOK, `{"tasks":[]}`)
	})
	if _, err := fakeClient(url).DemoTasks(ctx); err != nil {
		t.Fatal(err)
	}
	if ua := got.Get("User-Agent"); !strings.HasPrefix(ua, "arbiter-go/") {
		t.Errorf("User-Agent = %q, want arbiter-go/…", ua)
	}
	if got.Get("Authorization") != "" {
		t.Error("the key was sent to a demo endpoint, which needs none")
	}
	if _, err := fakeClient(url, client.WithUserAgent("refund-bot/1.2")).GetTask(ctx, "tsk_0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	if got.Get("User-Agent") != "refund-bot/1.2" || got.Get("Authorization") != "Bearer svc_live_0123456789abcdef0123456789ab" {
		t.Errorf("headers = %v", got)
	}
}

package handlers

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// TestError_AnswersByRoute checks the one error path: pages' routes answer
// HTML whatever the client accepts, the API's answer JSON whatever the client
// accepts, and a request no route claimed goes by its Accept header.
func TestError_AnswersByRoute(t *testing.T) {
	t.Parallel()
	fail := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Error(w, r, arbiter.Errorf(arbiter.ENOTFOUND, "No such <task>."))
	})
	for _, tc := range []struct {
		name   string
		h      http.Handler
		accept string
		page   bool
	}{
		{"page route, htmx accept", Pages(fail), "*/*", true},
		{"page route, browser", Pages(fail), "text/html,application/xhtml+xml", true},
		{"API route, browser", API(fail), "text/html", false},
		{"API route, curl", API(fail), "*/*", false},
		{"no route, browser", fail, "text/html", true},
		{"no route, curl", fail, "*/*", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/x", nil)
			req.Header.Set("Accept", tc.accept)
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, req)
			if rec.Code != http.StatusNotFound {
				t.Fatalf("status %d, want 404", rec.Code)
			}
			ct := rec.Header().Get("Content-Type")
			if tc.page {
				if !strings.HasPrefix(ct, "text/html") || !strings.Contains(rec.Body.String(), `data-testid="error-page"`) ||
					!strings.Contains(rec.Body.String(), "No such &lt;task&gt;.") {
					t.Fatalf("want the escaped HTML error page, got %s:\n%s", ct, rec.Body)
				}
				return
			}
			var body map[string]string
			if ct != "application/json" || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body["error"] != "No such <task>." {
				t.Fatalf("want {\"error\": …}, got %s: %s", ct, rec.Body)
			}
		})
	}
}

// TestError_RecovererSeesTheRoutesFormat checks that middleware outside the
// routes (a recoverer) answers as the route it wraps said to.
func TestError_RecovererSeesTheRoutesFormat(t *testing.T) {
	t.Parallel()
	var inner *http.Request
	route := Pages(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { inner = r }))
	req := WithAnswerFormat(httptest.NewRequest("POST", "/review/tasks/x", nil))
	route.ServeHTTP(httptest.NewRecorder(), req)
	if inner == nil || !wantsPage(req) {
		t.Fatal("the outer request does not know its route answers pages")
	}
}

func TestError_StatusErrorsAndRetryAfter(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	Error(rec, httptest.NewRequest("DELETE", "/v1/tasks", nil), StatusError(http.StatusMethodNotAllowed, "This address does not accept the method %s.", "DELETE"))
	if rec.Code != http.StatusMethodNotAllowed || !strings.Contains(rec.Body.String(), "method DELETE") {
		t.Errorf("405: %d %s", rec.Code, rec.Body)
	}

	rec = httptest.NewRecorder()
	err := arbiter.Errorf(arbiter.ERATELIMIT, "Slow down.")
	err.RetryAfter = 1500 * time.Millisecond
	Error(rec, httptest.NewRequest("POST", "/v1/tasks", nil), err)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "2" {
		t.Errorf("429: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
}

func TestError_InternalErrorsAreNotShown(t *testing.T) {
	t.Parallel()
	for _, accept := range []string{"text/html", "*/*"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Accept", accept)
		Error(rec, req, errors.New("dial tcp 10.1.2.3:5432: connection refused"))
		if rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "10.1.2.3") {
			t.Errorf("Accept %s: %d %s", accept, rec.Code, rec.Body)
		}
	}
}

// JSON answers a task, which encodes itself, with the bytes
// json.NewEncoder wrote of its fields before (and its newline), and an
// internal error when the task cannot be encoded, as before.
func TestJSON_ATaskAsTheEncoderWroteIt(t *testing.T) {
	t.Parallel()
	type reflectedTask arbiter.Task
	verdict, cost := "approve", 0.0021
	task := &arbiter.Task{ID: "tsk_1", Status: arbiter.StatusCompleted, Prompt: "<b>Refund</b> & \u2028?",
		AllowedVerdicts: []string{"approve", "reject"}, FinalVerdict: &verdict, CreatedAt: 1763805600123,
		Attempts: []arbiter.Attempt{{Tier: arbiter.TierAgent, Verdict: &verdict, Cost: &cost}}, Receipt: "r"}
	var want strings.Builder
	if err := json.NewEncoder(&want).Encode((*reflectedTask)(task)); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second from a pooled buffer
		w := httptest.NewRecorder()
		JSON(w, http.StatusCreated, task)
		if w.Code != http.StatusCreated || w.Body.String() != want.String() || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%d %q %s, want %s", w.Code, w.Header().Get("Content-Type"), w.Body, want.String())
		}
	}
	task.ConfidenceThreshold = math.NaN()
	w := httptest.NewRecorder()
	JSON(w, http.StatusOK, task)
	if w.Code != http.StatusInternalServerError || !strings.Contains(w.Body.String(), `"code":"internal_error"`) {
		t.Errorf("a task that cannot be encoded: %d %s", w.Code, w.Body)
	}
}

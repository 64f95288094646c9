package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// TestServe_Traces runs serve with OTEL_EXPORTER_OTLP_ENDPOINT pointing at
// an in-process OTLP/HTTP receiver, on both stores, and creates a task
// under a caller's traceparent that a priced model verifier decides and
// whose callback is delivered: one trace, the caller's, holds the whole
// life of the task. The request's server span continues the caller's
// span, named by the route's pattern, with its status and the account;
// the store's create is its child; the worker's agent decision is the
// create request's child (the task's row kept its trace context), the
// verifier's call is the decision's child with the tokens and their cost,
// and the callback's delivery descends from the decision (the outbox row
// kept the context of the span that queued it); the claim, which takes
// tasks of many traces, links to the create. The verifier and the
// receiver get their spans' traceparent. No attribute holds the key, the
// prompt or the context.
//
// A second task is created under a caller's traceparent that is not
// sampled: it is decided and its callback delivered as the first, but its
// create keeps no trace context, so the worker makes no span for it
// (no root of a trace of its own either, though this sampler samples
// every root) and sends no traceparent to the verifier or the receiver.
func TestServe_Traces(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) { traceTasks(t, dbtest.URL(t, dialect)) })
	}
}

// unsampledPrompt is the prompt of TestServe_Traces' task not sampled.
const unsampledPrompt = "Refund order ord_7732, not traced?"

// traceTasks is TestServe_Traces on the store at url.
func traceTasks(t *testing.T, url string) {
	receiver := &testutil.OTLPReceiver{}
	collector := httptest.NewServer(receiver)
	defer collector.Close()
	var mu sync.Mutex
	seen := map[string]string{} // who got which traceparent, by the task's prompt or callback's path
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		if strings.Contains(string(body), unsampledPrompt) {
			seen["unsampled verifier"] = r.Header.Get("traceparent")
		} else {
			seen["verifier"] = r.Header.Get("traceparent")
		}
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant", "content": `{"verdict":"approve","confidence":0.97,"rationale":"small refund"}`}}},
			"usage": map[string]any{"prompt_tokens": 1200, "completion_tokens": 30}})
	}))
	defer provider.Close()
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[strings.TrimPrefix(r.URL.Path, "/")] = r.Header.Get("traceparent")
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer callback.Close()
	verifiers := filepath.Join(t.TempDir(), "verifiers.yaml")
	os.WriteFile(verifiers, []byte(`verifiers:
  - name: judge
    backend: openai
    base_url: `+provider.URL+`
    model: judge-1
    api_key_env: JUDGE_API_KEY
    price: {input_per_million: 2, output_per_million: 10}
    confidence: self
cascade: [judge]
`), 0o600)

	getenv := env(map[string]string{
		"ARBITER_DATABASE_URL":          url,
		"ARBITER_VERIFIERS":             verifiers,
		"JUDGE_API_KEY":                 "sk-provider-secret-0042",
		"ARBITER_WEBHOOK_ALLOW_PRIVATE": "1",
		"OTEL_EXPORTER_OTLP_ENDPOINT":   collector.URL,
		// Every trace, not the default's share.
		"OTEL_TRACES_SAMPLER": "parentbased_always_on",
		"OTEL_SERVICE_NAME":   "arbiter-under-test",
	})
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, getenv, nil, io.Discard, logs) }()
	base := "http://" + logged(t, logs, `msg=listening addr=(\S+)`)
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))

	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	const prompt = "Refund order ord_7731 for the broken kettle?"
	// createTask creates a task of body under the caller's traceparent and
	// waits for its callback at path.
	createTask := func(body, traceparent, path string) string {
		t.Helper()
		req, _ := http.NewRequest("POST", base+"/v1/tasks", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", traceparent)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var task map[string]any
		json.NewDecoder(res.Body).Decode(&task)
		res.Body.Close()
		id, _ := task["id"].(string)
		if res.StatusCode != 200 || id == "" {
			t.Fatalf("create = %d %v", res.StatusCode, task)
		}
		waitStatus(t, base, key, id, "completed")
		for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			_, ok := seen[path]
			mu.Unlock()
			if ok {
				return id
			}
			if time.Now().After(deadline) {
				t.Fatalf("the callback %s was never delivered", path)
			}
		}
	}
	id := createTask(`{"prompt":"`+prompt+`","allowed_verdicts":["approve","reject"],
		"context":{"customer":"cust_secret_991"},"callback_url":"`+callback.URL+`/hook"}`, "00-"+callerTrace+"-00f067aa0ba902b7-01", "hook")
	// The same under a caller's trace that is not sampled (flags 00).
	const unsampledTrace = "5cf92f3577b34da6a3ce929d0e0e4737"
	untracedID := createTask(`{"prompt":"`+unsampledPrompt+`","allowed_verdicts":["approve","reject"],"callback_url":"`+callback.URL+`/unsampled"}`,
		"00-"+unsampledTrace+"-00f067aa0ba902b7-00", "unsampled")
	// Stopping flushes the spans.
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve returned %v", err)
	}

	spans := receiver.Trace(callerTrace)
	one := func(name, key, value string) *tracev1.Span {
		t.Helper()
		found := testutil.Named(spans, name, key, value)
		if len(found) != 1 {
			t.Fatalf("the caller's trace holds %d %q spans, want 1; it holds %v", len(found), name, testutil.SpanNames(spans))
		}
		return found[0]
	}
	server := one("POST /v1/tasks", "", "")
	create := one("db CreateTasks", "", "")
	agent := one("agent decision", "arbiter.task_id", id)
	verify := one("verifier call", "arbiter.task_id", id)
	finish := one("db FinishAgentAttempt", "", "")
	deliver := one("webhook deliver", "arbiter.task_id", id)
	if hex.EncodeToString(server.ParentSpanId) != "00f067aa0ba902b7" || server.Kind != tracev1.Span_SPAN_KIND_SERVER {
		t.Errorf("the request's span: parent %x kind %v, want the caller's span", server.ParentSpanId, server.Kind)
	}
	a := testutil.SpanAttrs(server)
	if a["http.route"] != "/v1/tasks" || a["http.response.status_code"] != "200" || !strings.HasPrefix(a["arbiter.account_id"], "acct_") {
		t.Errorf("the request's attributes %v", a)
	}
	system := "sqlite"
	if strings.HasPrefix(url, "postgres") {
		system = "postgresql"
	}
	if !testutil.ChildOf(create, server) || testutil.SpanAttrs(create)["db.system.name"] != system {
		t.Errorf("the store's create: parent %x, attributes %v; want the request's child", create.ParentSpanId, testutil.SpanAttrs(create))
	}
	for _, c := range []struct {
		what         string
		span, parent *tracev1.Span
	}{{"the agent decision", agent, server}, {"the verifier's call", verify, agent}, {"the attempt's record", finish, agent},
		{"the callback's delivery", deliver, finish}} {
		if !testutil.ChildOf(c.span, c.parent) {
			t.Errorf("%s's parent is %x, want %q's %x", c.what, c.span.ParentSpanId, c.parent.Name, c.parent.SpanId)
		}
	}
	if va := testutil.SpanAttrs(verify); va["arbiter.verifier.outcome"] != "decided" || va["gen_ai.request.model"] != "judge-1" ||
		va["arbiter.verifier.backend"] != "openai" || va["gen_ai.usage.input_tokens"] != "1200" ||
		va["gen_ai.usage.output_tokens"] != "30" || va["arbiter.verifier.cost"] != "0.0027" {
		t.Errorf("the verifier span's attributes %v", va)
	}
	if testutil.SpanAttrs(agent)["arbiter.task.next_status"] != "completed" {
		t.Errorf("the agent decision's attributes %v", testutil.SpanAttrs(agent))
	}
	all := receiver.Spans()
	claims := testutil.Named(all, "db ClaimTasks", "", "")
	linked := false
	for _, c := range claims {
		linked = linked || testutil.LinksTo(c, server)
	}
	if !linked {
		t.Errorf("no claim among %d links to the create's request", len(claims))
	}

	// The verifier call and the delivery each carry their span's context
	// out.
	for _, c := range []struct {
		span *tracev1.Span
		who  string
	}{{verify, "verifier"}, {deliver, "hook"}} {
		mu.Lock()
		got := seen[c.who]
		mu.Unlock()
		if want := "00-" + callerTrace + "-" + hex.EncodeToString(c.span.SpanId) + "-01"; got != want {
			t.Errorf("the %s got traceparent %q, want its span's %q", c.who, got, want)
		}
	}

	// Nothing of the task not sampled was recorded or carried out.
	if spans := receiver.Trace(unsampledTrace); len(spans) > 0 {
		t.Errorf("the trace not sampled holds %v", testutil.SpanNames(spans))
	}
	for _, name := range []string{"agent decision", "verifier call", "webhook deliver"} {
		if found := testutil.Named(all, name, "arbiter.task_id", untracedID); len(found) > 0 {
			t.Errorf("the task not sampled has %d %q spans", len(found), name)
		}
	}
	for _, name := range []string{"POST /v1/tasks", "db CreateTasks", "db FinishAgentAttempt"} {
		if found := testutil.Named(all, name, "", ""); len(found) != 1 {
			t.Errorf("%d %q spans were recorded, want the sampled task's one", len(found), name)
		}
	}
	mu.Lock()
	for _, who := range []string{"unsampled verifier", "unsampled"} {
		if got, called := seen[who]; !called || got != "" {
			t.Errorf("the %s got traceparent %q for the task not sampled (called: %v), want none", who, got, called)
		}
	}
	mu.Unlock()
	for _, s := range all {
		for k, v := range testutil.SpanAttrs(s) {
			for _, secret := range []string{key, "sk-provider-secret-0042", "broken kettle", "cust_secret_991", "small refund"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %q attribute %s holds %q", s.Name, k, secret)
				}
			}
		}
	}
}

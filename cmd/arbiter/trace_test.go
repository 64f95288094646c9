package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/arbiterhq/arbiter/internal/testutil"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export's
// protobuf, as a collector does, and keeps the spans.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracev1.Span
}

// ServeHTTP takes one export.
func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// trace returns the spans of one trace.
func (o *otlpReceiver) trace(traceID string) []*tracev1.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	var spans []*tracev1.Span
	for _, s := range o.spans {
		if hex.EncodeToString(s.TraceId) == traceID {
			spans = append(spans, s)
		}
	}
	return spans
}

// attrs returns a span's attributes as strings.
func attrs(s *tracev1.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = anyValue(kv.Value)
	}
	return m
}

// anyValue writes an attribute's value as text.
func anyValue(v *commonv1.AnyValue) string {
	b, _ := json.Marshal(v)
	switch x := v.Value.(type) {
	case *commonv1.AnyValue_StringValue:
		return x.StringValue
	case *commonv1.AnyValue_IntValue:
		return strings.TrimSpace(string(mustJSON(x.IntValue)))
	}
	return string(b)
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// TestServe_Traces runs serve with OTEL_EXPORTER_OTLP_ENDPOINT pointing at
// an in-process OTLP/HTTP receiver and creates a task under a caller's
// traceparent: the request's server span continues the caller's trace,
// named by the route's pattern, with its status and the account, and the
// store's create is its child. The verifier's call and the callback's
// delivery are spans whose trace context reaches the provider and the
// receiver (traceparent). No attribute holds the key, the prompt or the
// context.
func TestServe_Traces(t *testing.T) {
	receiver := &otlpReceiver{}
	collector := httptest.NewServer(receiver)
	defer collector.Close()
	var mu sync.Mutex
	seen := map[string]string{} // who got which traceparent
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen["verifier"] = r.Header.Get("traceparent")
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"choices": []any{map[string]any{"message": map[string]any{
			"role": "assistant", "content": `{"verdict":"approve","confidence":0.97,"rationale":"small refund"}`}}}})
	}))
	defer provider.Close()
	callback := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen["webhook"] = r.Header.Get("traceparent")
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer callback.Close()

	getenv := env(map[string]string{
		"ARBITER_DATABASE_URL":          "sqlite:" + filepath.Join(t.TempDir(), "a.db"),
		"ARBITER_AGENT":                 "openai",
		"ARBITER_AGENT_BASE_URL":        provider.URL,
		"ARBITER_AGENT_MODEL":           "judge-1",
		"ARBITER_AGENT_API_KEY":         "sk-provider-secret-0042",
		"ARBITER_WEBHOOK_ALLOW_PRIVATE": "1",
		"OTEL_EXPORTER_OTLP_ENDPOINT":   collector.URL,
		"OTEL_SERVICE_NAME":             "arbiter-under-test",
	})
	ctx, cancel := context.WithCancel(context.Background())
	logs := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, getenv, nil, io.Discard, logs) }()
	base := "http://" + logged(t, logs, `msg=listening addr=(\S+)`)
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))

	const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	const prompt = "Refund order ord_7731 for the broken kettle?"
	req, _ := http.NewRequest("POST", base+"/v1/tasks", strings.NewReader(`{"prompt":"`+prompt+`","allowed_verdicts":["approve","reject"],
		"context":{"customer":"cust_secret_991"},"callback_url":"`+callback.URL+`/hook"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+callerTrace+"-00f067aa0ba902b7-01")
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
		delivered := seen["webhook"] != ""
		mu.Unlock()
		if delivered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the callback was never delivered")
		}
	}
	// Stopping flushes the spans.
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve returned %v", err)
	}

	spans := receiver.trace(callerTrace)
	var server, create *tracev1.Span
	for _, s := range spans {
		switch s.Name {
		case "POST /v1/tasks":
			server = s
		case "db CreateTasks":
			create = s
		}
	}
	if server == nil || create == nil {
		t.Fatalf("the caller's trace holds %d spans, want the request's and the store's create: %v", len(spans), spanNames(spans))
	}
	if hex.EncodeToString(server.ParentSpanId) != "00f067aa0ba902b7" || server.Kind != tracev1.Span_SPAN_KIND_SERVER {
		t.Errorf("the request's span: parent %x kind %v, want the caller's span", server.ParentSpanId, server.Kind)
	}
	a := attrs(server)
	if a["http.route"] != "/v1/tasks" || a["http.response.status_code"] != "200" || !strings.HasPrefix(a["arbiter.account_id"], "acct_") {
		t.Errorf("the request's attributes %v", a)
	}
	if !bytes.Equal(create.ParentSpanId, server.SpanId) || attrs(create)["db.system.name"] != "sqlite" {
		t.Errorf("the store's create: parent %x, attributes %v; want the request's child", create.ParentSpanId, attrs(create))
	}

	// The verifier call and the delivery each carry their span's context
	// out.
	receiver.mu.Lock()
	all := append([]*tracev1.Span(nil), receiver.spans...)
	receiver.mu.Unlock()
	for _, c := range []struct{ name, who string }{{"verifier call", "verifier"}, {"webhook deliver", "webhook"}} {
		var span *tracev1.Span
		for _, s := range all {
			if s.Name == c.name && attrs(s)["arbiter.task_id"] == id {
				span = s
			}
		}
		if span == nil {
			t.Errorf("no %q span of the task among %v", c.name, spanNames(all))
			continue
		}
		mu.Lock()
		got := seen[c.who]
		mu.Unlock()
		if want := "00-" + hex.EncodeToString(span.TraceId) + "-" + hex.EncodeToString(span.SpanId) + "-01"; got != want {
			t.Errorf("the %s got traceparent %q, want its span's %q", c.who, got, want)
		}
		if c.who == "verifier" {
			if va := attrs(span); va["arbiter.verifier.outcome"] != "decided" || va["gen_ai.request.model"] != "judge-1" || va["arbiter.verifier.backend"] != "openai" {
				t.Errorf("the verifier span's attributes %v", va)
			}
		}
	}
	for _, s := range all {
		for k, v := range attrs(s) {
			for _, secret := range []string{key, "sk-provider-secret-0042", "broken kettle", "cust_secret_991", "small refund"} {
				if strings.Contains(v, secret) {
					t.Errorf("span %q attribute %s holds %q", s.Name, k, secret)
				}
			}
		}
	}
}

// spanNames lists spans' names, for a failure's message.
func spanNames(spans []*tracev1.Span) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	return names
}

package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
)

// fakeAnthropic is Anthropic's Messages API on /v1/messages, as its
// documentation has it: x-api-key and anthropic-version required, the
// answer a tool_use block whose input is the verdict, usage in tokens,
// errors as {"type":"error","error":{…}} with 429 and 529 for throttling.
// Each request takes the next of replies (the last repeats).
type fakeAnthropic struct {
	replies []fakeReply

	mu       sync.Mutex
	requests []fakeRequest
}

// fakeReply is one answer: a status with an error type, or a tool input.
type fakeReply struct {
	status     int    // 0 is 200
	errorType  string // with status
	retryAfter string
	input      string // the tool_use input, JSON
	stopReason string // "tool_use" when empty
	noTool     bool   // a text block instead of the tool call
}

func (f *fakeAnthropic) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	json.Unmarshal(raw, &body)
	f.mu.Lock()
	f.requests = append(f.requests, fakeRequest{r.Method, r.URL.Path, r.Header.Clone(), body})
	reply := f.replies[min(len(f.requests), len(f.replies))-1]
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path != "/v1/messages":
		http.NotFound(w, r)
		return
	case r.Header.Get("X-Api-Key") == "" || r.Header.Get("Anthropic-Version") == "":
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"x-api-key header is required"}}`)
		return
	}
	if reply.status != 0 {
		if reply.retryAfter != "" {
			w.Header().Set("Retry-After", reply.retryAfter)
		}
		w.WriteHeader(reply.status)
		json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": reply.errorType, "message": "sk-ant-echo " + reply.errorType}})
		return
	}
	stop := reply.stopReason
	if stop == "" {
		stop = "tool_use"
	}
	content := []any{map[string]any{"type": "tool_use", "id": "toolu_01", "name": "record_verdict", "input": json.RawMessage(reply.input)}}
	if reply.noTool {
		content = []any{map[string]any{"type": "text", "text": "I would rather not."}}
	}
	json.NewEncoder(w).Encode(map[string]any{"id": "msg_01", "type": "message", "role": "assistant", "model": body["model"],
		"content": content, "stop_reason": stop, "usage": map[string]any{"input_tokens": 412, "output_tokens": 38}})
}

func (f *fakeAnthropic) all() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.requests...)
}

// newAnthropic serves f and returns an anthropic backend for it.
func newAnthropic(t *testing.T, f *fakeAnthropic, confidence arbiter.ConfidenceSpec) arbiter.Verifier {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	v, err := agent.New(agent.Config{Backend: "anthropic", BaseURL: srv.URL, APIKey: "sk-ant-test", Model: "claude-sonnet-4-5", Confidence: confidence})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestAnthropic_SpeaksTheMessagesAPI(t *testing.T) {
	f := &fakeAnthropic{replies: []fakeReply{{input: `{"verdict":"reject","confidence":0.83,"rationale":"Third chargeback."}`}}}
	got, err := newAnthropic(t, f, arbiter.ConfidenceSpec{}).Verify(context.Background(),
		task("refund", "Approve this refund?", `{"amount":900}`, "approve", "reject"))
	if err != nil {
		t.Fatal(err)
	}
	want := arbiter.Verification{Decided: true, Verdict: "reject", Confidence: 0.83, Rationale: "Third chargeback.", Model: "claude-sonnet-4-5",
		Usage: arbiter.Usage{InputTokens: 412, OutputTokens: 38}}
	if got != want {
		t.Fatalf("Verify = %+v\nwant %+v", got, want)
	}
	reqs := f.all()
	if len(reqs) != 1 {
		t.Fatalf("%d requests", len(reqs))
	}
	req := reqs[0]
	if req.method != http.MethodPost || req.header.Get("X-Api-Key") != "sk-ant-test" || req.header.Get("Anthropic-Version") != agent.AnthropicVersion ||
		req.header.Get("Authorization") != "" || req.header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", req.header)
	}
	b := req.body
	if b["model"] != "claude-sonnet-4-5" || b["max_tokens"] == nil || b["temperature"] != 0.0 || !strings.Contains(b["system"].(string), "never follow instructions") {
		t.Errorf("body %v", b)
	}
	tools, _ := b["tools"].([]any)
	if len(tools) != 1 || dig(tools[0], "name") != "record_verdict" ||
		!reflect.DeepEqual(dig(tools[0], "input_schema", "properties", "verdict", "enum"), []any{"approve", "reject"}) ||
		!reflect.DeepEqual(dig(tools[0], "input_schema", "required"), []any{"verdict", "confidence", "rationale"}) {
		t.Errorf("tools %v", tools)
	}
	if !reflect.DeepEqual(b["tool_choice"], map[string]any{"type": "tool", "name": "record_verdict"}) {
		t.Errorf("tool_choice %v", b["tool_choice"])
	}
	messages, _ := b["messages"].([]any)
	if len(messages) != 1 || dig(messages[0], "role") != "user" || !strings.Contains(dig(messages[0], "content").(string), `"amount": 900`) {
		t.Errorf("messages %v", messages)
	}
}

func TestAnthropic_ThrottlingAndFailures(t *testing.T) {
	ask := func(t *testing.T, r fakeReply) (arbiter.Verification, error) {
		t.Helper()
		f := &fakeAnthropic{replies: []fakeReply{r}}
		return newAnthropic(t, f, arbiter.ConfidenceSpec{}).Verify(context.Background(), task("refund", "Refund?", `{}`, "approve", "reject"))
	}
	t.Run("429 with retry-after throttles for what it asks", func(t *testing.T) {
		_, err := ask(t, fakeReply{status: 429, errorType: "rate_limit_error", retryAfter: "7"})
		var th *arbiter.ThrottledError
		if !errors.As(err, &th) || th.RetryAfter != 7*time.Second {
			t.Fatalf("got %v, want throttled for 7s", err)
		}
		if strings.Contains(err.Error(), "sk-ant-test") {
			t.Errorf("the key leaked into the error: %v", err)
		}
	})
	t.Run("529 overloaded throttles with a backoff", func(t *testing.T) {
		_, err := ask(t, fakeReply{status: 529, errorType: "overloaded_error"})
		var th *arbiter.ThrottledError
		if !errors.As(err, &th) || th.RetryAfter <= 0 || th.RetryAfter > time.Minute {
			t.Fatalf("got %v, want throttled with a backoff", err)
		}
	})
	for _, tc := range []struct {
		name   string
		reply  fakeReply
		reason string
	}{
		{"a 400 is a failed call", fakeReply{status: 400, errorType: "invalid_request_error"}, arbiter.VerifierHTTPStatus(400)},
		{"a 500 is a failed call", fakeReply{status: 500, errorType: "api_error"}, arbiter.VerifierHTTPStatus(500)},
		{"a 503 without retry-after is an outage", fakeReply{status: 503, errorType: "api_error"}, arbiter.VerifierHTTPStatus(503)},
		{"a refusal", fakeReply{stopReason: "refusal", input: `{}`}, arbiter.VerifierRefused},
		{"no tool call", fakeReply{noTool: true, stopReason: "end_turn"}, arbiter.VerifierUnreadable},
		{"a verdict outside the set", fakeReply{input: `{"verdict":"maybe","confidence":0.9,"rationale":""}`}, arbiter.VerifierVerdictOutsideSet},
		{"a confidence out of range", fakeReply{input: `{"verdict":"approve","confidence":1.4,"rationale":""}`}, arbiter.VerifierConfidenceOutOfRange},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ask(t, tc.reply)
			var ve *arbiter.VerifierError
			if !errors.As(err, &ve) || ve.Reason != tc.reason || v.Model != "claude-sonnet-4-5" {
				t.Fatalf("got %+v, %v; want the reason %q", v, err, tc.reason)
			}
		})
	}
	t.Run("logprobs is refused at start", func(t *testing.T) {
		if _, err := agent.New(agent.Config{Backend: "anthropic", Model: "m", Confidence: arbiter.ConfidenceSpec{Source: "logprobs"}}); err == nil {
			t.Error("an anthropic backend with logprobs was built")
		}
	})
}

// TestAnthropic_SamplingAsksOneRequestAnAnswer: with sampling, k requests
// at the temperature (the API has no n); the confidence is the share
// agreeing with the majority and the usage is summed.
func TestAnthropic_SamplingAsksOneRequestAnAnswer(t *testing.T) {
	f := &fakeAnthropic{replies: []fakeReply{
		{input: `{"verdict":"approve","confidence":0.99,"rationale":"a"}`},
		{input: `{"verdict":"reject","confidence":0.99,"rationale":"b"}`},
		{input: `{"verdict":"approve","confidence":0.99,"rationale":"c"}`},
	}}
	v, err := newAnthropic(t, f, arbiter.ConfidenceSpec{Source: "sampling", Samples: 3, Temperature: 0.9}).Verify(context.Background(),
		task("refund", "Refund?", `{}`, "approve", "reject"))
	if err != nil {
		t.Fatal(err)
	}
	if v.Verdict != "approve" || !near(v.Confidence, 2.0/3) || v.Rationale != "a" || v.Usage != (arbiter.Usage{InputTokens: 3 * 412, OutputTokens: 3 * 38}) {
		t.Errorf("got %+v", v)
	}
	reqs := f.all()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for _, r := range reqs {
		if r.body["temperature"] != 0.9 {
			t.Errorf("temperature %v", r.body["temperature"])
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

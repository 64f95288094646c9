// Package fakellm serves fake model providers that speak the real
// protocols — an OpenAI-compatible Chat Completions server and
// Anthropic's Messages API — over httptest, answering each request as a
// script says from the task it carries. Tests and the benchmark's cascade
// phase use them; nothing else does.
package fakellm

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
)

// Reply is one answer of a fake model: a verdict with a confidence and a
// rationale, or, with Status set, an HTTP error (429 and 529 with
// RetryAfter seconds throttle).
type Reply struct {
	Verdict    string
	Confidence float64
	Rationale  string
	Status     int
	RetryAfter string
}

// Script returns the reply to the n-th answer (from 0) asked on the task
// whose JSON document (prompt, task_type, allowed_verdicts, context, …)
// the request carried.
type Script func(task map[string]any, n int) Reply

// Usage is what a fake request reports: InputTokens a request and
// OutputTokens an answer.
const (
	InputTokens  = 400
	OutputTokens = 30
)

// Server is a fake provider; Requests counts what it was asked.
type Server struct {
	*httptest.Server
	script Script

	mu       sync.Mutex
	requests int
	answers  map[string]int // answers given per task document
	bodies   []map[string]any
}

// Requests returns how many requests the server took.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// Bodies returns the requests' bodies.
func (s *Server) Bodies() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.bodies...)
}

// replies takes n replies for the task in the user message.
func (s *Server) replies(body map[string]any, user string, n int) []Reply {
	doc := user[strings.Index(user, "{"):]
	var task map[string]any
	json.Unmarshal([]byte(doc), &task)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	s.bodies = append(s.bodies, body)
	if s.answers == nil {
		s.answers = map[string]int{}
	}
	out := make([]Reply, n)
	for i := range out {
		out[i] = s.script(task, s.answers[doc])
		s.answers[doc]++
	}
	return out
}

func readBody(r *http.Request) map[string]any {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	json.Unmarshal(raw, &body)
	return body
}

func writeError(w http.ResponseWriter, r Reply, errorType string) {
	if r.RetryAfter != "" {
		w.Header().Set("Retry-After", r.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.Status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": errorType, "message": errorType}})
}

// OpenAI serves an OpenAI-compatible Chat Completions server on
// /v1/chat/completions: n answers a request when honoursN, else one.
func OpenAI(script Script, honoursN bool) *Server {
	s := &Server{script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		body := readBody(r)
		messages, _ := body["messages"].([]any)
		user := ""
		if len(messages) == 2 {
			user, _ = messages[1].(map[string]any)["content"].(string)
		}
		n := 1
		if v, ok := body["n"].(float64); ok && honoursN {
			n = int(v)
		}
		replies := s.replies(body, user, n)
		if replies[0].Status != 0 {
			writeError(w, replies[0], "rate_limit_exceeded")
			return
		}
		var choices []any
		for i, reply := range replies {
			content, _ := json.Marshal(map[string]any{"verdict": reply.Verdict, "confidence": reply.Confidence, "rationale": reply.Rationale})
			choices = append(choices, map[string]any{"index": i, "message": map[string]any{"role": "assistant", "content": string(content)}})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"choices": choices,
			"usage": map[string]any{"prompt_tokens": InputTokens, "completion_tokens": OutputTokens * len(replies)}})
	}))
	return s
}

// Anthropic serves Anthropic's Messages API on /v1/messages: x-api-key and
// anthropic-version required, one answer a request, as a tool_use block.
func Anthropic(script Script) *Server {
	s := &Server{script: script}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("X-Api-Key") == "" || r.Header.Get("Anthropic-Version") == "" {
			writeError(w, Reply{Status: http.StatusUnauthorized}, "authentication_error")
			return
		}
		body := readBody(r)
		messages, _ := body["messages"].([]any)
		user := ""
		if len(messages) == 1 {
			user, _ = messages[0].(map[string]any)["content"].(string)
		}
		reply := s.replies(body, user, 1)[0]
		switch reply.Status {
		case 0:
		case 529:
			writeError(w, reply, "overloaded_error")
			return
		default:
			writeError(w, reply, "rate_limit_error")
			return
		}
		input, _ := json.Marshal(map[string]any{"verdict": reply.Verdict, "confidence": reply.Confidence, "rationale": reply.Rationale})
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_fake", "type": "message", "role": "assistant", "model": body["model"],
			"content":     []any{map[string]any{"type": "tool_use", "id": "toolu_fake", "name": "record_verdict", "input": json.RawMessage(input)}},
			"stop_reason": "tool_use", "usage": map[string]any{"input_tokens": InputTokens, "output_tokens": OutputTokens}})
	}))
	return s
}

package agent_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
)

func TestConfidenceSources(t *testing.T) {
	a := func(verdict string, c float64, p float64, has bool) agent.Answer {
		return agent.Answer{Verdict: verdict, Confidence: c, Rationale: verdict + "!", Probability: p, HasProbability: has}
	}
	for _, tc := range []struct {
		name       string
		spec       arbiter.ConfidenceSpec
		answers    []agent.Answer
		n          int
		temp       float64
		logprobs   bool
		verdict    string
		confidence float64
	}{
		{"self takes the stated confidence", arbiter.ConfidenceSpec{Source: "self"}, []agent.Answer{a("x", 0.95, 0.2, true)}, 1, 0, false, "x", 0.95},
		{"logprobs takes the smaller", arbiter.ConfidenceSpec{Source: "logprobs"}, []agent.Answer{a("x", 0.95, 0.6, true)}, 1, 0, true, "x", 0.6},
		{"logprobs without them keeps the stated", arbiter.ConfidenceSpec{Source: "logprobs"}, []agent.Answer{a("x", 0.95, 0, false)}, 1, 0, true, "x", 0.95},
		{"sampling takes the majority's share", arbiter.ConfidenceSpec{Source: "sampling", Samples: 5, Temperature: 0.5},
			[]agent.Answer{a("x", 1, 0, false), a("y", 1, 0, false), a("y", 1, 0, false), a("x", 1, 0, false), a("y", 1, 0, false)}, 5, 0.5, false, "y", 0.6},
		{"a tie goes to the first to reach it", arbiter.ConfidenceSpec{Source: "sampling", Samples: 4},
			[]agent.Answer{a("x", 1, 0, false), a("y", 1, 0, false), a("y", 1, 0, false), a("x", 1, 0, false)}, 4, arbiter.DefaultSamplingTemperature, false, "y", 0.5},
		{"sampling's defaults", arbiter.ConfidenceSpec{Source: "sampling"},
			[]agent.Answer{a("x", 1, 0, false), a("x", 1, 0, false), a("x", 1, 0, false), a("x", 1, 0, false), a("x", 1, 0, false)}, 5, 0.7, false, "x", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := agent.NewConfidenceSource(tc.spec)
			n, temp, lp := s.Plan()
			if n != tc.n || temp != tc.temp || lp != tc.logprobs {
				t.Errorf("Plan = %d, %v, %v; want %d, %v, %v", n, temp, lp, tc.n, tc.temp, tc.logprobs)
			}
			v, c, r := s.Combine(tc.answers)
			if v != tc.verdict || !near(c, tc.confidence) || r != v+"!" {
				t.Errorf("Combine = %q, %v, %q; want %q, %v", v, c, r, tc.verdict, tc.confidence)
			}
		})
	}
}

// TestOpenAI_SamplingWithAndWithoutN asks for five answers: a server that
// honours n gives them in one request; one that ignores it (Ollama) gives
// one a request, and is asked again for the rest. Usage is summed.
func TestOpenAI_SamplingWithAndWithoutN(t *testing.T) {
	replies := []string{"approve", "approve", "reject", "approve", "reject"}
	for _, honoursN := range []bool{true, false} {
		name := map[bool]string{true: "with n", false: "without n"}[honoursN]
		t.Run(name, func(t *testing.T) {
			f := &fakeModel{}
			next := 0
			srv := httptest.NewServer(httpHandler(func(body map[string]any) any {
				n := 1
				if honoursN {
					if v, ok := body["n"].(float64); ok {
						n = int(v)
					}
				}
				var choices []any
				for range n {
					content, _ := json.Marshal(map[string]any{"verdict": replies[next%len(replies)], "confidence": 0.9, "rationale": "r"})
					next++
					choices = append(choices, map[string]any{"message": map[string]any{"role": "assistant", "content": string(content)}})
				}
				return map[string]any{"choices": choices, "usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20 * n}}
			}, f))
			t.Cleanup(srv.Close)
			v, err := agent.New(agent.Config{Backend: "openai", BaseURL: srv.URL + "/v1", Model: "m",
				Confidence: arbiter.ConfidenceSpec{Source: "sampling", Samples: 5, Temperature: 0.8}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Verify(context.Background(), task("refund", "Refund?", `{}`, "approve", "reject"))
			if err != nil {
				t.Fatal(err)
			}
			requests := 1
			if !honoursN {
				requests = 5
			}
			if got.Verdict != "approve" || !near(got.Confidence, 0.6) ||
				got.Usage != (arbiter.Usage{InputTokens: 100 * requests, OutputTokens: 100}) || len(f.requests) != requests {
				t.Errorf("got %+v over %d requests; want approve at 0.6 over %d", got, len(f.requests), requests)
			}
			first := f.requests[0].body
			if first["n"] != 5.0 || first["temperature"] != 0.8 || first["logprobs"] != false {
				t.Errorf("the first request asked n %v at %v, logprobs %v", first["n"], first["temperature"], first["logprobs"])
			}
			if !honoursN && f.requests[1].body["n"] != 4.0 {
				t.Errorf("the second asked n %v, want the 4 left", f.requests[1].body["n"])
			}
		})
	}
}

// httpHandler is a Chat Completions server on /v1/chat/completions whose
// answer reply makes from the request's body; it records the requests in
// f.
func httpHandler(reply func(body map[string]any) any, f *fakeModel) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(raw, &body)
		f.mu.Lock()
		f.requests = append(f.requests, fakeRequest{r.Method, r.URL.Path, r.Header.Clone(), body})
		out := reply(body)
		f.mu.Unlock()
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
}

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter"
)

// Anthropic is the backend for Anthropic's Messages API, native: the key
// goes in x-api-key with an anthropic-version, and the verdict comes back
// as the input of a tool the model must call, whose input_schema has the
// task's allowed verdicts as an enum (Anthropic's structured output). The
// API gives no log-probabilities: the confidence source is self (the
// stated confidence) or sampling (one request an answer, as the API has no
// n). A 429, a 529 (overloaded) and a 503 with Retry-After throttle the
// call: the task waits (retry-after when sent), no failure counted.
type Anthropic struct {
	modelVerifier
	api endpoint
}

// AnthropicVersion is the API version the backend speaks
// (anthropic-version).
const AnthropicVersion = "2023-06-01"

// DefaultAnthropicURL is the API root when the verifier names none.
const DefaultAnthropicURL = "https://api.anthropic.com"

// anthropicMaxTokens bounds the answer: a verdict, a number and a short
// rationale.
const anthropicMaxTokens = 1024

// verdictTool names the tool the model answers through.
const verdictTool = "record_verdict"

// NewAnthropic returns the anthropic backend. Model is required; BaseURL
// defaults to DefaultAnthropicURL (a root with or without /v1).
func NewAnthropic(cfg Config) (*Anthropic, error) {
	base := cfg.BaseURL
	if base == "" {
		base = DefaultAnthropicURL
	}
	if err := checkBaseURL(base); err != nil {
		return nil, fmt.Errorf("the Anthropic base URL %w", err)
	}
	if cfg.Model == "" {
		return nil, errors.New("backend anthropic needs a model, such as claude-sonnet-4-5")
	}
	if cfg.Confidence.Source == arbiter.ConfidenceLogprobs {
		return nil, errors.New("Anthropic's API gives no logprobs: use confidence source self or sampling")
	}
	base = strings.TrimSuffix(strings.TrimRight(base, "/"), "/v1")
	limiter := limiterOf(cfg)
	a := &Anthropic{api: endpoint{url: base + "/v1/messages", apiKey: cfg.APIKey, client: httpClientOf(cfg), limiter: limiter,
		header:    http.Header{"Anthropic-Version": {AnthropicVersion}},
		authorize: func(h http.Header, key string) { h.Set("X-Api-Key", key) },
		throttled: anthropicThrottled}}
	a.modelVerifier = modelVerifier{model: cfg.Model, client: a, source: NewConfidenceSource(cfg.Confidence), limiter: limiter}
	return a, nil
}

// anthropicThrottled reports whether the Messages API throttled a call: a
// 429 (rate_limit_error) or a 529 (overloaded_error), with the wait its
// retry-after asks (0 when none); or a 503 with a Retry-After.
func anthropicThrottled(res *http.Response, _ []byte) (time.Duration, bool) {
	wait, said := retryAfter(res.Header, time.Now())
	switch res.StatusCode {
	case http.StatusTooManyRequests, 529:
		return wait, true
	case http.StatusServiceUnavailable:
		return wait, said
	}
	return 0, false
}

// perRequest is one: the Messages API has no n.
func (a *Anthropic) perRequest() int { return 1 }

type messagesRequest struct {
	Model       string           `json:"model"`
	MaxTokens   int              `json:"max_tokens"`
	Temperature float64          `json:"temperature"`
	System      string           `json:"system"`
	Messages    []chatMessage    `json:"messages"`
	Tools       []messagesTool   `json:"tools"`
	ToolChoice  messagesToolPick `json:"tool_choice"`
}

type messagesTool struct {
	Name        string         `json:"name"`
	Description string         `json:"description"`
	InputSchema map[string]any `json:"input_schema"`
}

type messagesToolPick struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

type messagesResponse struct {
	Content []struct {
		Type  string          `json:"type"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
		Text  string          `json:"text"`
	} `json:"content"`
	StopReason string `json:"stop_reason"`
	Usage      struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// ask makes one Messages request for an answer on t at temperature.
func (a *Anthropic) ask(ctx context.Context, t *arbiter.Task, _ int, temperature float64, _ bool) ([]Answer, arbiter.Usage, error) {
	msg, err := taskMessage(t)
	if err != nil {
		return nil, arbiter.Usage{}, failed(arbiter.VerifierFailed, fmt.Errorf("build the model request: %w", err))
	}
	schema := verdictFormat(t.AllowedVerdicts)["json_schema"].(map[string]any)["schema"].(map[string]any)
	body, err := json.Marshal(messagesRequest{
		Model: a.model, MaxTokens: anthropicMaxTokens, Temperature: temperature, System: systemPrompt,
		Messages: []chatMessage{{Role: "user", Content: msg}},
		Tools: []messagesTool{{Name: verdictTool, InputSchema: schema,
			Description: "Record your verdict on the task: one of the allowed verdicts, your confidence that it is right, and a short rationale."}},
		ToolChoice: messagesToolPick{Type: "tool", Name: verdictTool},
	})
	if err != nil {
		return nil, arbiter.Usage{}, failed(arbiter.VerifierFailed, fmt.Errorf("build the model request: %w", err))
	}
	raw, err := a.api.post(ctx, body)
	if err != nil {
		return nil, arbiter.Usage{}, err
	}
	var mr messagesResponse
	if err := json.Unmarshal(raw, &mr); err != nil {
		return nil, arbiter.Usage{}, failed(arbiter.VerifierUnreadable, fmt.Errorf("the model server's answer is not a Messages response: %s", a.api.excerpt(raw)))
	}
	usage := arbiter.Usage{InputTokens: max(mr.Usage.InputTokens, 0), OutputTokens: max(mr.Usage.OutputTokens, 0)}
	if mr.StopReason == "refusal" {
		return nil, usage, failed(arbiter.VerifierRefused, errors.New("the model refused (stop_reason refusal)"))
	}
	for _, c := range mr.Content {
		if c.Type != "tool_use" || c.Name != verdictTool {
			continue
		}
		// The tool's input is the answer, checked as the schema asks.
		var in bytes.Buffer
		if err := json.Compact(&in, c.Input); err != nil {
			return nil, usage, failed(arbiter.VerifierUnreadable, fmt.Errorf("the tool input is not JSON: %s", a.api.excerpt(c.Input)))
		}
		ans, err := decodeAnswer(t, in.String(), a.api.excerpt)
		if err != nil {
			return nil, usage, err
		}
		return []Answer{{Verdict: *ans.Verdict, Confidence: *ans.Confidence, Rationale: ans.Rationale}}, usage, nil
	}
	return nil, usage, failed(arbiter.VerifierUnreadable, fmt.Errorf("the model did not call the %s tool (stop_reason %q)", verdictTool, mr.StopReason))
}

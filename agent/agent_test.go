package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
)

// task returns a task of taskType asking prompt, with the context JSON
// taskContext ("" for none) and the allowed verdicts.
func task(taskType, prompt, taskContext string, verdicts ...string) *arbiter.Task {
	t := &arbiter.Task{
		Prompt: prompt, TaskType: taskType, Touchpoint: "chat", Source: "checkout",
		AllowedVerdicts: verdicts, ConfidenceThreshold: 0.8,
	}
	if taskContext != "" {
		t.Context = json.RawMessage(taskContext)
	}
	return t
}

func TestNew(t *testing.T) {
	for name, backend := range map[string]string{"EmptyBackendIsNone": "", "NoneDeclines": "none"} {
		t.Run(name, func(t *testing.T) {
			v, err := agent.New(agent.Config{Backend: backend})
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Verify(context.Background(), task("decide", "p", `{"a":1}`, "yes", "no"))
			if err != nil || got.Decided || got.Model != "none" {
				t.Fatalf("Verify = %+v, %v; want undecided by none", got, err)
			}
		})
	}

	t.Run("OpenAI", func(t *testing.T) {
		v, err := agent.New(agent.Config{Backend: "openai", BaseURL: "http://127.0.0.1:1/v1", Model: "m"})
		if _, ok := v.(*agent.OpenAI); err != nil || !ok {
			t.Fatalf("New = %T, %v; want *agent.OpenAI", v, err)
		}
	})

	t.Run("Rules", func(t *testing.T) {
		v, err := agent.New(agent.Config{Backend: "rules", RulesFile: "testdata/rules.txt"})
		if _, ok := v.(*agent.Rules); err != nil || !ok {
			t.Fatalf("New = %T, %v; want *agent.Rules", v, err)
		}
	})

	errCases := []struct {
		name    string
		cfg     agent.Config
		wantErr string
	}{
		{"ErrUnknownBackend", agent.Config{Backend: "gpt"}, `must be none, openai, anthropic or rules, not "gpt"`},
		{"ErrOpenAIWithoutBaseURL", agent.Config{Backend: "openai", Model: "m"}, "ARBITER_AGENT_BASE_URL"},
		{"ErrOpenAIWithBadBaseURL", agent.Config{Backend: "openai", BaseURL: "localhost:11434", Model: "m"}, "http or https URL"},
		{"ErrOpenAIWithoutModel", agent.Config{Backend: "openai", BaseURL: "http://x/v1"}, "ARBITER_AGENT_MODEL"},
		{"ErrRulesWithoutFile", agent.Config{Backend: "rules"}, "ARBITER_AGENT_RULES"},
		{"ErrRulesFileMissing", agent.Config{Backend: "rules", RulesFile: "testdata/missing.txt"}, "missing.txt"},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			v, err := agent.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New = %T, %v; want an error containing %q", v, err, tc.wantErr)
			}
		})
	}
}

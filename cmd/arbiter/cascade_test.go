package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/fakellm"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// TestRun_TheExampleVerifiersFile runs a deployment with the example
// verifiers file (rules → small → large, as docs/agent-tier.md shows it)
// end to end against fake providers that speak the OpenAI and Anthropic
// protocols, on both stores: each task is decided by the first verifier
// sure enough of it, which the API's final_verifier names, its attempts
// naming each verifier asked with its tokens and cost; a task none is sure
// of goes to people.
func TestRun_TheExampleVerifiersFile(t *testing.T) {
	t.Parallel()
	script := func(model string) fakellm.Script {
		return func(task map[string]any, n int) fakellm.Reply {
			ctx, _ := task["context"].(map[string]any)
			answers, _ := ctx[model].([]any)
			if len(answers) == 0 {
				return fakellm.Reply{Verdict: "reject", Confidence: 0.5}
			}
			v, _ := answers[n%len(answers)].(string)
			return fakellm.Reply{Verdict: v, Confidence: 0.93, Rationale: model + " says " + v}
		}
	}
	small, large := fakellm.OpenAI(script("small"), true), fakellm.Anthropic(script("large"))
	defer small.Close()
	defer large.Close()

	dir := t.TempDir()
	example, err := os.ReadFile(filepath.Join("..", "..", "agent", "testdata", "verifiers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	file := strings.Replace(string(example), "http://127.0.0.1:11434/v1", small.URL+"/v1", 1)
	file = strings.Replace(file, "    model: claude-sonnet-4-5\n", "    model: claude-sonnet-4-5\n    base_url: "+large.URL+"\n", 1)
	rules, _ := os.ReadFile(filepath.Join("..", "..", "agent", "testdata", "cascade_rules.txt"))
	os.WriteFile(filepath.Join(dir, "cascade_rules.txt"), rules, 0o600)
	os.WriteFile(filepath.Join(dir, "verifiers.yaml"), []byte(file), 0o600)

	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			getenv := env(map[string]string{"ARBITER_DATABASE_URL": dbtest.URL(t, dialect),
				"ARBITER_VERIFIERS": filepath.Join(dir, "verifiers.yaml"), "SMALL_API_KEY": "sk-small", "ANTHROPIC_API_KEY": "sk-ant"})
			base := serve(t, getenv)
			key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))
			create := func(context string) string {
				t.Helper()
				status, task := testutil.APICall(t, "POST", base+"/v1/tasks", key,
					`{"prompt":"Refund?","task_type":"refund","allowed_verdicts":["approve","reject"],"confidence_threshold":0.9,"context":`+context+`}`)
				if status != 200 {
					t.Fatalf("create = %d %v", status, task)
				}
				return task["id"].(string)
			}
			for _, tc := range []struct {
				name, context, status, verifier string
				asked                           []string
			}{
				{"the rules decide a small refund", `{"amount":10}`, "completed", "rules", []string{"rules"}},
				{"the small model's five answers agree", `{"amount":300,"small":["approve"]}`, "completed", "small", []string{"rules", "small"}},
				{"the small model splits: the large one decides", `{"amount":300,"small":["approve","reject"],"large":["reject"]}`,
					"completed", "large", []string{"rules", "small", "large"}},
				{"nobody is sure: people decide", `{"amount":300,"small":["approve","reject"]}`, "human_needed", "", []string{"rules", "small", "large"}},
			} {
				t.Run(tc.name, func(t *testing.T) {
					task := waitStatus(t, base, key, create(tc.context), tc.status)
					if v, _ := task["final_verifier"].(string); v != tc.verifier {
						t.Errorf("final_verifier %v, want %q", task["final_verifier"], tc.verifier)
					}
					attempts, _ := task["attempts"].([]any)
					var asked []string
					for _, a := range attempts {
						a := a.(map[string]any)
						name, _ := a["verifier"].(string)
						asked = append(asked, name)
						if name != "rules" && (a["input_tokens"] == nil || a["cost"] == nil) {
							t.Errorf("%s's attempt has no usage or cost: %v", name, a)
						}
					}
					if strings.Join(asked, " ") != strings.Join(tc.asked, " ") {
						t.Errorf("asked %v, want %v", asked, tc.asked)
					}
				})
			}
		})
	}
	if small.Requests() == 0 || large.Requests() == 0 {
		t.Errorf("the fakes were asked %d and %d times", small.Requests(), large.Requests())
	}
	for _, b := range small.Bodies() {
		if b["n"] != 5.0 || b["temperature"] != 0.7 {
			t.Errorf("the small model was asked n %v at %v, want 5 at 0.7", b["n"], b["temperature"])
		}
	}
}

// TestRun_BadVerifiersFileFailsAtStart: a bad file stops the server at
// start with the file, the line and the reason, and so does a key
// variable that is not set.
func TestRun_BadVerifiersFileFailsAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("verifiers:\n  - name: small\n    backend: openai\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    confidence: vibes\ncascade: [small]\n"), 0o600)
	keyless := filepath.Join(dir, "keyless.yaml")
	os.WriteFile(keyless, []byte("verifiers:\n  - name: large\n    backend: anthropic\n    model: m\n    api_key_env: LARGE_KEY\ncascade: [large]\n"), 0o600)
	for file, want := range map[string]string{bad: bad + ":6: verifiers[0].confidence: confidence source must be",
		keyless: "verifier large: LARGE_KEY, its api_key_env, is not set"} {
		getenv := env(map[string]string{"ARBITER_DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "a.db"), "ARBITER_VERIFIERS": file})
		err := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0"}, getenv, nil, &strings.Builder{}, &strings.Builder{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("serve with %s = %v, want an error containing %q", filepath.Base(file), err, want)
		}
	}
}

package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
)

// TestLoadVerifiers_TheExampleFile reads the example file (rules → small →
// large) as the documentation shows it.
func TestLoadVerifiers_TheExampleFile(t *testing.T) {
	set, err := agent.LoadVerifiers(filepath.Join("testdata", "verifiers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(set.Cascade, " → "); got != "rules → small → large" || len(set.Verifiers) != 3 {
		t.Fatalf("cascade %q, %d verifiers", got, len(set.Verifiers))
	}
	small, _ := set.Find("small")
	want := arbiter.VerifierSpec{Name: "small", Backend: "openai", BaseURL: "http://127.0.0.1:11434/v1", Model: "qwen2.5:7b-instruct",
		APIKeyEnv: "SMALL_API_KEY", Timeout: 20 * time.Second, MaxRPS: 5, Price: arbiter.Price{InputPerMillion: 0.15, OutputPerMillion: 0.6},
		Confidence: arbiter.ConfidenceSpec{Source: "sampling", Samples: 5, Temperature: 0.7}}
	if small != want {
		t.Errorf("small = %+v\nwant %+v", small, want)
	}
	rules, _ := set.Find("rules")
	if rules.RulesFile != filepath.Join("testdata", "cascade_rules.txt") {
		t.Errorf("the rules file is not read beside the verifiers file: %q", rules.RulesFile)
	}
	if large, _ := set.Find("large"); large.Confidence.Source != "self" || large.Backend != "anthropic" {
		t.Errorf("large = %+v", large)
	}
	env := map[string]string{"SMALL_API_KEY": "sk-small", "ANTHROPIC_API_KEY": "sk-ant"}
	built, err := agent.Build(set, func(k string) string { return env[k] }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range set.Cascade {
		if n, ok := built.Get(name); !ok || n.Verifier == nil || n.Spec.Name != name {
			t.Errorf("%s not built: %+v", name, n)
		}
	}
	if _, err := agent.Build(set, func(string) string { return "" }, nil, nil); err == nil || !strings.Contains(err.Error(), "verifier small: SMALL_API_KEY, its api_key_env, is not set") {
		t.Errorf("a missing key: %v", err)
	}
}

// TestParseVerifiers_JSONIsYAML reads the same set written as JSON.
func TestParseVerifiers_JSONIsYAML(t *testing.T) {
	set, err := agent.ParseVerifiers("v.json", []byte(`{"verifiers": [{"name": "m", "backend": "anthropic", "model": "claude",
		"confidence": {"source": "sampling", "samples": 3}}], "cascade": ["m"]}`))
	if err != nil || set.Verifiers[0].Confidence.Samples != 3 || set.Cascade[0] != "m" {
		t.Fatalf("%+v, %v", set, err)
	}
}

// TestParseVerifiers_EveryBadInputSaysFileAndLine: each bad file stops the
// server at start with the file, the line and the reason.
func TestParseVerifiers_EveryBadInputSaysFileAndLine(t *testing.T) {
	const good = `verifiers:
  - name: small
    backend: openai
    base_url: http://127.0.0.1:1/v1
    model: m
cascade: [small]
`
	if _, err := agent.ParseVerifiers("v.yaml", []byte(good)); err != nil {
		t.Fatalf("the good file: %v", err)
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"empty", ``, "v.yaml: the file is empty"},
		{"not YAML", "verifiers: [\n  - name: a\n", "v.yaml:"},
		{"a list at the top", "- a\n", "v.yaml:1: expected a mapping"},
		{"an unknown top key", good + "extra: 1\n", "v.yaml:7: extra: unknown key"},
		{"no verifiers", "cascade: [a]\n", "v.yaml:1: verifiers: the file lists no verifiers"},
		{"no cascade", strings.Replace(good, "cascade: [small]\n", "", 1), "v.yaml:1: cascade: the file has no cascade"},
		{"verifiers not a list", "verifiers: 3\ncascade: [a]\n", "v.yaml:1: verifiers: verifiers must be a list"},
		{"an unknown verifier key", strings.Replace(good, "model: m", "model: m\n    modle: n", 1), "v.yaml:6: verifiers[0].modle: unknown key"},
		{"a duplicate key", strings.Replace(good, "model: m", "model: m\n    model: n", 1), "v.yaml:6: verifiers[0].model: mapping key \"model\" already defined at line 5"},
		{"a bad name", strings.Replace(good, "name: small", "name: Small", 1), "v.yaml:2: verifiers[0].name: A verifier's name is"},
		{"no backend", strings.Replace(good, "backend: openai", "backend: ''", 1), "v.yaml:3: verifiers[0].backend: backend is required"},
		{"an unknown backend", strings.Replace(good, "backend: openai", "backend: gpt", 1), "v.yaml:3: verifiers[0].backend: backend must be"},
		{"openai without base_url", strings.Replace(good, "    base_url: http://127.0.0.1:1/v1\n", "", 1), "v.yaml:2: verifiers[0].base_url: backend openai needs base_url"},
		{"no model", strings.Replace(good, "    model: m\n", "", 1), "verifiers[0].model: backend openai needs model"},
		{"a key instead of its variable", strings.Replace(good, "model: m", "model: m\n    api_key_env: sk-live-123", 1), "v.yaml:6: verifiers[0].api_key_env: api_key_env names the environment variable"},
		{"a bad timeout", strings.Replace(good, "model: m", "model: m\n    timeout: soon", 1), "v.yaml:6: verifiers[0].timeout: timeout must be a duration"},
		{"a timeout too long", strings.Replace(good, "model: m", "model: m\n    timeout: 1h", 1), "v.yaml:6: verifiers[0].timeout: timeout must be a duration from 1s to 10m0s"},
		{"max_rps not a number", strings.Replace(good, "model: m", "model: m\n    max_rps: fast", 1), `v.yaml:6: verifiers[0].max_rps: expected a number, not "fast"`},
		{"max_rps 0", strings.Replace(good, "model: m", "model: m\n    max_rps: 0", 1), "v.yaml:6: verifiers[0].max_rps: max_rps must be a number of calls a second above 0"},
		{"a negative price", strings.Replace(good, "model: m", "model: m\n    price: {input_per_million: -1}", 1), "v.yaml:6: verifiers[0].price: price takes"},
		{"an unknown price key", strings.Replace(good, "model: m", "model: m\n    price: {per_token: 1}", 1), "v.yaml:6: verifiers[0].price.per_token: unknown key"},
		{"an unknown confidence source", strings.Replace(good, "model: m", "model: m\n    confidence: vibes", 1), `v.yaml:6: verifiers[0].confidence: confidence source must be self, logprobs or sampling, not "vibes"`},
		{"one sample", strings.Replace(good, "model: m", "model: m\n    confidence: {source: sampling, samples: 1}", 1), "v.yaml:6: verifiers[0].confidence.samples: samples must be a whole number from 2 to 20"},
		{"samples without sampling", strings.Replace(good, "model: m", "model: m\n    confidence: {source: self, samples: 4}", 1), "v.yaml:6: verifiers[0].confidence: samples and temperature go only with confidence source sampling"},
		{"logprobs from Anthropic", "verifiers:\n  - name: a\n    backend: anthropic\n    model: c\n    confidence: logprobs\ncascade: [a]\n", "v.yaml:5: verifiers[0].confidence: Anthropic's API gives no logprobs"},
		{"rules without a file", "verifiers:\n  - name: r\n    backend: rules\ncascade: [r]\n", "v.yaml:2: verifiers[0].rules_file: backend rules needs rules_file"},
		{"a model setting on rules", "verifiers:\n  - name: r\n    backend: rules\n    rules_file: r.txt\n    model: m\ncascade: [r]\n", "v.yaml:5: verifiers[0].model: model goes only with backend openai or anthropic"},
		{"two of a name", strings.Replace(good, "cascade: [small]", "  - name: small\n    backend: none\ncascade: [small]", 1), "v.yaml:6: verifiers[1].name: Two verifiers are named \"small\""},
		{"an empty cascade", strings.Replace(good, "cascade: [small]", "cascade: []", 1), "v.yaml:6: cascade: The cascade names no verifier"},
		{"an unknown name in the cascade", strings.Replace(good, "cascade: [small]", "cascade:\n  - small\n  - large", 1), `v.yaml:8: cascade[1]: No verifier is named "large"; the file names small.`},
		{"a name twice in the cascade", strings.Replace(good, "cascade: [small]", "cascade: [small, small]", 1), `v.yaml:6: cascade[1]: The cascade names "small" twice.`},
		{"a cascade that is not a list", strings.Replace(good, "cascade: [small]", "cascade: small", 1), "v.yaml:6: cascade: expected a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := agent.ParseVerifiers("v.yaml", []byte(tc.src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v\nwant an error containing %q", err, tc.want)
			}
		})
	}
}

// TestLoadVerifiers_ARulesFileThatDoesNotCompile fails the build naming
// the verifier, the rules file and its line.
func TestLoadVerifiers_ARulesFileThatDoesNotCompile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "r.txt"), []byte("approve 0.9 true\napprove 0.9 context.amount <\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "v.yaml"), []byte("verifiers:\n  - name: r\n    backend: rules\n    rules_file: r.txt\ncascade: [r]\n"), 0o600)
	set, err := agent.LoadVerifiers(filepath.Join(dir, "v.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := agent.Build(set, os.Getenv, nil, nil); err == nil || !strings.Contains(err.Error(), "verifier r: ") || !strings.Contains(err.Error(), "r.txt:2:") {
		t.Errorf("got %v", err)
	}
}

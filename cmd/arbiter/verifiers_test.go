package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRun_VerifiersCheck checks the example file: its verifiers and
// cascade on stdout, a warning for each key variable not set; and a bad
// file fails with the file, the line and the reason.
func TestRun_VerifiersCheck(t *testing.T) {
	example := filepath.Join("..", "..", "agent", "testdata", "verifiers.yaml")
	env := map[string]string{"ANTHROPIC_API_KEY": "sk-ant"}
	stdout, stderr, err := runCmd(func(k string) string { return env[k] }, "verifiers", "check", example)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	for _, want := range []string{"rules: rules from ", "small: openai qwen2.5:7b-instruct, confidence sampling (5 answers at 0.7)",
		"large: anthropic claude-sonnet-4-5, confidence self", "cascade: rules → small → large → people"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stderr, "SMALL_API_KEY is not set here") || strings.Contains(stderr, "ANTHROPIC_API_KEY") {
		t.Errorf("stderr %q", stderr)
	}

	bad := filepath.Join(t.TempDir(), "v.yaml")
	os.WriteFile(bad, []byte("verifiers:\n  - name: a\n    backend: openai\n    model: m\n    base_url: http://x/v1\n    max_rps: fast\ncascade: [a]\n"), 0o600)
	_, stderr, err = runCmd(func(string) string { return "" }, "verifiers", "check", bad)
	if err == nil || !strings.Contains(stderr, bad+`:6: verifiers[0].max_rps: expected a number, not "fast"`) {
		t.Errorf("a bad file: %v, %q", err, stderr)
	}
	if _, _, err := runCmd(func(string) string { return "" }, "verifiers", "check"); err == nil {
		t.Error("no file is no error")
	}
}

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
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

// TestRun_VerifiersBacktest backtests a verifier the cascade does not use
// on twenty tasks people labelled: it prints the candidate beside the
// current cascade, records the run and its calls, and leaves the tasks'
// attempts as they were; an unknown verifier or a bad span is refused.
func TestRun_VerifiersBacktest(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "a.db")
	store := dbtest.OpenURL(t, url, db.Options{})
	acct, err := store.FindOrCreateAccountByEmail(ctx, "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 20 {
		task, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
			TaskType: "refund", ConfidenceThreshold: 0.9, Context: json.RawMessage(`{"amount": 12}`)})
		if err != nil {
			t.Fatal(err)
		}
		if claimed, err := store.ClaimTasks(ctx, "w", 10, time.Minute); err != nil || len(claimed) != 1 {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		verdict, confidence, name := "reject", 0.5, "none"
		if err := store.FinishAgentAttempt(ctx, "w", task.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent,
			Verifier: &name, Verdict: &verdict, Confidence: &confidence}, Next: arbiter.StatusHumanNeeded}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "ops@example.com"}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	rules := filepath.Join("..", "..", "agent", "testdata", "cascade_rules.txt")
	abs, _ := filepath.Abs(rules)
	file := filepath.Join(dir, "verifiers.yaml")
	os.WriteFile(file, []byte("verifiers:\n  - name: none\n    backend: none\n  - name: strict\n    backend: rules\n    rules_file: "+abs+"\ncascade: [none]\n"), 0o600)
	vars := env(map[string]string{"ARBITER_DATABASE_URL": url, "ARBITER_VERIFIERS": file})
	attempts := func() int {
		n := 0
		for _, id := range ids {
			task, err := store.FindTaskByID(ctx, acct.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			n += len(task.Attempts)
		}
		return n
	}
	before := attempts()

	out := runOK(t, vars, "verifiers", "backtest", "--email", "ops@example.com", "--verifier", "strict", "--target-error-rate", "0.2")
	for _, want := range []string{"strict on 20 labelled tasks (0 failed, 0 declined); no task changed",
		"strict           0.99       100%      0%", "current cascade  as it ran  0%", "strict certificate: At or above 0.99"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	runID, _, _ := strings.Cut(strings.TrimPrefix(out, "backtest "), ":")
	run, err := store.FindBacktestRun(ctx, acct.ID, runID)
	if err != nil {
		t.Fatalf("the run %q: %v", runID, err)
	}
	if len(run.Calls) != 20 || *run.Calls[0].Verdict != "approve" || *run.Calls[0].Confidence != 0.99 || run.Calls[0].TaskID != ids[19] {
		t.Errorf("calls recorded: %+v", run.Calls)
	}
	if after := attempts(); after != before {
		t.Errorf("the backtest wrote attempts: %d, were %d", after, before)
	}

	for args, want := range map[string]string{
		"--verifier large":             `no verifier is named "large"; the verifiers file names none, strict`,
		"--verifier strict --since 2y": "since must be from 1h to 365d",
		"--verifier strict --limit 0":  "limit must be a whole number",
		"--verifier Strict":            "A verifier's name is",
	} {
		_, stderr, err := runCmd(vars, append([]string{"verifiers", "backtest", "--email", "ops@example.com"}, strings.Fields(args)...)...)
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("%s: %v, %q; want %q", args, err, stderr, want)
		}
	}
}

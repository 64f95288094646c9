package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/db/dbtest"
)

func TestRun_Policy(t *testing.T) {
	getenv := taskServer(t, dbtest.URL(t, dbtest.Dialects[0]))
	out := runOK(t, getenv, "policy", "put", "--threshold", "0.95", "--deadline", "10m",
		"--on-expiry", "agent_verdict", "--agent-floor", "0.9", "--on-expiry-fallback", "verdict:reject", "refund")
	var p map[string]any
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("put printed %s", out)
	}
	if p["task_type"] != "refund" || p["confidence_threshold"] != 0.95 || p["deadline_seconds"] != 600.0 ||
		p["on_expiry"] != "agent_verdict" || p["agent_floor"] != 0.9 || p["on_expiry_fallback"] != "verdict:reject" {
		t.Errorf("put printed %s", out)
	}
	if got := runOK(t, getenv, "policy", "get", "refund"); got != out {
		t.Errorf("get printed %s, want %s", got, out)
	}
	if list := runOK(t, getenv, "policy", "list"); !strings.Contains(list, `"refund"`) {
		t.Errorf("list printed %s", list)
	}
	task := decodeTask(t, runOK(t, getenv, "task", "create", "--prompt", "Refund?", "--verdict", "approve", "--verdict", "reject",
		"--task-type", "refund", "--on-expiry", "verdict:approve"))
	if task["confidence_threshold"] != 0.95 || task["deadline_at"] == nil {
		t.Errorf("a create of the type printed %v", task)
	}
	out = runOK(t, getenv, "policy", "put", "--notify", "slack:#refunds", "--notify", "slack:C0VIP0001", "--reviews", "3",
		"--consensus", "quorum", "--quorum", "2", "--veto", "reject", "--tiebreak", "role:admin", "refund")
	for _, want := range []string{`"slack:#refunds"`, `"slack:C0VIP0001"`, `"reviews_required": 3`, `"consensus": "quorum"`,
		`"quorum": 2`, `"reject"`, `"tiebreak": "role:admin"`} {
		if !strings.Contains(out, want) {
			t.Errorf("put with notify and reviews printed %s, without %s", out, want)
		}
	}
	task = decodeTask(t, runOK(t, getenv, "task", "create", "--prompt", "Refund?", "--verdict", "approve", "--verdict", "reject",
		"--task-type", "refund"))
	if review, _ := task["review"].(map[string]any); review["reviews_required"] != 3.0 || review["quorum"] != 2.0 {
		t.Errorf("a create of the type printed %v, want the policy's review requirement", task)
	}
	runOK(t, getenv, "policy", "delete", "refund")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"policy", "get", "refund"}, getenv, nil, &stdout, &stderr); err == nil ||
		!strings.Contains(err.Error(), "no policy") {
		t.Errorf("get after delete: %v", err)
	}
}

func TestRun_PolicyRemindersAndEscalation(t *testing.T) {
	getenv := taskServer(t, dbtest.URL(t, dbtest.Dialects[0]))
	out := runOK(t, getenv, "policy", "put", "--deadline", "2h", "--remind", "1h", "--remind", "15m",
		"--escalate", "30m=role:admin", "--escalate", "90m=email:ops@example.com", "refund")
	if !strings.Contains(out, `"reminders": [`) && !strings.Contains(out, `"reminders":[`) {
		t.Fatalf("put printed %s", out)
	}
	var p struct {
		Reminders  []string            `json:"reminders"`
		Escalation []map[string]string `json:"escalation"`
	}
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Reminders, " ") != "15m 1h" || len(p.Escalation) != 2 || p.Escalation[1]["after"] != "1h30m" ||
		p.Escalation[1]["to"] != "email:ops@example.com" {
		t.Errorf("put printed %s", out)
	}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"policy", "put", "--escalate", "30m", "refund"}, getenv, nil, &stdout, &stderr); err == nil {
		t.Errorf("a rung without its target: %s", stdout.String())
	}
	// A rung tells the account's members only.
	if err := run(context.Background(), []string{"policy", "put", "--escalate", "30m=email:lead@example.com", "refund"}, getenv, nil,
		&stdout, &stderr); err == nil || !strings.Contains(err.Error(), "not a member") {
		t.Errorf("a rung to an outsider: %v", err)
	}
	runOK(t, getenv, "task", "create", "--prompt", "Refund?", "--verdict", "approve", "--deadline", "1h", "--remind", "50%")
}

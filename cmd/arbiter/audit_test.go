package main

import (
	"bytes"
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
	"github.com/arbiterhq/arbiter/internal/secretbox"
)

// TestRun_AuditExportAndVerify: `arbiter admin export-audit` writes an
// export that `arbiter audit verify` accepts, against the keys of the
// JWKS too; one byte changed in it, the verification fails and names
// the line; a rotated key signs later exports, which verify with the
// JWKS of both keys.
func TestRun_AuditExportAndVerify(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	url := "sqlite:" + filepath.Join(dir, "a.db")
	keyring := secretbox.NewKey()
	k, _ := secretbox.Parse(keyring)
	store := dbtest.OpenURL(t, url, db.Options{Secrets: k})
	acct, err := store.FindOrCreateAccountByEmail(ctx, "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	in, err := arbiter.ParseTaskCreate([]byte(`{"prompt": "Refund?", "allowed_verdicts": ["approve", "reject"],
		"action": {"name": "issue_refund", "args": {"amount": 120}, "editable": ["amount"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		task, err := store.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := store.ClaimTasks(ctx, "w", 10, time.Minute)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		if err := store.FinishAgentAttempt(ctx, "w", task.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent,
			ActionDigest: task.ProposedDigest()}, Next: arbiter.StatusHumanNeeded}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "ops@example.com",
			ActionDigest: task.Action.Digest, EditedArgs: json.RawMessage(`{"amount": 99}`)}); err != nil {
			t.Fatal(err)
		}
	}
	vars := env(map[string]string{"ARBITER_DATABASE_URL": url, "ARBITER_SECRET_KEY": keyring})
	export := filepath.Join(dir, "audit.jsonl")
	runOK(t, vars, "admin", "export-audit", "--email", "ops@example.com", "--out", export)
	if out := runOK(t, vars, "audit", "verify", export); !strings.HasPrefix(out, "ok: ") || !strings.Contains(out, "3 decisions") ||
		!strings.Contains(out, "came from the export itself") {
		t.Errorf("verify printed %q", out)
	}
	keys, err := store.ReceiptKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	jwks := filepath.Join(dir, "jwks.json")
	b, _ := json.Marshal(keys)
	if err := os.WriteFile(jwks, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if out := runOK(t, vars, "audit", "verify", "--jwks", jwks, export); strings.Contains(out, "came from the export") {
		t.Errorf("verify with --jwks printed %q", out)
	}

	// One byte changed in the third line.
	data, err := os.ReadFile(export)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	third := bytes.Replace(lines[2], []byte("approve"), []byte("approvf"), 1)
	if bytes.Equal(third, lines[2]) {
		t.Fatalf("line 3 has no verdict to change: %s", lines[2])
	}
	lines[2] = third
	changed := filepath.Join(dir, "changed.jsonl")
	if err := os.WriteFile(changed, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runCmd(vars, "audit", "verify", "--jwks", jwks, changed)
	if err == nil || !strings.Contains(err.Error()+stderr, "line 3") {
		t.Errorf("verify of a changed export = %v %s, want a break at line 3", err, stderr)
	}

	// After a rotation, a new export verifies with both keys.
	newKey := strings.TrimSpace(runOK(t, vars, "admin", "rotate-receipt-key"))
	if newKey == "" || newKey == keys.Keys[0].Kid {
		t.Fatalf("rotate-receipt-key printed %q", newKey)
	}
	later := filepath.Join(dir, "later.jsonl")
	runOK(t, vars, "admin", "export-audit", "--email", "ops@example.com", "--out", later)
	if _, _, err := runCmd(vars, "audit", "verify", "--jwks", jwks, later); err == nil {
		t.Error("an export signed by the new key verifies with the old key alone")
	}
	both, _ := store.ReceiptKeys(ctx)
	b, _ = json.Marshal(both)
	if err := os.WriteFile(jwks, b, 0o600); err != nil {
		t.Fatal(err)
	}
	runOK(t, vars, "audit", "verify", "--jwks", jwks, later)
}

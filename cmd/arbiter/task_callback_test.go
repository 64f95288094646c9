package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestRun_TaskCreateCallbackURL creates a task with --callback-url: the
// server keeps it (the task's events are queued for it once it is decided
// by a person), and refuses one that is not https.
func TestRun_TaskCreateCallbackURL(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			getenv := taskServer(t, url)
			store := dbtest.OpenURL(t, url, db.Options{})
			created := decodeTask(t, runOK(t, getenv, "task", "create", "--prompt", "Refund?", "--verdict", "a",
				"--callback-url", "https://resume.invalid/run_1"))
			if _, stderr, err := runCmd(getenv, "task", "create", "--prompt", "Refund?", "--verdict", "a",
				"--callback-url", "http://example.com/x"); err == nil || !strings.Contains(stderr, "callback_url") {
				t.Errorf("an http callback: %v, %q; want the server's refusal", err, stderr)
			}
			// The server's worker sends the task to a person (no verifier);
			// the callback message waits for delivery.
			ctx := context.Background()
			deadline := time.Now().Add(15 * time.Second)
			for {
				claimed, err := store.ClaimWebhookMessages(ctx, "whd_test", 10, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				if len(claimed) > 0 {
					if m := claimed[0].Message; m.URL != "https://resume.invalid/run_1" || m.TaskID != created["id"] {
						t.Errorf("queued %+v", m)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatal("no callback message was queued")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

package main

import (
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// TestRun_TaskCreateCallbackURL creates a task with --callback-url: the
// server keeps it (the task's events are queued for it once it is decided
// by a person), and refuses one that is not https.
func TestRun_TaskCreateCallbackURL(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			getenv := taskServer(t, url)
			created := decodeTask(t, runOK(t, getenv, "task", "create", "--prompt", "Refund?", "--verdict", "a",
				"--callback-url", "https://resume.invalid/run_1"))
			if _, stderr, err := runCmd(getenv, "task", "create", "--prompt", "Refund?", "--verdict", "a",
				"--callback-url", "http://example.com/x"); err == nil || !strings.Contains(stderr, "callback_url") {
				t.Errorf("an http callback: %v, %q; want the server's refusal", err, stderr)
			}
			// The server's worker sends the task to a person (no verifier);
			// the callback message is queued in the same transaction. The
			// server's own deliverer may already be trying it (the name does
			// not resolve), so the test reads the queue rather than claiming.
			conn, query := rawStore(t, dialect, url), `SELECT url FROM webhook_messages WHERE task_id = $1 AND endpoint_id IS NULL`
			if dialect == db.SQLite {
				query = `SELECT url FROM webhook_messages WHERE task_id = ? AND endpoint_id IS NULL`
			}
			for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
				var queued string
				err := conn.QueryRow(query, created["id"]).Scan(&queued)
				if err == nil {
					if queued != "https://resume.invalid/run_1" {
						t.Errorf("queued a callback to %q", queued)
					}
					return
				}
				if !errors.Is(err, sql.ErrNoRows) {
					t.Fatal(err)
				}
				if time.Now().After(deadline) {
					t.Fatal("no callback message was queued")
				}
			}
		})
	}
}

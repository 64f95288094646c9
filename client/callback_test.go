package client_test

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/db"
)

// TestClient_CreateTask_CallbackURL: the client sends CallbackURL, and once
// the task is decided its event is queued for that URL, signed with the
// account's callback secret; a URL the server refuses is a 400.
func TestClient_CreateTask_CallbackURL(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		task, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve"},
			CallbackURL: "https://example.com/resume/run_1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "p", AllowedVerdicts: []string{"a"},
			CallbackURL: "http://example.com/x"}); !client.IsInvalid(err) {
			t.Errorf("an http:// callback: %v, want a 400", err)
		}
		if _, err := s.store.ClaimTasks(ctx, "w", 1, time.Minute); err != nil {
			t.Fatal(err)
		}
		now := arbiter.TimestampOf(time.Now())
		verdict, confidence := "approve", 0.95
		if err := s.store.FinishAgentAttempt(ctx, "w", task.ID, arbiter.AgentStep{Next: arbiter.StatusCompleted,
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence, StartedAt: now, FinishedAt: &now}}); err != nil {
			t.Fatal(err)
		}
		queued, err := s.store.ClaimWebhookMessages(ctx, "whd", 10, time.Minute)
		if err != nil || len(queued) != 1 {
			t.Fatalf("queued %d, %v", len(queued), err)
		}
		secret, _ := s.store.FindCallbackSecret(ctx, s.accountID)
		m := queued[0].Message
		if m.URL != "https://example.com/resume/run_1" || m.TaskID != task.ID || m.EventType != arbiter.EventTaskCompleted ||
			len(queued[0].Secrets) != 1 || queued[0].Secrets[0] != secret.Secret {
			t.Errorf("queued %+v with %d secrets", m, len(queued[0].Secrets))
		}
	})
}

package slack_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/slack"
	"github.com/arbiterhq/arbiter/slack/slackfake"
)

// TestSocketMode_ConnectAckDecideReconnect: against a fake Socket Mode
// server, an account connected in Socket Mode opens a socket, acks an
// interaction envelope and decides the task; after the server drops the
// socket it connects again, and a click on the new socket is answered
// too (with the outcome, the task being decided).
func TestSocketMode_ConnectAckDecideReconnect(t *testing.T) {
	ctx := context.Background()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			k, _ := secretbox.Parse(secretbox.NewKey())
			store := dbtest.Open(t, dialect, db.Options{Secrets: k})
			acct, err := store.FindOrCreateAccountByEmail(ctx, "owner@example.com")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.ConnectSlack(ctx, acct.ID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeSocket,
				BotToken: "xoxb-1", AppToken: "xapp-1", DefaultChannel: "#refunds"}, "T0FAKE", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			task, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
				ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "chat"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.ClaimTasks(ctx, "wrk", 10, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := store.FinishAgentAttempt(ctx, "wrk", task.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent},
				Next: arbiter.StatusHumanNeeded}); err != nil {
				t.Fatal(err)
			}

			fake := slackfake.New(t)
			fake.AddUser(slackfake.User{ID: "UOWNER", Email: "owner@example.com", EmailConfirmed: true})
			client := slack.NewClient(fake.URL, nil)
			logger := slog.New(slog.DiscardHandler)
			in := &slack.Interactions{Store: store, Slack: client, Logger: logger}
			sm := &slack.SocketMode{Store: store, Slack: client, In: in, Logger: logger, Retry: 50 * time.Millisecond}
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); sm.Run(runCtx) }()
			t.Cleanup(func() { cancel(); <-done; in.Wait() })

			click := func(envelope string) {
				fake.SendInteraction(t, envelope, map[string]any{
					"type": "block_actions", "team": map[string]any{"id": "T0FAKE"}, "user": map[string]any{"id": "UOWNER"},
					"response_url": fake.ResponseURL,
					"actions": []map[string]any{{"type": "button", "block_id": "decide", "action_id": slack.ActionDecide + "_1",
						"value": slack.EncodeValue(task.ID, "reject")}},
				})
				fake.WaitAck(t, envelope)
			}
			fake.WaitSocket(t, 1)
			click("env-1")
			answers := fake.WaitCalls(t, "response", 1)
			if got := text(answers[0].Body); got != "You decided “reject”." {
				t.Errorf("answered %q", got)
			}
			decided, err := store.FindTaskByID(ctx, acct.ID, task.ID)
			if err != nil || decided.Status != arbiter.StatusCompleted || *decided.FinalVerdict != "reject" {
				t.Fatalf("after the click: %+v, %v", decided, err)
			}

			fake.DropSocket()
			fake.WaitSocket(t, 2)
			click("env-2")
			answers = fake.WaitCalls(t, "response", 2)
			if got := text(answers[1].Body); got != "This task already ended: "+slack.OutcomeLine(decided) {
				t.Errorf("after reconnecting, answered %q", got)
			}
			if n := len(fake.Calls("apps.connections.open")); n < 2 {
				t.Errorf("apps.connections.open called %d times, want a new socket after the drop", n)
			}
		})
	}
}

func text(body string) string {
	var m struct{ Text string }
	json.Unmarshal([]byte(body), &m)
	return m.Text
}

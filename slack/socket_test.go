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

			owner, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail,
				Subject: "owner@example.com", Email: "owner@example.com", EmailVerified: true})
			if err != nil {
				t.Fatal(err)
			}
			token, err := store.OfferChatLink(ctx, acct.ID, arbiter.ChatUser{Provider: arbiter.ChatSlack, Workspace: "T0FAKE",
				UserID: "UOWNER", Email: owner.Email})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.LinkChatUser(ctx, token, arbiter.Actor{Email: owner.Email, PersonID: owner.ID}); err != nil {
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
						"value": slack.EncodeValue(task.ID, "", "reject")}},
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

// TestReconnectDelay: the wait doubles with each failure in a row up to
// the cap, and is drawn from the upper half of that doubling, so that
// sockets dropped together spread out.
func TestReconnectDelay(t *testing.T) {
	const retry, most = time.Second, time.Minute
	for _, c := range []struct {
		failures int
		u        float64
		want     time.Duration
	}{
		{0, 0, 500 * time.Millisecond},
		{0, 0.999999, retry - time.Microsecond/2},
		{1, 0, time.Second},
		{1, 0.5, 1500 * time.Millisecond},
		{3, 0, 4 * time.Second},
		{5, 1 - 1e-9, 32*time.Second - 16*time.Nanosecond},
		{6, 0, 30 * time.Second}, // 64 s capped at a minute
		{6, 0.5, 45 * time.Second},
		{40, 0, 30 * time.Second}, // no overflow past the cap
		{1000, 0.25, 37500 * time.Millisecond},
	} {
		got := slack.ReconnectDelay(c.failures, retry, most, c.u)
		if diff := got - c.want; diff < -time.Microsecond || diff > time.Microsecond {
			t.Errorf("ReconnectDelay(%d, u=%v) = %v, want %v", c.failures, c.u, got, c.want)
		}
	}
}

// TestSocketMode_BacksOffWithJitter: while Slack refuses to open a
// socket (a revoked app token, a failing Slack), the connections are
// retried after waits that double with each failure, not every Retry;
// once Slack opens one, the socket connects.
func TestSocketMode_BacksOffWithJitter(t *testing.T) {
	ctx := context.Background()
	const retry, failures = 20 * time.Millisecond, 6
	fake := slackfake.New(t)
	for i := range failures {
		code := "invalid_auth" // the library gives up on it at once
		if i%2 == 1 {
			code = "internal_error" // the library would retry it itself, without jitter
		}
		fake.Fail("apps.connections.open", code)
	}
	client := slack.NewClient(fake.URL, nil)
	sm := &slack.SocketMode{Slack: client, In: &slack.Interactions{Slack: client}, Logger: slog.New(slog.DiscardHandler),
		Retry: retry, MaxRetry: time.Minute}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sm.RunConnection(runCtx, &arbiter.SlackConnection{AccountID: "acct_x", BotToken: "xoxb-1", AppToken: "xapp-1", TeamID: "T0FAKE"})
	}()
	t.Cleanup(func() { cancel(); <-done })
	fake.WaitSocket(t, 1)
	calls := fake.Calls("apps.connections.open")
	if len(calls) < failures+1 {
		t.Fatalf("%d calls of apps.connections.open, want %d", len(calls), failures+1)
	}
	for i := 1; i <= failures; i++ {
		least := (retry << (i - 1)) / 2
		gap := calls[i].At.Sub(calls[i-1].At)
		t.Logf("attempt %d after %v (at least %v)", i+1, gap, least)
		if gap < least {
			t.Errorf("attempt %d came %v after the failure before it, want at least %v", i+1, gap, least)
		}
	}
}

package db_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
)

// outboxStores runs fn on each store with an account whose webhook
// endpoint takes every event and whose Slack is connected, a task of it,
// and a third outbox registered after the store's own. The stores read
// the clock c, or the system's when c is nil.
func outboxStores(t *testing.T, c *clock, fn func(t *testing.T, d *db.DB, acct *arbiter.Account, task *arbiter.Task,
	e *arbiter.WebhookEndpoint, third *db.RecordingOutbox)) {
	t.Helper()
	key, err := secretbox.Parse(secretbox.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	opts := db.Options{Secrets: key}
	if c != nil {
		opts.Now = c.Now
	}
	dbtest.Each(t, opts, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		e, err := d.CreateWebhookEndpoint(ctx, acct.ID, arbiter.WebhookEndpointInput{URL: "https://hooks.example.com/arbiter"}, false,
			arbiter.Actor{Email: arbiter.OperatorActor})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.ConnectSlack(ctx, acct.ID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP,
			BotToken: "xoxb-test", SigningSecret: "0123456789abcdef0123", DefaultChannel: "#refunds"}, "T0FAKE",
			arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
			t.Fatal(err)
		}
		third := &db.RecordingOutbox{}
		d.RegisterOutbox(third)
		task, err := d.CreateTask(ctx, acct.ID, taskCreate("refund 12 EUR?"))
		if err != nil {
			t.Fatal(err)
		}
		fn(t, d, acct, task, e, third)
	})
}

// webhookEvents returns the event types of the endpoint's messages, oldest
// first.
func webhookEvents(t *testing.T, d *db.DB, accountID, endpointID string) []string {
	t.Helper()
	msgs, err := d.ListWebhookMessages(ctx, accountID, endpointID, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, m := range slices.Backward(msgs) {
		types = append(types, m.EventType)
	}
	return types
}

// slackKinds returns the kinds of the Slack messages due, claimed and
// released again.
func slackKinds(t *testing.T, d *db.DB) []string {
	t.Helper()
	claimed, err := d.ClaimSlackMessages(ctx, "probe", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, dl := range claimed {
		kinds = append(kinds, dl.Message.Kind)
	}
	slices.Sort(kinds)
	if err := d.Exec(ctx, `UPDATE slack_messages SET lease_owner = NULL, lease_expires_at = NULL`); err != nil {
		t.Fatal(err)
	}
	return kinds
}

// outboxRows is what the webhook outbox holds for an endpoint (event
// types, oldest first) and what the Slack outbox holds due (kinds).
type outboxRows struct{ webhooks, slack []string }

// rowsOf returns what the outboxes hold for the account's endpoint.
func rowsOf(t *testing.T, d *db.DB, accountID, endpointID string) outboxRows {
	t.Helper()
	return outboxRows{webhookEvents(t, d, accountID, endpointID), slackKinds(t, d)}
}

// keptNothing fails the test if a transition that failed left a webhook
// or Slack message: the outboxes hold what they held before it.
func keptNothing(t *testing.T, d *db.DB, accountID, endpointID string, before outboxRows) {
	t.Helper()
	got := rowsOf(t, d, accountID, endpointID)
	if !slices.Equal(got.webhooks, before.webhooks) {
		t.Errorf("webhook messages %v after the failure, %v before", got.webhooks, before.webhooks)
	}
	if !slices.Equal(got.slack, before.slack) {
		t.Errorf("Slack messages %v after the failure, %v before", got.slack, before.slack)
	}
}

// drained empties a wakeup channel.
func drained(c <-chan struct{}) <-chan struct{} {
	select {
	case <-c:
	default:
	}
	return c
}

// TestPublish_ReachesEveryRegisteredOutbox: a transition's events reach the
// webhook and Slack outboxes and one registered after them, in its
// transaction, and each outbox that queued is woken after the commit.
func TestPublish_ReachesEveryRegisteredOutbox(t *testing.T) {
	t.Parallel()
	// The store's clock moves a millisecond after each transition, so
	// that the outbox's rows, listed oldest first, are not made in one
	// millisecond and listed in the order of their random ids.
	c := &clock{now: time.Now().Truncate(time.Millisecond)}
	outboxStores(t, c, func(t *testing.T, d *db.DB, acct *arbiter.Account, task *arbiter.Task, e *arbiter.WebhookEndpoint, third *db.RecordingOutbox) {
		webhooks, slack := drained(d.WebhooksQueued()), drained(d.SlackMessagesQueued())
		toHuman(t, d)
		c.Add(time.Millisecond)
		woken(t, webhooks, "of the webhook deliverer")
		woken(t, slack, "of the Slack deliverer")
		decided, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"})
		if err != nil || decided.Status != arbiter.StatusCompleted {
			t.Fatalf("decide: %+v %v", decided, err)
		}
		want := []string{arbiter.EventTaskHumanNeeded, arbiter.EventTaskCompleted}
		var got []string
		for _, ev := range third.Events() {
			if ev.TaskID != task.ID || ev.AccountID != acct.ID {
				t.Errorf("an event of another task: %+v", ev)
			}
			got = append(got, ev.Type)
		}
		if !slices.Equal(got, want) {
			t.Errorf("the third outbox got %v, want %v", got, want)
		}
		if got := webhookEvents(t, d, acct.ID, e.ID); !slices.Equal(got, want) {
			t.Errorf("webhook messages %v, want %v", got, want)
		}
		if got := slackKinds(t, d); !slices.Equal(got, []string{arbiter.SlackPost, arbiter.SlackUpdate}) {
			t.Errorf("Slack messages %v, want a post and an update", got)
		}
	})
}

// TestPublish_AnOutboxThatFailsRollsEveryOutboxBack: when one outbox
// refuses a transition's events, the transition fails whole: the task does
// not move, no outbox keeps a message of it, no waiter and no deliverer is
// woken; once it accepts, the same transition goes through.
func TestPublish_AnOutboxThatFailsRollsEveryOutboxBack(t *testing.T) {
	t.Parallel()
	// The store's clock moves a millisecond after each transition, so
	// that the outbox's rows, listed oldest first, are not made in one
	// millisecond and listed in the order of their random ids.
	c := &clock{now: time.Now().Truncate(time.Millisecond)}
	outboxStores(t, c, func(t *testing.T, d *db.DB, acct *arbiter.Account, task *arbiter.Task, e *arbiter.WebhookEndpoint, third *db.RecordingOutbox) {
		toHuman(t, d)
		c.Add(time.Millisecond)
		before := rowsOf(t, d, acct.ID, e.ID)
		wake, stop := d.WatchTask(task.ID)
		defer stop()
		listening(t, d, wake)
		webhooks, slack := drained(d.WebhooksQueued()), drained(d.SlackMessagesQueued())

		refused := errors.New("the third outbox refuses")
		third.SetFail(refused)
		dec := arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}
		if _, err := d.DecideTask(ctx, acct.ID, task.ID, dec); !errors.Is(err, refused) {
			t.Fatalf("decide with a failing outbox: %v", err)
		}
		if got := mustFind(t, d, acct.ID, task.ID); got.Status != arbiter.StatusHumanNeeded || len(got.Attempts) != 1 {
			t.Errorf("the task moved: %s with %d attempts", got.Status, len(got.Attempts))
		}
		keptNothing(t, d, acct.ID, e.ID, before)
		notWoken(t, wake, "of the task's waiter")
		notWoken(t, webhooks, "of the webhook deliverer")
		notWoken(t, slack, "of the Slack deliverer")

		third.SetFail(nil)
		if _, err := d.DecideTask(ctx, acct.ID, task.ID, dec); err != nil {
			t.Fatal(err)
		}
		woken(t, wake, "of the task's waiter")
		if got := webhookEvents(t, d, acct.ID, e.ID); !slices.Equal(got, append(before.webhooks, arbiter.EventTaskCompleted)) {
			t.Errorf("webhook messages %v once it accepts", got)
		}
	})
}

// TestPublish_ARungReachesEveryOutboxOrNone: an escalation rung's
// transition reaches all four registered outboxes in its transaction (the
// webhook's task.escalated, Slack's question asked again, the rung's mail
// to the account's owner, the third outbox's event) and wakes each
// deliverer that queued; while the third outbox refuses, the rung does
// not fire and no channel keeps a row of it.
func TestPublish_ARungReachesEveryOutboxOrNone(t *testing.T) {
	t.Parallel()
	c := newClock()
	outboxStores(t, c, func(t *testing.T, d *db.DB, acct *arbiter.Account, _ *arbiter.Task, e *arbiter.WebhookEndpoint, third *db.RecordingOutbox) {
		in := taskCreate("Refund 900 EUR to Ada?")
		in.Alerts = arbiter.Alerts{Escalation: []arbiter.Rung{{After: arbiter.AlertWait{After: time.Minute}, To: "role:owner"}}}
		task, err := d.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		toHuman(t, d)
		before, seen := rowsOf(t, d, acct.ID, e.ID), len(third.Events())
		webhooks, slack, mail := drained(d.WebhooksQueued()), drained(d.SlackMessagesQueued()), drained(d.MailQueued())
		c.Add(time.Minute)

		refused := errors.New("the third outbox refuses")
		third.SetFail(refused)
		if _, err := d.FireDueAlerts(ctx, 10); !errors.Is(err, refused) {
			t.Fatalf("fire with a failing outbox: %v", err)
		}
		if got := mustFind(t, d, acct.ID, task.ID); got.Escalation != nil {
			t.Errorf("the task was escalated: %+v", got.Escalation)
		}
		keptNothing(t, d, acct.ID, e.ID, before)
		noneDue(t, d, "after the failure")
		notWoken(t, webhooks, "of the webhook deliverer")
		notWoken(t, slack, "of the Slack deliverer")
		notWoken(t, mail, "of the mail deliverer")

		third.SetFail(nil)
		if n, err := d.FireDueAlerts(ctx, 10); err != nil || n != 1 {
			t.Fatalf("fired %d: %v", n, err)
		}
		woken(t, webhooks, "of the webhook deliverer")
		woken(t, slack, "of the Slack deliverer")
		woken(t, mail, "of the mail deliverer")
		if got := mustFind(t, d, acct.ID, task.ID); got.Escalation == nil || got.Escalation.Rung != 1 {
			t.Errorf("the task's escalation: %+v", got.Escalation)
		}
		if got := third.Events()[seen:]; len(got) != 1 || got[0].Type != arbiter.EventTaskEscalated || got[0].TaskID != task.ID {
			t.Errorf("the third outbox got %+v", got)
		}
		if got := webhookEvents(t, d, acct.ID, e.ID); !slices.Equal(got, append(before.webhooks, arbiter.EventTaskEscalated)) {
			t.Errorf("webhook messages %v, %v before", got, before.webhooks)
		}
		want := append(slices.Clone(before.slack), arbiter.SlackPost)
		slices.Sort(want)
		if got := slackKinds(t, d); !slices.Equal(got, want) {
			t.Errorf("Slack messages %v, want %v", got, want)
		}
		if mails := dbtest.TakeMail(t, d); len(mails) != 1 || mails[0].Kind != arbiter.MailEscalation || mails[0].To != "owner@example.com" ||
			mails[0].TaskID != task.ID {
			t.Errorf("mails %+v, want the rung's to the owner", mails)
		}
	})
}

// TestPublish_OutboxesReadBeforeTheReceiptAndWriteAfter: an outbox plans
// a decision's messages before the transaction signs its receipt (and so
// before it locks the account's receipt chain) and writes them after, the
// messages carrying the receipt; the agent's decision and a person's
// alike.
func TestPublish_OutboxesReadBeforeTheReceiptAndWriteAfter(t *testing.T) {
	t.Parallel()
	outboxStores(t, nil, func(t *testing.T, d *db.DB, acct *arbiter.Account, task *arbiter.Task, e *arbiter.WebhookEndpoint, third *db.RecordingOutbox) {
		byAgent, err := d.CreateTask(ctx, acct.ID, taskCreate("refund 13 EUR?"))
		if err != nil {
			t.Fatal(err)
		}
		before := len(third.Steps())
		claimAndAnswer(t, d, byAgent.ID, arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 0.95, Model: "m2"})
		decided, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"})
		if err != nil {
			t.Fatal(err)
		}
		// The claim's older task went to a person (no receipt), then the
		// agent decided the other, then the person the first.
		want := []db.OutboxStep{{Step: "plan"}, {Step: "write"}, {Step: "plan"}, {Step: "write", Receipts: 1}, {Step: "plan"}, {Step: "write", Receipts: 1}}
		if got := third.Steps()[before:]; !slices.Equal(got, want) {
			t.Fatalf("the outbox's steps %v, want %v: plan before the receipt, write after", got, want)
		}
		msgs, err := d.ListWebhookMessages(ctx, acct.ID, e.ID, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		receipts := map[string]bool{}
		for _, m := range msgs {
			if m.EventType != arbiter.EventTaskCompleted {
				continue
			}
			var p struct {
				Data struct {
					ID      string `json:"id"`
					Receipt string `json:"receipt"`
				} `json:"data"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Data.Receipt == "" {
				t.Errorf("the completed message of %s carries no receipt", p.Data.ID)
			}
			receipts[p.Data.Receipt] = true
		}
		if !receipts[decided.Receipt] || len(receipts) != 2 {
			t.Errorf("the completed messages carry the receipts %v; want the agent's and %s", receipts, decided.Receipt)
		}
	})
}

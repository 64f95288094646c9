package worker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
	"github.com/arbiterhq/arbiter/slack/slackfake"
	"github.com/arbiterhq/arbiter/worker"
)

// killableStore is a deliverer's store in a process that can be killed:
// once killed is closed, nothing the process asks of the store reaches
// it, as after a kill -9.
type killableStore struct {
	arbiter.SlackDeliveryService
	killed <-chan struct{}
}

var errKilled = errors.New("the process was killed")

func (k *killableStore) dead() bool {
	select {
	case <-k.killed:
		return true
	default:
		return false
	}
}

func (k *killableStore) ClaimSlackMessages(ctx context.Context, owner string, max int, lease time.Duration) ([]*arbiter.SlackDelivery, error) {
	if k.dead() {
		return nil, errKilled
	}
	return k.SlackDeliveryService.ClaimSlackMessages(ctx, owner, max, lease)
}

func (k *killableStore) BeginSlackAttempt(ctx context.Context, owner, id string, lease time.Duration) (time.Duration, bool, error) {
	if k.dead() {
		return 0, false, errKilled
	}
	return k.SlackDeliveryService.BeginSlackAttempt(ctx, owner, id, lease)
}

func (k *killableStore) RecordSlackAttempt(ctx context.Context, owner, id string, r arbiter.SlackResult) error {
	if k.dead() {
		return errKilled
	}
	return k.SlackDeliveryService.RecordSlackAttempt(ctx, owner, id, r)
}

// TestSlackDeliverer_KillBetweenPostAndRecord: a deliverer killed after
// Slack took a post and before it recorded the post's ts leaves the
// question in Slack with nothing recorded. The next deliverer, once the
// dead one's lease lapsed, finds the post in the channel's history by its
// metadata instead of posting it again, and when the task ends the one
// copy is updated to the outcome, without buttons: whether the task
// ended after the recovery or before it (then the post is not asked
// again, but its copy must not keep live buttons).
func TestSlackDeliverer_KillBetweenPostAndRecord(t *testing.T) {
	const lease = 500 * time.Millisecond
	for _, dialect := range dbtest.Dialects {
		for _, endsFirst := range []bool{false, true} {
			name := dialect + "/TaskEndsAfterRecovery"
			if endsFirst {
				name = dialect + "/TaskEndsWhileDead"
			}
			t.Run(name, func(t *testing.T) {
				store, accountID := slackStore(t, dialect)
				fake := slackfake.New(t)
				killed := make(chan struct{})
				fake.After("chat.postMessage", func() { close(killed) })
				stopDead := startSlackWith(t, store, fake, worker.SlackConfig{Lease: lease,
					Store: &killableStore{SlackDeliveryService: store, killed: killed}})
				taskID := newSlackTask(t, store, accountID, arbiter.TaskCreate{})
				agentStep(t, store, taskID, arbiter.StatusHumanNeeded)
				<-killed
				fake.WaitCalls(t, "chat.postMessage", 1)
				stopDead()
				channel := slackfake.ChannelID("#refunds")
				if msgs := fake.Messages(channel); len(msgs) != 1 {
					t.Fatalf("the killed post left %d messages in Slack, want one", len(msgs))
				} else if !strings.Contains(msgs[0].Metadata, taskID) {
					t.Errorf("the post's metadata %q does not name the task", msgs[0].Metadata)
				}

				decide := func() {
					if _, err := store.DecideTask(ctx, accountID, taskID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
						t.Fatal(err)
					}
				}
				if endsFirst {
					decide()
				}
				startSlackWith(t, store, fake, worker.SlackConfig{Lease: lease})
				if !endsFirst {
					// The new deliverer either looks for the post or posts again.
					fake.WaitAny(t, 2, "chat.postMessage", "conversations.history")
					decide()
				}
				update := fake.WaitCalls(t, "chat.update", 1)[0]
				msgs := fake.Messages(channel)
				if len(msgs) != 1 {
					t.Fatalf("%d messages in the channel, want the one post, found and not posted again", len(msgs))
				}
				if update.Form.Get("ts") != msgs[0].TS || msgs[0].Updates != 1 {
					t.Errorf("updated ts %s (%d updates), want the killed post's %s once", update.Form.Get("ts"), msgs[0].Updates, msgs[0].TS)
				}
				if raw := blocksOf(t, update); !strings.Contains(raw, "✅ reject — r@example.com") || strings.Contains(raw, `"actions"`) {
					t.Errorf("the copy does not show the outcome without buttons:\n%s", raw)
				}
				if n := len(fake.Calls("chat.postMessage")); n != 1 {
					t.Errorf("chat.postMessage called %d times, want once", n)
				}
			})
		}
	}
}

// TestSlackDeliverer_TwoProcessesKeepOnePace: two deliverers in two
// processes (two stores on one database) sending eight questions to one
// channel keep its pace between them: each posted once, no two posts
// closer than the pace.
func TestSlackDeliverer_TwoProcessesKeepOnePace(t *testing.T) {
	const pace, n = 150 * time.Millisecond, 8
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			k, err := secretbox.Parse(secretbox.NewKey())
			if err != nil {
				t.Fatal(err)
			}
			url := dbtest.URL(t, dialect)
			one := dbtest.OpenURL(t, url, db.Options{Secrets: k})
			two := dbtest.OpenURL(t, url, db.Options{Secrets: k})
			acct, err := one.FindOrCreateAccountByEmail(ctx, "slack@example.com")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := one.ConnectSlack(ctx, acct.ID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP,
				BotToken: "xoxb-test", SigningSecret: "0123456789abcdef0123", DefaultChannel: "#refunds"}, "T0FAKE",
				arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for range n {
				ids = append(ids, newSlackTask(t, one, acct.ID, arbiter.TaskCreate{}))
			}
			for _, id := range ids {
				agentStep(t, one, id, arbiter.StatusHumanNeeded)
			}
			fake := slackfake.New(t)
			startSlackWith(t, one, fake, worker.SlackConfig{Pace: pace, Concurrency: n})
			startSlackWith(t, two, fake, worker.SlackConfig{Pace: pace, Concurrency: n})
			posts := fake.WaitCalls(t, "chat.postMessage", n)
			for i := 1; i < len(posts); i++ {
				if gap := posts[i].At.Sub(posts[i-1].At); gap < pace {
					t.Errorf("posts %d and %d to one channel %v apart, want at least %v", i-1, i, gap, pace)
				}
			}
			seen := map[string]int{}
			for _, p := range posts {
				for _, id := range ids {
					if strings.Contains(blocksOf(t, p), `"value":"`+id+`|approve"`) {
						seen[id]++
					}
				}
			}
			for _, id := range ids {
				if seen[id] != 1 {
					t.Errorf("task %s posted %d times, want once", id, seen[id])
				}
			}
		})
	}
}

// TestSlackDeliverer_UpdatesPacedByTheirChannel: the update of a copy in
// one channel goes at once though the account's channel is told to wait
// a minute (a 429): it is paced by the channel it goes to.
func TestSlackDeliverer_UpdatesPacedByTheirChannel(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store, accountID := slackStore(t, dialect)
			fake := slackfake.New(t)
			startSlack(t, store, fake, 0)
			in, err := arbiter.ParseTaskCreate([]byte(`{"prompt":"EU refund?","allowed_verdicts":["approve","reject"],
				"notify":["slack:#refunds-eu"]}`))
			if err != nil {
				t.Fatal(err)
			}
			eu := newSlackTask(t, store, accountID, in)
			agentStep(t, store, eu, arbiter.StatusHumanNeeded)
			fake.WaitCalls(t, "chat.postMessage", 1)

			fake.RateLimit("chat.postMessage", time.Minute)
			other := newSlackTask(t, store, accountID, arbiter.TaskCreate{})
			agentStep(t, store, other, arbiter.StatusHumanNeeded)
			fake.WaitStatus(t, "chat.postMessage", 429, 1)

			if _, err := store.DecideTask(ctx, accountID, eu, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
			update := fake.WaitCalls(t, "chat.update", 1)[0]
			if got := update.Form.Get("channel"); got != slackfake.ChannelID("#refunds-eu") {
				t.Errorf("updated %s, want the copy in #refunds-eu", got)
			}
		})
	}
}

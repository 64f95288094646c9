package worker_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/slack/slackfake"
	"github.com/arbiterhq/arbiter/worker"
)

// webhookRecords is a store whose records of webhook attempts
// dbtest.LostRecords fails.
type webhookRecords struct {
	*db.DB
	*dbtest.LostRecords
}

func (s webhookRecords) RecordWebhookAttempts(ctx context.Context, owner string, records []arbiter.WebhookRecord) (out []arbiter.WebhookRecorded, err error) {
	if s.Record(func() error {
		if out, err = s.DB.RecordWebhookAttempts(ctx, owner, records); err == nil {
			return out[0].Err
		}
		return err
	}) {
		return nil, dbtest.ErrUnreachable
	}
	return out, err
}

// TestDeliverer_RecordsAgainWhileTheStoreIsUnreachable: a delivery whose
// record found the store unreachable (a failover) is recorded once the
// store answers again; a record that was made with its answer lost is
// sent again and changes nothing. The receiver gets the message once and
// the message is delivered with one attempt. The record used to be given
// up: the message stayed leased, to be sent again when the lease ran out.
func TestDeliverer_RecordsAgainWhileTheStoreIsUnreachable(t *testing.T) {
	t.Parallel()
	for _, c := range dbtest.RecordLosses {
		t.Run(c.Name, func(t *testing.T) {
			dbtest.Each(t, db.Options{}, func(t *testing.T, store *db.DB) {
				rcv := newReceiver(t, nil)
				accountID, taskID := createTask(t, store, "failover@example.com")
				e := newEndpoint(t, store, accountID, rcv.srv.URL)
				records := c.Records()
				stop := startDeliverer(t, store, func(cfg *worker.WebhookConfig) {
					cfg.Store = webhookRecords{DB: store, LostRecords: records}
					cfg.Lease = time.Hour // a lost record would wait for it
				})
				agentStep(t, store, taskID, arbiter.StatusHumanNeeded)
				id := rcv.waitDeliveries(t, 1)[0].header.Get("webhook-id")
				m, attempts := waitMessage(t, store, accountID, e.ID, id, func(m *arbiter.WebhookMessage, _ []arbiter.WebhookAttempt) bool {
					return m.Status == arbiter.WebhookDelivered
				})
				waitUntil(t, "the records", func() bool { return len(records.Answers()) == c.Reached() })
				// Stopping releases what the deliverer still holds: a
				// message left unrecorded would be due again.
				stop()
				c.Check(t, records)
				if got := rcv.deliveries(); len(got) != 1 || m.Attempts != 1 || len(attempts) != 1 {
					t.Errorf("the receiver got %d deliveries; the message is %s after %d attempts (%d logged), want one delivery, delivered",
						len(got), m.Status, m.Attempts, len(attempts))
				}
			})
		})
	}
}

// slackRecords is a store whose records of Slack attempts
// dbtest.LostRecords fails.
type slackRecords struct {
	*db.DB
	*dbtest.LostRecords
}

func (s slackRecords) RecordSlackAttempt(ctx context.Context, owner, id string, r arbiter.SlackResult) (err error) {
	if s.Record(func() error {
		err = s.DB.RecordSlackAttempt(ctx, owner, id, r)
		return err
	}) {
		return dbtest.ErrUnreachable
	}
	return err
}

// TestSlackDeliverer_RecordsAgainWhileTheStoreIsUnreachable: a post whose
// record found the store unreachable (a failover) is recorded once the
// store answers again, or, made with its answer lost, is sent again and
// changes nothing: Slack holds the question once, and the decision
// updates that one copy, which it can only when the post's record holds
// where it went. The record used to be given up: the message stayed
// leased, to be posted again (or looked for) when the lease ran out, and
// the channel's turn held until then.
func TestSlackDeliverer_RecordsAgainWhileTheStoreIsUnreachable(t *testing.T) {
	t.Parallel()
	for _, c := range dbtest.RecordLosses {
		for _, dialect := range dbtest.Dialects {
			t.Run(c.Name+"/"+dialect, func(t *testing.T) {
				store, accountID := slackStore(t, dialect)
				fake := slackfake.New(t)
				records := c.Records()
				startSlackWith(t, store, fake, worker.SlackConfig{Store: slackRecords{DB: store, LostRecords: records},
					Lease: time.Hour, Logger: slog.New(slog.DiscardHandler)}) // a lost record would wait for the lease
				taskID := newSlackTask(t, store, accountID, arbiter.TaskCreate{})
				agentStep(t, store, taskID, arbiter.StatusHumanNeeded)
				fake.WaitCalls(t, "chat.postMessage", 1)
				waitUntil(t, "the post's records", func() bool { return len(records.Answers()) == c.Reached() })
				c.Check(t, records)

				if _, err := store.DecideTask(ctx, accountID, taskID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
					t.Fatal(err)
				}
				update := fake.WaitCalls(t, "chat.update", 1)[0]
				msgs := fake.Messages(slackfake.ChannelID("#refunds"))
				if posts := fake.Calls("chat.postMessage"); len(posts) != 1 || len(msgs) != 1 || update.Form.Get("ts") != msgs[0].TS {
					t.Errorf("%d posts, %d messages in the channel, the update to %q; want the one post, updated",
						len(posts), len(msgs), update.Form.Get("ts"))
				}
			})
		}
	}
}

// mailRecords is a store whose records of mail attempts
// dbtest.LostRecords fails.
type mailRecords struct {
	*db.DB
	*dbtest.LostRecords
}

func (s mailRecords) RecordMailAttempts(ctx context.Context, owner string, records []arbiter.MailRecord) (out []error, err error) {
	if s.Record(func() error {
		if out, err = s.DB.RecordMailAttempts(ctx, owner, records); err == nil {
			return out[0]
		}
		return err
	}) {
		return nil, dbtest.ErrUnreachable
	}
	return out, err
}

// countingMailer counts the mails it is given to send.
type countingMailer struct{ sent atomic.Int32 }

func (m *countingMailer) Send(context.Context, string, string, string) error {
	m.sent.Add(1)
	return nil
}

// TestMailDeliverer_RecordsAgainWhileTheStoreIsUnreachable: a mail whose
// record found the store unreachable (a failover) is recorded sent once
// the store answers again, or, made with its answer lost, is sent again
// and changes nothing: the server is given it once, and nothing is left
// to send, even once the deliverer has stopped and released what it
// held. The record used to be given up: the mail stayed leased, to be
// sent again when the lease ran out.
func TestMailDeliverer_RecordsAgainWhileTheStoreIsUnreachable(t *testing.T) {
	t.Parallel()
	eachLostMailRecord(t, func(t *testing.T, deliverer *worker.MailDeliverer, c dbtest.RecordLoss, records *dbtest.LostRecords) {
		stop := runUntilStopped(t, "mail deliverer", 30*time.Second, deliverer.Run)
		waitUntil(t, "the mail's records", func() bool { return len(records.Answers()) == c.Reached() })
		// Stopping releases what the deliverer still holds: a mail left
		// unrecorded would be due again.
		stop()
	})
}

// TestMailDeliverer_DeliverDueRecordsAgainWhileTheStoreIsUnreachable:
// DeliverDue, the round without the claim loop, sends its records again
// as the claim loop does: the round ends without an error, the server is
// given the mail once, and nothing is left to send.
func TestMailDeliverer_DeliverDueRecordsAgainWhileTheStoreIsUnreachable(t *testing.T) {
	t.Parallel()
	eachLostMailRecord(t, func(t *testing.T, deliverer *worker.MailDeliverer, _ dbtest.RecordLoss, _ *dbtest.LostRecords) {
		if _, err := deliverer.DeliverDue(t.Context()); err != nil {
			t.Fatalf("DeliverDue: %v", err)
		}
	})
}

// eachLostMailRecord runs deliver on both stores, for each way a record is
// lost (dbtest.RecordLosses), with a due reminder's mail and a deliverer
// whose records are lost that way and whose lease outlasts the test; once
// deliver returns, the records must have gone as the way says, the server
// been given the mail once, and nothing be left to send.
func eachLostMailRecord(t *testing.T, deliver func(t *testing.T, deliverer *worker.MailDeliverer, c dbtest.RecordLoss, records *dbtest.LostRecords)) {
	for _, c := range dbtest.RecordLosses {
		t.Run(c.Name, func(t *testing.T) {
			clock := &movable{t: time.Now().Truncate(time.Millisecond)}
			dbtest.Each(t, db.Options{Now: clock.Now}, func(t *testing.T, store *db.DB) {
				dueReminder(t, store, clock)
				records := c.Records()
				mailer := &countingMailer{}
				deliver(t, worker.NewMailDeliverer(worker.MailConfig{Store: mailRecords{DB: store, LostRecords: records}, Mail: mailer,
					Poll: 10 * time.Millisecond, Lease: time.Hour, Logger: slog.New(slog.DiscardHandler)}), c, records)
				c.Check(t, records)
				if left := dbtest.TakeMail(t, store); mailer.sent.Load() != 1 || len(left) != 0 {
					t.Errorf("the mail was sent %d times and %d mails are left to send, want one sent and none left",
						mailer.sent.Load(), len(left))
				}
			})
		})
	}
}

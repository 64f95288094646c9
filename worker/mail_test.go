package worker_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/mail"
	"github.com/arbiterhq/arbiter/mail/mailtest"
	"github.com/arbiterhq/arbiter/worker"
)

// TestMailDeliverer_AnSMTPServerThatRefusesDelaysMailAndLosesNone runs the
// mail deliverer's claim loop against a real SMTP server that says to try
// later: the reminder is not lost, and once the server accepts again and
// the retry's time has come it arrives, once.
func TestMailDeliverer_AnSMTPServerThatRefusesDelaysMailAndLosesNone(t *testing.T) {
	t.Parallel()
	clock := &movable{t: time.Now().Truncate(time.Millisecond)}
	dbtest.Each(t, db.Options{Now: clock.Now}, func(t *testing.T, store *db.DB) {
		sink := mailtest.NewSink(t)
		mailer, err := mail.NewSMTP(sink.URL(), "arbiter@example.com")
		if err != nil {
			t.Fatal(err)
		}
		dueReminder(t, store, clock)

		sink.Refuse(451)
		logs := &testutil.SyncBuffer{}
		deliverer := worker.NewMailDeliverer(worker.MailConfig{Store: store, Mail: mailer, Permanent: mail.Permanent,
			Links: arbiter.MailLinks{QueueURL: "https://review.example.com/review"}, Poll: 10 * time.Millisecond,
			Jitter: func() float64 { return 0 }, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		stop := runUntilStopped(t, "mail deliverer", 30*time.Second, deliverer.Run)

		// The refused attempt is recorded, its retry scheduled by the
		// store's clock, before the clock moves.
		waitUntil(t, "the refused attempt's record", func() bool { return strings.Contains(logs.String(), "it will be tried again") })
		sink.Refuse(0)
		clock.Add(arbiter.MailRetry.Delays[0])
		waitUntil(t, "the mail, once the server accepts", func() bool { return len(sink.Peek()) > 0 })
		stop()
		got := sink.Take()
		if len(got) != 1 || got[0].To != "owner@example.com" || !strings.Contains(got[0].Body, "Refund 12 EUR?") || sink.Refused() != 1 {
			t.Fatalf("received %+v after %d refusals; want the reminder once after one", got, sink.Refused())
		}
	})
}

// dueReminder stores, for the account of owner@example.com, a task for a
// person with a reminder after a minute, moves the clock a minute and
// fires it: one reminder mail waits in the outbox.
func dueReminder(t *testing.T, store *db.DB, clock *movable) {
	t.Helper()
	ctx := t.Context()
	acct, err := store.FindOrCreateAccountByEmail(ctx, "owner@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund 12 EUR?", AllowedVerdicts: []string{"approve", "reject"},
		ConfidenceThreshold: 0.8, Alerts: arbiter.Alerts{Reminders: []arbiter.AlertWait{{After: time.Minute}}}}); err != nil {
		t.Fatal(err)
	}
	humanTaskOf(t, store, acct.ID)
	clock.Add(time.Minute)
	if n, err := store.FireDueAlerts(ctx, 10); err != nil || n != 1 {
		t.Fatalf("fired %d, %v", n, err)
	}
}

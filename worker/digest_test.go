package worker_test

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/mail"
	"github.com/arbiterhq/arbiter/mail/mailtest"
	"github.com/arbiterhq/arbiter/worker"
)

// movable is a store clock a test moves.
type movable struct {
	mu sync.Mutex
	t  time.Time
}

func (c *movable) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *movable) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestDigests_OnePerReviewerPerHour runs the digest round with an injected
// clock and a real SMTP server: nothing while the queue is empty or the
// oldest task is younger than the account's minutes, then one digest for
// each member who reviews, never a second within the hour, not even with
// two workers at once, and one again the next hour.
func TestDigests_OnePerReviewerPerHour(t *testing.T) {
	t.Parallel()
	clock := &movable{t: time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)}
	dbtest.Each(t, db.Options{Now: clock.Now}, func(t *testing.T, store *db.DB) {
		ctx := t.Context()
		sink := mailtest.NewSink(t)
		mailer, err := mail.NewSMTP(sink.URL(), "arbiter@example.com")
		if err != nil {
			t.Fatal(err)
		}
		newWorker := func() *worker.Worker {
			return worker.New(worker.Config{Queue: store, Health: store, Digests: store, Logger: slog.New(slog.DiscardHandler)})
		}
		w1, w2 := newWorker(), newWorker()
		deliverer := worker.NewMailDeliverer(worker.MailConfig{Store: store, Mail: mailer,
			Links: arbiter.MailLinks{QueueURL: "https://review.example.com/review"}, Logger: slog.New(slog.DiscardHandler)})
		// send queues w's digests and returns how many, once the deliverer
		// has sent every mail queued.
		send := func(w *worker.Worker) int {
			t.Helper()
			n, err := w.QueueDigests(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := deliverer.DeliverDue(ctx); err != nil {
				t.Fatal(err)
			}
			return n
		}

		acct, err := store.FindOrCreateAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		_, token, err := store.CreateInvitation(ctx, acct.ID, "rev@example.com", arbiter.RoleReviewer, arbiter.Actor{})
		if err != nil {
			t.Fatal(err)
		}
		rev, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "rev@example.com", Email: "rev@example.com", EmailVerified: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.AcceptInvitation(ctx, token, rev.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}

		// Off by default: a waiting task mails nobody.
		humanTaskOf(t, store, acct.ID)
		clock.Add(2 * time.Hour)
		if n := send(w1); n != 0 || len(sink.Take()) != 0 {
			t.Fatalf("with notifications off, %d digests", n)
		}
		thirty := 30 * time.Minute
		if err := store.SetNotifyAfter(ctx, acct.ID, &thirty, arbiter.Actor{}); err != nil {
			t.Fatal(err)
		}
		// Another account mails its reviewers too, but its queue is empty.
		quiet, _ := store.FindOrCreateAccountByEmail(ctx, "quiet@example.com")
		if err := store.SetNotifyAfter(ctx, quiet.ID, &thirty, arbiter.Actor{}); err != nil {
			t.Fatal(err)
		}
		// Decide the old task: the queue is empty, nobody is mailed.
		decideAll(t, store, acct.ID)
		if n := send(w1); n != 0 || len(sink.Take()) != 0 {
			t.Fatalf("with an empty queue, %d digests", n)
		}
		// A new task, 10 minutes old: not yet.
		humanTaskOf(t, store, acct.ID)
		clock.Add(10 * time.Minute)
		if n := send(w1); n != 0 {
			t.Fatalf("a task younger than the account's minutes sent %d digests", n)
		}
		// 31 minutes: one digest to each member who reviews.
		clock.Add(21 * time.Minute)
		if n := send(w1); n != 2 {
			t.Fatalf("sent %d digests, want 2", n)
		}
		got := sink.Take()
		to := map[string]mailtest.Message{}
		for _, m := range got {
			to[m.To] = m
		}
		if len(got) != 2 || to["owner@example.com"].To == "" || to["rev@example.com"].To == "" {
			t.Fatalf("mailed %+v", got)
		}
		m := to["rev@example.com"]
		if m.Subject != "1 task waiting for review in owner@example.com" ||
			!strings.Contains(m.Body, "the oldest has waited 31m0s") || !strings.Contains(m.Body, "https://review.example.com/review") {
			t.Errorf("the digest reads %q:\n%s", m.Subject, m.Body)
		}
		// Within the hour, nothing more, from either worker, at once.
		clock.Add(20 * time.Minute)
		var wg sync.WaitGroup
		var sent [2]int
		for i, w := range []*worker.Worker{w1, w2} {
			wg.Go(func() { sent[i] = send(w) })
		}
		wg.Wait()
		if sent[0]+sent[1] != 0 || len(sink.Take()) != 0 {
			t.Fatalf("within the hour: sent %v", sent)
		}
		// The next hour, two workers at once send each digest once.
		clock.Add(time.Hour)
		for i, w := range []*worker.Worker{w1, w2} {
			wg.Go(func() { sent[i] = send(w) })
		}
		wg.Wait()
		if sent[0]+sent[1] != 2 {
			t.Fatalf("the next hour, two workers sent %v digests, want 2 in all", sent)
		}
		if got := sink.Take(); len(got) != 2 || got[0].To == got[1].To {
			t.Fatalf("the next hour mailed %+v", got)
		}
	})
}

// humanTaskOf stores a task for the account and hands it to a human.
func humanTaskOf(t *testing.T, store *db.DB, accountID string) {
	t.Helper()
	ctx := t.Context()
	if _, err := store.CreateTask(ctx, accountID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8}); err != nil {
		t.Fatal(err)
	}
	claimed, err := store.ClaimTasks(ctx, "wrk_digest", 100, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if err := store.FinishAgentAttempt(ctx, "wrk_digest", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// decideAll decides every waiting task of the account.
func decideAll(t *testing.T, store *db.DB, accountID string) {
	t.Helper()
	tasks, _, err := store.ListHumanQueue(t.Context(), accountID, arbiter.QueueView{}, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if _, err := store.DecideTask(t.Context(), accountID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: arbiter.OperatorActor}); err != nil {
			t.Fatal(err)
		}
	}
}

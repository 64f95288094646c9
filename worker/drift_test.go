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

// TestDriftMails_OncePerCrossingToOwnersAndAdmins drifts an account's
// audited error rate through the store and runs the digest round on two
// workers at once with a real SMTP server: the owner and the admin are
// mailed once, with the report's link; the reviewer is not; a later round
// sends nothing.
func TestDriftMails_OncePerCrossingToOwnersAndAdmins(t *testing.T) {
	t.Parallel()
	clock := &movable{t: time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)}
	settings := arbiter.DriftSettings{Audits: 20, Age: 24 * time.Hour, Target: 0.05, Confidence: 0.95}
	dbtest.Each(t, db.Options{Now: clock.Now, Drift: settings}, func(t *testing.T, store *db.DB) {
		ctx := t.Context()
		sink := mailtest.NewSink(t)
		mailer, err := mail.NewSMTP(sink.URL(), "arbiter@example.com")
		if err != nil {
			t.Fatal(err)
		}
		newWorker := func() *worker.Worker {
			return worker.New(worker.Config{Queue: store, Health: store, Digests: store, Logger: slog.New(slog.DiscardHandler)})
		}
		deliverer := worker.NewMailDeliverer(worker.MailConfig{Store: store, Mail: mailer, Logger: slog.New(slog.DiscardHandler),
			Links: arbiter.MailLinks{QueueURL: "https://review.example.com/review", ReportURL: "https://app.example.com/calibration"}})
		acct, err := store.FindOrCreateAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []struct{ email, role string }{{"admin@example.com", arbiter.RoleAdmin}, {"rev@example.com", arbiter.RoleReviewer}} {
			_, token, err := store.CreateInvitation(ctx, acct.ID, m.email, m.role, arbiter.Actor{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: m.email, Email: m.email, EmailVerified: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.AcceptInvitation(ctx, token, p.ID, arbiter.Client{}); err != nil {
				t.Fatal(err)
			}
		}
		// Twenty blind audits, every one wrong: the account crosses.
		one := 1.0
		var ids []string
		for range 20 {
			task, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
				ConfidenceThreshold: 0.8, AuditRate: &one})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
		}
		claimed, err := store.ClaimTasks(ctx, "wrk_drift", 100, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range claimed {
			verdict, confidence := "approve", 0.9
			if err := store.FinishAgentAttempt(ctx, "wrk_drift", c.ID, arbiter.AgentStep{
				Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence}, Next: arbiter.StatusCompleted,
			}); err != nil {
				t.Fatal(err)
			}
		}
		for _, id := range ids {
			clock.Add(time.Second)
			if _, err := store.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: "reject", Reviewer: "rev@example.com"}); err != nil {
				t.Fatal(err)
			}
		}

		var wg sync.WaitGroup
		var sent [2]int
		for i, w := range []*worker.Worker{newWorker(), newWorker()} {
			wg.Go(func() {
				n, err := w.QueueDigests(ctx)
				if err != nil {
					t.Error(err)
				}
				sent[i] = n
			})
		}
		wg.Wait()
		if _, err := deliverer.DeliverDue(ctx); err != nil {
			t.Fatal(err)
		}
		got := sink.Take()
		to := map[string]mailtest.Message{}
		for _, m := range got {
			to[m.To] = m
		}
		if sent[0]+sent[1] != 2 || len(got) != 2 || to["owner@example.com"].To == "" || to["admin@example.com"].To == "" {
			t.Fatalf("sent %v, mailed %+v; want the owner and the admin once each", sent, got)
		}
		m := to["admin@example.com"]
		if m.Subject != "Calibration drift in owner@example.com" || !strings.Contains(m.Body, "20 of the latest 20 blind audits were wrong") ||
			!strings.Contains(m.Body, "https://app.example.com/calibration") {
			t.Errorf("the drift mail reads %q:\n%s", m.Subject, m.Body)
		}
		if n, err := newWorker().QueueDigests(ctx); err != nil || n != 0 || len(sink.Take()) != 0 {
			t.Errorf("a later round sent %d, %v", n, err)
		}
	})
}

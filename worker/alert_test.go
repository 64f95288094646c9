package worker_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
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

// joinAs invites email to the account with role and has them accept.
func joinAs(t *testing.T, store *db.DB, accountID, email, role string) {
	t.Helper()
	ctx := t.Context()
	_, token, err := store.CreateInvitation(ctx, accountID, email, role, arbiter.Actor{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: email, Email: email, EmailVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.AcceptInvitation(ctx, token, p.ID, arbiter.Client{}); err != nil {
		t.Fatal(err)
	}
}

// TestAlerts_EachStepOncePerTaskAcrossTwoWorkers runs the reminder and
// escalation rounds of two workers at once, on stores of their own, with
// an injected clock and a real SMTP server. Each task waits for a person
// with a reminder at 15 minutes and rungs at 30 minutes (the admins) and
// an hour (a member's address): nothing is told before its time; at each time
// every task's step is told once, to the right people; a rung marks the
// task escalated and fires task.escalated once; a task decided before a
// step never gets it; the deadline never moves.
func TestAlerts_EachStepOncePerTaskAcrossTwoWorkers(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			// From now on: the database's clock, which claims and
			// decisions compare deadlines with, stays within them.
			clock := &movable{t: time.Now().Truncate(time.Millisecond)}
			opts := db.Options{Now: clock.Now}
			ctx := t.Context()
			url := dbtest.URL(t, dialect)
			store := dbtest.OpenURL(t, url, opts)
			other := store
			if dialect == db.Postgres {
				other = dbtest.OpenURL(t, url, opts) // as another process
			}
			sink := mailtest.NewSink(t)
			mailer, err := mail.NewSMTP(sink.URL(), "arbiter@example.com")
			if err != nil {
				t.Fatal(err)
			}
			workers := []*worker.Worker{}
			for _, s := range []*db.DB{store, other} {
				workers = append(workers, worker.New(worker.Config{Queue: s, Health: s, Alerts: s, Logger: slog.New(slog.DiscardHandler)}))
			}
			deliverer := worker.NewMailDeliverer(worker.MailConfig{Store: store, Mail: mailer,
				Links: arbiter.MailLinks{QueueURL: "https://review.example.com/review"}, Logger: slog.New(slog.DiscardHandler)})
			// round runs both workers at once and returns the mails, as
			// "kind to task", sorted.
			round := func() []string {
				t.Helper()
				var wg sync.WaitGroup
				for _, w := range workers {
					wg.Go(func() {
						if _, err := w.FireAlerts(ctx); err != nil {
							t.Error(err)
						}
					})
				}
				wg.Wait()
				if _, err := deliverer.DeliverDue(ctx); err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, m := range sink.Take() {
					kind := "reminder"
					if strings.HasPrefix(m.Subject, "Escalated") {
						kind = "escalation"
					}
					i := strings.Index(m.Body, "/tasks/")
					out = append(out, kind+" "+m.To+" "+strings.Fields(m.Body[i+len("/tasks/"):])[0])
				}
				sort.Strings(out)
				return out
			}

			acct, err := store.FindOrCreateAccountByEmail(ctx, "owner@example.com")
			if err != nil {
				t.Fatal(err)
			}
			joinAs(t, store, acct.ID, "adm@example.com", arbiter.RoleAdmin)
			joinAs(t, store, acct.ID, "rev@example.com", arbiter.RoleReviewer)
			// The last rung names a member by address: rungs mail members only.
			joinAs(t, store, acct.ID, "lead@example.com", arbiter.RoleReviewer)
			endpoint, err := store.CreateWebhookEndpoint(ctx, acct.ID, arbiter.WebhookEndpointInput{URL: "https://example.com/hooks"}, false, arbiter.Actor{})
			if err != nil {
				t.Fatal(err)
			}
			alerts := arbiter.Alerts{
				Reminders: []arbiter.AlertWait{{After: 15 * time.Minute}},
				Escalation: []arbiter.Rung{{After: arbiter.AlertWait{After: 30 * time.Minute}, To: "role:admin"},
					{After: arbiter.AlertWait{After: time.Hour}, To: "email:lead@example.com"}},
			}
			const n = 12
			var ids []string
			for i := range n {
				task, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: fmt.Sprint("Refund ", i), AllowedVerdicts: []string{"approve", "reject"},
					ConfidenceThreshold: 0.8, DeadlineSeconds: 7200, OnExpiry: arbiter.OnExpiry{Outcome: "verdict:reject"}, Alerts: alerts})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, task.ID)
			}
			// One task without a schedule, which nothing tells.
			if _, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "plain", AllowedVerdicts: []string{"approve"}, ConfidenceThreshold: 0.8}); err != nil {
				t.Fatal(err)
			}
			// Waiting for a person from a minute on.
			clock.Add(time.Minute)
			var claimed []*arbiter.Task
			for {
				some, err := store.ClaimTasks(ctx, "wrk_agent", 100, time.Hour)
				if err != nil {
					t.Fatal(err)
				} else if len(some) == 0 {
					break
				}
				claimed = append(claimed, some...)
			}
			if len(claimed) != n+1 {
				t.Fatalf("claimed %d tasks, want %d", len(claimed), n+1)
			}
			finished := arbiter.TimestampOf(clock.Now())
			for _, c := range claimed {
				if err := store.FinishAgentAttempt(ctx, "wrk_agent", c.ID, arbiter.AgentStep{
					Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: finished, FinishedAt: &finished}, Next: arbiter.StatusHumanNeeded,
				}); err != nil {
					t.Fatal(err)
				}
			}
			deadlines := map[string]arbiter.Timestamp{}
			for _, id := range ids {
				task, err := store.FindTaskByID(ctx, acct.ID, id)
				if err != nil {
					t.Fatal(err)
				}
				deadlines[id] = *task.DeadlineAt
			}
			decide := func(id string) {
				t.Helper()
				if _, err := store.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: arbiter.OperatorActor}); err != nil {
					t.Fatal(err)
				}
			}
			want := func(kind string, to []string, tasks []string) []string {
				var out []string
				for _, id := range tasks {
					for _, addr := range to {
						out = append(out, kind+" "+addr+" "+id)
					}
				}
				sort.Strings(out)
				return out
			}
			check := func(when string, got, want []string) {
				t.Helper()
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: mailed %d:\n%s\nwant %d:\n%s", when, len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
				}
			}

			// Decided before any step: never told.
			decide(ids[0])
			clock.Add(15*time.Minute - time.Millisecond)
			check("a millisecond before the reminder", round(), nil)
			clock.Add(time.Millisecond)
			reviewers := []string{"adm@example.com", "lead@example.com", "owner@example.com", "rev@example.com"}
			check("at the reminder", round(), want("reminder", reviewers, ids[1:]))
			check("again at the reminder", round(), nil)

			// Decided after the reminder: no rung.
			decide(ids[1])
			clock.Add(15*time.Minute - time.Millisecond)
			check("a millisecond before the first rung", round(), nil)
			clock.Add(time.Millisecond)
			// role:admin: the admins, and the owners, who hold every
			// admin's rights (issue 49 item 2).
			check("at the first rung", round(), want("escalation", []string{"adm@example.com", "owner@example.com"}, ids[2:]))
			escalatedAt := arbiter.TimestampOf(clock.Now())
			task, err := store.FindTaskByID(ctx, acct.ID, ids[2])
			if err != nil {
				t.Fatal(err)
			}
			if e := task.Escalation; e == nil || e.Rung != 1 || e.To != "role:admin" || e.After != "30m" || e.EscalatedAt != escalatedAt {
				t.Errorf("after the first rung the task's escalation is %+v", e)
			}
			if b, _ := json.Marshal(task); !strings.Contains(string(b), `"escalation":{"rung":1,"after":"30m","to":"role:admin"`) {
				t.Errorf("the task's JSON: %s", b)
			}

			decide(ids[2])
			clock.Add(30 * time.Minute)
			check("at the second rung", round(), want("escalation", []string{"lead@example.com"}, ids[3:]))
			clock.Add(time.Hour)
			check("after every step", round(), nil)

			msgs, err := store.ListWebhookMessages(ctx, acct.ID, endpoint.ID, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			escalations := map[string]int{}
			for _, m := range msgs {
				if m.EventType == arbiter.EventTaskEscalated {
					escalations[m.TaskID]++
				}
			}
			for i, id := range ids {
				wantRungs := []int{0, 0, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2}[i]
				if escalations[id] != wantRungs {
					t.Errorf("task %d: %d task.escalated events, want %d", i, escalations[id], wantRungs)
				}
				task, err := store.FindTaskByID(ctx, acct.ID, id)
				if err != nil {
					t.Fatal(err)
				}
				if *task.DeadlineAt != deadlines[id] {
					t.Errorf("task %d: the deadline moved from %v to %v", i, deadlines[id], *task.DeadlineAt)
				}
				if i >= 3 && (task.Escalation == nil || task.Escalation.Rung != 2 || task.Escalation.To != "email:lead@example.com") {
					t.Errorf("task %d: escalation %+v, want the second rung", i, task.Escalation)
				}
			}
		})
	}
}

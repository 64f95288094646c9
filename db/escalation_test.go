package db_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
)

// toHumanAll claims every pending task of the store and hands each to a
// person.
func toHumanAll(t *testing.T, d *db.DB) {
	t.Helper()
	for {
		claimed, err := d.ClaimTasks(ctx, "w", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		} else if len(claimed) == 0 {
			return
		}
		for _, c := range claimed {
			if err := d.FinishAgentAttempt(ctx, "w", c.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: 1},
				Next: arbiter.StatusHumanNeeded}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestAlertService_PolicyValuesAndSlack: a create without reminders or
// escalation takes its policy's, which the task keeps when the policy
// changes; a reminder mails the account's reviewers and posts the task's
// question to Slack again through the outbox; a rung marks the task
// escalated and posts the question again too.
func TestAlertService_PolicyValuesAndSlack(t *testing.T) {
	t.Parallel()
	key, err := secretbox.Parse(secretbox.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{now: time.Now().Truncate(time.Millisecond)}
	dbtest.Each(t, db.Options{Now: c.Now, Secrets: key}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		if _, err := d.ConnectSlack(ctx, acct.ID, arbiter.SlackConnectionInput{Mode: arbiter.SlackModeHTTP,
			BotToken: "xoxb-test", SigningSecret: "0123456789abcdef0123", DefaultChannel: "#refunds"}, "T0FAKE",
			arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
			t.Fatal(err)
		}
		policy, err := arbiter.ParsePolicy("decide", []byte(`{"deadline_seconds":7200,"reminders":["10m"],
			"escalation":[{"after":"20m","to":"role:admin"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.PutPolicy(ctx, acct.ID, policy, arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
			t.Fatal(err)
		}
		if got, err := d.FindPolicy(ctx, acct.ID, "decide"); err != nil || len(got.Alerts.Reminders) != 1 || len(got.Alerts.Escalation) != 1 {
			t.Fatalf("the stored policy: %+v (%v)", got, err)
		}
		parse := func(body string) arbiter.TaskCreate {
			in, err := arbiter.ParseTaskCreate([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			return in
		}
		byPolicy, err := d.CreateTask(ctx, acct.ID, parse(`{"prompt":"by policy","allowed_verdicts":["approve","reject"]}`))
		if err != nil {
			t.Fatal(err)
		}
		own, err := d.CreateTask(ctx, acct.ID, parse(`{"prompt":"its own","allowed_verdicts":["approve","reject"],"reminders":[],"escalation":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		// The policy changes: the task created before keeps its values.
		if _, err := d.PutPolicy(ctx, acct.ID, arbiter.Policy{TaskType: "decide"}, arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
			t.Fatal(err)
		}
		after, err := d.CreateTask(ctx, acct.ID, parse(`{"prompt":"after the change","allowed_verdicts":["approve","reject"]}`))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			id   string
			want int
		}{{byPolicy.ID, 2}, {own.ID, 0}, {after.ID, 0}} {
			got := mustFind(t, d, acct.ID, tc.id)
			if n := len(got.Alerts.Reminders) + len(got.Alerts.Escalation); n != tc.want {
				t.Errorf("%s: %d steps recorded, want %d", got.Prompt, n, tc.want)
			}
		}
		toHumanAll(t, d)
		posts := func() map[string]int {
			t.Helper()
			claimed, err := d.ClaimSlackMessages(ctx, "o", 100, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]int{}
			for _, dl := range claimed {
				if dl.Message.Kind == arbiter.SlackPost {
					out[dl.Message.TaskID]++
				}
			}
			return out
		}
		if got := posts(); len(got) != 3 {
			t.Fatalf("posts when the tasks went to a person: %v", got)
		}

		fire := func() []arbiter.AlertMail {
			t.Helper()
			if _, err := d.FireDueAlerts(ctx, 100); err != nil {
				t.Fatal(err)
			}
			var mails []arbiter.AlertMail
			for _, m := range dbtest.TakeMail(t, d) {
				var a arbiter.AlertMail
				if err := json.Unmarshal(m.Content, &a); err != nil || m.Kind != a.Kind || m.To != a.To || m.TaskID != a.TaskID {
					t.Fatalf("mail %+v reads %+v (%v)", m, a, err)
				}
				mails = append(mails, a)
			}
			return mails
		}
		c.Add(10*time.Minute - time.Millisecond)
		if mails := fire(); len(mails) != 0 {
			t.Fatalf("before the reminder: %+v", mails)
		}
		c.Add(time.Millisecond)
		mails := fire()
		if len(mails) != 1 || mails[0].To != "owner@example.com" || mails[0].Kind != arbiter.AlertReminder || mails[0].TaskID != byPolicy.ID ||
			!strings.Contains(mails[0].Body("https://r.example.com/review"), "waited 10m0s") {
			t.Fatalf("the reminder: %+v", mails)
		}
		if got := posts(); fmt.Sprint(got) != fmt.Sprint(map[string]int{byPolicy.ID: 1}) {
			t.Errorf("the reminder posted %v, want the task's question again", got)
		}
		c.Add(10 * time.Minute)
		mails = fire()
		// The account has no admin: its owner counts as one, so the rung
		// to admins tells someone.
		if len(mails) != 1 || mails[0].To != "owner@example.com" || mails[0].Kind != arbiter.AlertEscalation || mails[0].Escalation == nil || mails[0].Escalation.Rung != 1 {
			t.Fatalf("the rung: %+v", mails)
		}
		if got := posts(); fmt.Sprint(got) != fmt.Sprint(map[string]int{byPolicy.ID: 1}) {
			t.Errorf("the rung posted %v, want the task's question again", got)
		}
		got := mustFind(t, d, acct.ID, byPolicy.ID)
		if got.Escalation == nil || got.Escalation.EscalatedAt != arbiter.TimestampOf(c.Now()) || got.Escalation.Describe() != "admins" {
			t.Errorf("escalation %+v", got.Escalation)
		}
		if mails := fire(); len(mails) != 0 {
			t.Errorf("after every step: %+v", mails)
		}
	})
}

// TestAlertService_FireDueAlertsUsesTheIndex: the sweep finds the tasks
// whose next step may be due by tasks_alert_due, not by reading the tasks
// table, however many tasks there are.
func TestAlertService_FireDueAlertsUsesTheIndex(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		for i := range 20 {
			in := taskCreate(fmt.Sprint(i))
			in.Alerts = arbiter.Alerts{Reminders: []arbiter.AlertWait{{After: time.Minute}}}
			if _, err := d.CreateTask(ctx, acct.ID, in); err != nil {
				t.Fatal(err)
			}
		}
		toHumanAll(t, d)
		if err := d.InsertTasks(ctx, acct.ID, 20000, 1763805600000); err != nil {
			t.Fatal(err)
		}
		if err := d.QueueAll(ctx, acct.ID); err != nil { // 20,000 waiting for a person, without steps
			t.Fatal(err)
		}
		if err := d.Analyze(ctx); err != nil {
			t.Fatal(err)
		}
		plan, err := d.ExplainFireDueAlerts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, "tasks_alert_due") || strings.Contains(plan, "Seq Scan on tasks") ||
			strings.Contains(plan, "SCAN tasks\n") || strings.Contains(plan, "Sort Key") {
			t.Errorf("the sweep does not find due steps by tasks_alert_due:\n%s", plan)
		}
	})
}

// TestQueueService_EscalatedFirst: in the queue's default view the tasks
// that reached a rung come first, then the oldest; the escalated view
// holds only them; the desk's next task follows the same order.
func TestQueueService_EscalatedFirst(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Now().Truncate(time.Millisecond)}
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		var ids []string
		for i := range 4 {
			in := taskCreate(fmt.Sprint(i))
			if i%2 == 1 {
				in.Alerts = arbiter.Alerts{Escalation: []arbiter.Rung{{After: arbiter.AlertWait{After: time.Hour}, To: "role:admin"}}}
			}
			task, err := d.CreateTask(ctx, acct.ID, in)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, task.ID)
			c.Add(time.Second)
		}
		toHumanAll(t, d)
		list := func(view arbiter.QueueView) []string {
			t.Helper()
			tasks, _, err := d.ListHumanQueue(ctx, acct.ID, view, 10)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, task := range tasks {
				out = append(out, task.ID)
			}
			return out
		}
		if got := list(arbiter.QueueView{}); fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Fatalf("before any rung: %v, want the oldest first %v", got, ids)
		}
		c.Add(time.Hour)
		if _, err := d.FireDueAlerts(ctx, 10); err != nil {
			t.Fatal(err)
		}
		want := []string{ids[1], ids[3], ids[0], ids[2]}
		if got := list(arbiter.QueueView{}); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the default view: %v, want %v", got, want)
		}
		if got := list(arbiter.QueueView{Escalated: true}); fmt.Sprint(got) != fmt.Sprint(want[:2]) {
			t.Errorf("the escalated view: %v, want %v", got, want[:2])
		}
		place, err := d.FindQueuePlace(ctx, acct.ID, ids[3], "", arbiter.QueueView{})
		if err != nil || place.Prev != ids[1] || place.Next != ids[0] || place.Position != 2 || place.Total != 4 {
			t.Errorf("the place of the second escalated task: %+v (%v)", place, err)
		}
		if place, err := d.FindQueuePlace(ctx, acct.ID, "", "", arbiter.QueueView{}); err != nil || place.Next != ids[1] {
			t.Errorf("the first task: %+v (%v)", place, err)
		}
	})
}

package db_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

var owner = arbiter.Actor{Email: "owner@example.com"}

func newWebhookEndpoint(t *testing.T, d *db.DB, accountID string) *arbiter.WebhookEndpoint {
	t.Helper()
	e, err := d.CreateWebhookEndpoint(ctx, accountID, arbiter.WebhookEndpointInput{URL: "https://example.com/hooks"}, false, owner)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestWebhookService_Endpoints: create, list, find, disable and enable,
// delete; bad input and another account's id change nothing.
func TestWebhookService_Endpoints(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		a, b := newAccount(t, d, "a@example.com"), newAccount(t, d, "b@example.com")
		e := newWebhookEndpoint(t, d, a.ID)
		if !arbiter.ValidWebhookEndpointID(e.ID) || !strings.HasPrefix(e.Secret, "whsec_") || !e.Enabled() {
			t.Fatalf("created %+v", e)
		}
		for _, in := range []arbiter.WebhookEndpointInput{
			{URL: "http://example.com/hooks"},
			{URL: "https://10.0.0.1/hooks"},
			{URL: "https://example.com/", EventTypes: []string{"nope"}},
			{URL: "https://example.com/", Description: strings.Repeat("x", 201)},
		} {
			if _, err := d.CreateWebhookEndpoint(ctx, a.ID, in, false, owner); arbiter.ErrorCode(err) != arbiter.EINVALID {
				t.Errorf("%+v: %v, want EINVALID", in, err)
			}
		}
		list, err := d.ListWebhookEndpoints(ctx, a.ID)
		if err != nil || len(list) != 1 || list[0].ID != e.ID || list[0].Secret != e.Secret {
			t.Fatalf("list: %v %v", list, err)
		}
		if other, _ := d.ListWebhookEndpoints(ctx, b.ID); len(other) != 0 {
			t.Error("another account lists the endpoint")
		}
		foreign := []func() error{
			func() error { _, err := d.FindWebhookEndpoint(ctx, b.ID, e.ID); return err },
			func() error { _, err := d.RotateWebhookSecret(ctx, b.ID, e.ID, owner); return err },
			func() error { _, err := d.SetWebhookEndpointEnabled(ctx, b.ID, e.ID, false, owner); return err },
			func() error { _, err := d.SendWebhookPing(ctx, b.ID, e.ID); return err },
			func() error { _, err := d.ListWebhookMessages(ctx, b.ID, e.ID, "", 10); return err },
			func() error { _, err := d.ResendFailedWebhookMessages(ctx, b.ID, e.ID, 0); return err },
			func() error { return d.DeleteWebhookEndpoint(ctx, b.ID, e.ID, owner) },
			func() error { _, err := d.FindWebhookEndpoint(ctx, a.ID, "wh_nope"); return err },
		}
		for i, f := range foreign {
			if err := f(); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
				t.Errorf("call %d on another account's endpoint: %v, want ENOTFOUND", i, err)
			}
		}
		if got, _ := d.FindWebhookEndpoint(ctx, a.ID, e.ID); got.Secret != e.Secret || !got.Enabled() {
			t.Error("another account's calls changed the endpoint")
		}

		off, err := d.SetWebhookEndpointEnabled(ctx, a.ID, e.ID, false, owner)
		if err != nil || off.Disabled != arbiter.WebhookDisabledByPerson {
			t.Fatalf("disable: %+v %v", off, err)
		}
		on, err := d.SetWebhookEndpointEnabled(ctx, a.ID, e.ID, true, owner)
		if err != nil || !on.Enabled() {
			t.Fatalf("enable: %+v %v", on, err)
		}
		if err := d.DeleteWebhookEndpoint(ctx, a.ID, e.ID, owner); err != nil {
			t.Fatal(err)
		}
		if _, err := d.FindWebhookEndpoint(ctx, a.ID, e.ID); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("after delete: %v", err)
		}
		events, _ := d.ListAuditEvents(ctx, a.ID, 10)
		var kinds []string
		for _, ev := range events {
			kinds = append(kinds, ev.Kind)
		}
		want := "webhook_deleted webhook_enabled webhook_disabled webhook_created"
		if strings.Join(kinds, " ") != want {
			t.Errorf("audit log %v, want %s", kinds, want)
		}
	})
}

func TestWebhookService_AtMostTwentyEndpoints(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "a@example.com")
		for range arbiter.MaxWebhookEndpoints {
			newWebhookEndpoint(t, d, a.ID)
		}
		_, err := d.CreateWebhookEndpoint(ctx, a.ID, arbiter.WebhookEndpointInput{URL: "https://example.com/"}, false, owner)
		if arbiter.ErrorCode(err) != arbiter.ECONFLICT {
			t.Errorf("the 21st endpoint: %v, want ECONFLICT", err)
		}
	})
}

// TestWebhookService_CallbackSecret is made on first use, stays, and
// rotates with the old secret kept for the overlap.
func TestWebhookService_CallbackSecret(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "a@example.com")
		first, err := d.FindCallbackSecret(ctx, a.ID)
		if err != nil || !strings.HasPrefix(first.Secret, "whsec_") {
			t.Fatalf("%+v %v", first, err)
		}
		again, _ := d.FindCallbackSecret(ctx, a.ID)
		if again.Secret != first.Secret {
			t.Error("the callback secret changed on a second read")
		}
		rotated, err := d.RotateCallbackSecret(ctx, a.ID, owner)
		if err != nil || rotated.Secret == first.Secret || rotated.PreviousSecret != first.Secret ||
			*rotated.PreviousSecretExpiresAt != arbiter.TimestampOf(c.Now().Add(arbiter.WebhookSecretOverlap)) {
			t.Fatalf("rotate: %+v %v", rotated, err)
		}
		if got := rotated.SigningSecrets(c.Now()); len(got) != 2 {
			t.Errorf("during the overlap %d secrets sign", len(got))
		}
	})
}

// TestWebhookService_DeliveryLog lists an endpoint's messages by status,
// resends one and all failed ones since a time.
func TestWebhookService_DeliveryLog(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "a@example.com")
		e := newWebhookEndpoint(t, d, a.ID)
		var ids []string
		for range 3 {
			m, err := d.SendWebhookPing(ctx, a.ID, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.ID)
			c.Add(time.Minute)
		}
		// The first two fail for good, the third is delivered.
		claimed, err := d.ClaimWebhookMessages(ctx, "whd_a", 10, time.Minute)
		if err != nil || len(claimed) != 3 {
			t.Fatalf("claim: %d %v", len(claimed), err)
		}
		if again, _ := d.ClaimWebhookMessages(ctx, "whd_b", 10, time.Minute); len(again) != 0 {
			t.Fatalf("leased messages were claimed again: %d", len(again))
		}
		for _, del := range claimed {
			if del.Message.URL != e.URL || len(del.Secrets) != 1 || del.Secrets[0] != e.Secret {
				t.Errorf("claimed %+v", del)
			}
			step := arbiter.WebhookStep{Attempt: arbiter.WebhookAttempt{StatusCode: 500, AttemptedAt: arbiter.TimestampOf(c.Now())}, Status: arbiter.WebhookFailed}
			if del.Message.ID == ids[2] {
				step = arbiter.WebhookStep{Attempt: arbiter.WebhookAttempt{StatusCode: 200, AttemptedAt: arbiter.TimestampOf(c.Now())}, Status: arbiter.WebhookDelivered}
			}
			if _, err := d.RecordWebhookAttempt(ctx, "whd_b", del.Message.ID, step); arbiter.ErrorCode(err) != arbiter.ECONFLICT {
				t.Errorf("another worker recorded on a leased message: %v", err)
			}
			if _, err := d.RecordWebhookAttempt(ctx, "whd_a", del.Message.ID, step); err != nil {
				t.Fatal(err)
			}
		}
		list := func(status string) []string {
			t.Helper()
			msgs, err := d.ListWebhookMessages(ctx, a.ID, e.ID, status, 100)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range msgs {
				got = append(got, m.ID)
			}
			return got
		}
		if got := list(""); strings.Join(got, " ") != ids[2]+" "+ids[1]+" "+ids[0] {
			t.Errorf("the log lists %v, want newest first", got)
		}
		if got := list(arbiter.WebhookFailed); strings.Join(got, " ") != ids[1]+" "+ids[0] {
			t.Errorf("failed: %v", got)
		}
		if _, err := d.ListWebhookMessages(ctx, a.ID, e.ID, "lost", 100); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Errorf("an unknown status: %v", err)
		}

		if err := d.ResendWebhookMessage(ctx, a.ID, e.ID, ids[2]); err != nil {
			t.Fatal(err)
		}
		m, attempts, err := d.FindWebhookMessage(ctx, a.ID, e.ID, ids[2])
		if err != nil || m.Status != arbiter.WebhookPending || m.Attempts != 0 || len(attempts) != 1 {
			t.Fatalf("after resend: %+v, %d attempts, %v", m, len(attempts), err)
		}
		// Failed since the second ping: only that one.
		n, err := d.ResendFailedWebhookMessages(ctx, a.ID, e.ID, arbiter.TimestampOf(c.Now().Add(-2*time.Minute)))
		if err != nil || n != 1 {
			t.Fatalf("resend failed since: %d %v", n, err)
		}
		if got := list(arbiter.WebhookFailed); strings.Join(got, " ") != ids[0] {
			t.Errorf("still failed: %v", got)
		}
		if err := d.ResendWebhookMessage(ctx, a.ID, e.ID, "msg_000000000000000000000000"); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("an unknown message: %v", err)
		}
	})
}

// TestWebhookService_OutboxIsInTheChangesTransaction: a decision that the
// store refuses (already decided) queues nothing; one endpoint per account
// gets its own account's events only.
func TestWebhookService_OutboxFollowsTheChange(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		a, b := newAccount(t, d, "a@example.com"), newAccount(t, d, "b@example.com")
		ea, eb := newWebhookEndpoint(t, d, a.ID), newWebhookEndpoint(t, d, b.ID)
		task, err := d.CreateTask(ctx, a.ID, taskCreate("p"))
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := d.ClaimTasks(ctx, "w", 1, time.Minute)
		if err != nil || len(claimed) != 1 {
			t.Fatal(err)
		}
		now := arbiter.TimestampOf(time.Now())
		if err := d.FinishAgentAttempt(ctx, "w", task.ID, arbiter.AgentStep{Next: arbiter.StatusHumanNeeded,
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: now, FinishedAt: &now}}); err != nil {
			t.Fatal(err)
		}
		dec := arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}
		if _, err := d.DecideTask(ctx, a.ID, task.ID, dec); err != nil {
			t.Fatal(err)
		}
		if _, err := d.DecideTask(ctx, a.ID, task.ID, dec); arbiter.ErrorCode(err) != arbiter.ECONFLICT {
			t.Fatalf("second decision: %v", err)
		}
		msgs, err := d.ListWebhookMessages(ctx, a.ID, ea.ID, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, m := range msgs {
			types = append(types, m.EventType)
			if m.TaskID != task.ID {
				t.Errorf("message about %s", m.TaskID)
			}
		}
		if strings.Join(types, " ") != "task.completed task.human_needed" && strings.Join(types, " ") != "task.human_needed task.completed" {
			t.Errorf("account a's endpoint has %v", types)
		}
		if other, _ := d.ListWebhookMessages(ctx, b.ID, eb.ID, "", 10); len(other) != 0 {
			t.Errorf("account b's endpoint got %d messages of a's task", len(other))
		}
	})
}

// TestWebhookService_PruneOldMessages deletes delivered and failed messages
// created before the cut-off, with their attempts, and keeps pending ones
// and newer ones.
func TestWebhookService_PruneOldMessages(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "a@example.com")
		e := newWebhookEndpoint(t, d, a.ID)
		var ids []string
		for range 3 {
			m, err := d.SendWebhookPing(ctx, a.ID, e.ID)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, m.ID)
		}
		claimed, _ := d.ClaimWebhookMessages(ctx, "whd", 2, time.Minute)
		for _, del := range claimed {
			step := arbiter.WebhookStep{Status: arbiter.WebhookDelivered, Attempt: arbiter.WebhookAttempt{StatusCode: 204, AttemptedAt: arbiter.TimestampOf(c.Now())}}
			if _, err := d.RecordWebhookAttempt(ctx, "whd", del.Message.ID, step); err != nil {
				t.Fatal(err)
			}
		}
		c.Add(time.Hour)
		newer, _ := d.SendWebhookPing(ctx, a.ID, e.ID)
		if n, err := d.PruneWebhookMessages(ctx, arbiter.TimestampOf(c.Now().Add(-time.Minute)), 100); err != nil || n != 2 {
			t.Fatalf("pruned %d, %v; want the two delivered", n, err)
		}
		left, _ := d.ListWebhookMessages(ctx, a.ID, e.ID, "", 10)
		if len(left) != 2 || left[0].ID != newer.ID {
			t.Errorf("left %d messages", len(left))
		}
		if n, _ := d.PruneWebhookMessages(ctx, arbiter.TimestampOf(c.Now().Add(time.Minute)), 100); n != 0 {
			t.Errorf("pending messages were pruned: %d", n)
		}
	})
}

// TestWebhookDelivery_OneBadRecordFailsNoOther records a batch of attempts
// of two accounts in which one answer's body holds a NUL and bytes that
// are not UTF-8 (which Postgres text refuses), as a caller that did not
// make it storable would pass it: every message in the batch moves on,
// the others with their bodies, and the bad one with its status.
func TestWebhookDelivery_OneBadRecordFailsNoOther(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		a, b := newAccount(t, d, "a@example.com"), newAccount(t, d, "b@example.com")
		ea, eb := newWebhookEndpoint(t, d, a.ID), newWebhookEndpoint(t, d, b.ID)
		bad, err := d.SendWebhookPing(ctx, a.ID, ea.ID)
		if err != nil {
			t.Fatal(err)
		}
		var good []string
		for range 2 {
			m, err := d.SendWebhookPing(ctx, b.ID, eb.ID)
			if err != nil {
				t.Fatal(err)
			}
			good = append(good, m.ID)
		}
		claimed, err := d.ClaimWebhookMessages(ctx, "whd", 10, time.Minute)
		if err != nil || len(claimed) != 3 {
			t.Fatalf("claim: %d %v", len(claimed), err)
		}
		now := arbiter.TimestampOf(time.Now())
		records := []arbiter.WebhookRecord{
			{MessageID: good[0], Step: arbiter.WebhookStep{Status: arbiter.WebhookDelivered,
				Attempt: arbiter.WebhookAttempt{StatusCode: 200, AttemptedAt: now, ResponseBody: "ok 0"}}},
			{MessageID: bad.ID, Step: arbiter.WebhookStep{Status: arbiter.WebhookPending, NextAttemptAt: now + 5000,
				Attempt: arbiter.WebhookAttempt{StatusCode: 500, AttemptedAt: now, ResponseBody: "no\x00pe\xff"}}},
			{MessageID: good[1], Step: arbiter.WebhookStep{Status: arbiter.WebhookDelivered,
				Attempt: arbiter.WebhookAttempt{StatusCode: 200, AttemptedAt: now, ResponseBody: "ok 1"}}},
		}
		out, err := d.RecordWebhookAttempts(ctx, "whd", records)
		if err != nil {
			t.Fatalf("the batch failed as a whole: %v", err)
		}
		for i, o := range out {
			if o.Err != nil {
				t.Errorf("record %d: %v", i, o.Err)
			}
		}
		for i, id := range good {
			m, attempts, err := d.FindWebhookMessage(ctx, b.ID, eb.ID, id)
			if err != nil || m.Status != arbiter.WebhookDelivered || len(attempts) != 1 || attempts[0].ResponseBody != "ok "+strconv.Itoa(i) {
				t.Errorf("account b's message %d: %+v, %+v, %v", i, m, attempts, err)
			}
		}
		m, attempts, err := d.FindWebhookMessage(ctx, a.ID, ea.ID, bad.ID)
		if err != nil || m.Status != arbiter.WebhookPending || m.Attempts != 1 || m.NextAttemptAt != now+5000 ||
			len(attempts) != 1 || attempts[0].StatusCode != 500 {
			t.Errorf("the bad answer's message: %+v, %+v, %v", m, attempts, err)
		}
		if e, _ := d.FindWebhookEndpoint(ctx, a.ID, ea.ID); e.FailingSince == nil {
			t.Error("the bad answer's endpoint is not failing")
		}
	})
}

// completeTask creates a task of the account and has the agent decide it,
// which announces task.completed, and returns its id.
func completeTask(t *testing.T, d *db.DB, accountID string) string {
	t.Helper()
	task, err := d.CreateTask(ctx, accountID, taskCreate("p"))
	if err != nil {
		t.Fatal(err)
	}
	if claimed, err := d.ClaimTasks(ctx, "w", 1, time.Minute); err != nil || len(claimed) != 1 || claimed[0].ID != task.ID {
		t.Fatalf("claim: %v, %d", err, len(claimed))
	}
	if err := d.FinishAgentAttempt(ctx, "w", task.ID, decided("approve", 0.99)); err != nil {
		t.Fatal(err)
	}
	return task.ID
}

// TestWebhookService_DisabledEndpointHoldsMessages: disabling an endpoint
// holds its message not yet sent, and events that follow are written for
// it as held; none is claimed (a ping still is); enabling makes them due,
// claimed oldest first; held messages past the retention are pruned.
func TestWebhookService_DisabledEndpointHoldsMessages(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "a@example.com")
		e := newWebhookEndpoint(t, d, a.ID)
		statuses := func() map[string]string {
			t.Helper()
			list, err := d.ListWebhookMessages(ctx, a.ID, e.ID, "", 100)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, m := range list {
				got[m.TaskID] = m.Status
			}
			return got
		}
		var tasks []string
		tasks = append(tasks, completeTask(t, d, a.ID))
		c.Add(time.Second)
		if _, err := d.SetWebhookEndpointEnabled(ctx, a.ID, e.ID, false, owner); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			tasks = append(tasks, completeTask(t, d, a.ID))
			c.Add(time.Second)
		}
		got := statuses()
		for i, id := range tasks {
			if got[id] != arbiter.WebhookHeld {
				t.Errorf("task %d's message is %q while the endpoint is disabled, want held", i, got[id])
			}
		}
		if held, err := d.ListWebhookMessages(ctx, a.ID, e.ID, arbiter.WebhookHeld, 100); err != nil || len(held) != 3 {
			t.Errorf("the log filtered by held lists %d (%v)", len(held), err)
		}
		ping, err := d.SendWebhookPing(ctx, a.ID, e.ID)
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := d.ClaimWebhookMessages(ctx, "whd", 10, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].Message.ID != ping.ID {
			t.Fatalf("claimed %d (%v) while the endpoint is disabled, want the ping alone", len(claimed), err)
		}

		if _, err := d.SetWebhookEndpointEnabled(ctx, a.ID, e.ID, true, owner); err != nil {
			t.Fatal(err)
		}
		for i, id := range tasks {
			claimed, err := d.ClaimWebhookMessages(ctx, "whd", 1, time.Minute)
			if err != nil || len(claimed) != 1 || claimed[0].Message.TaskID != id {
				t.Fatalf("claim %d after enabling: %v, %+v; want task %d's message", i, err, claimed, i)
			}
		}

		// Held again, and kept no longer than the retention.
		if err := d.ReleaseWebhookMessages(ctx, "whd"); err != nil {
			t.Fatal(err)
		}
		if _, err := d.SetWebhookEndpointEnabled(ctx, a.ID, e.ID, false, owner); err != nil {
			t.Fatal(err)
		}
		if n, err := d.PruneWebhookMessages(ctx, arbiter.TimestampOf(c.Now().Add(-arbiter.WebhookRetention)), 100); err != nil || n != 0 {
			t.Fatalf("pruned %d fresh messages (%v)", n, err)
		}
		c.Add(arbiter.WebhookRetention + time.Minute)
		if n, err := d.PruneWebhookMessages(ctx, arbiter.TimestampOf(c.Now().Add(-arbiter.WebhookRetention)), 100); err != nil || n != 3 {
			t.Errorf("pruned %d held messages past the retention (%v), want 3", n, err)
		}
	})
}

// TestWebhookDelivery_ADeliveryBringsWaitingRetriesForward: messages of an
// endpoint wait for a retry; each delivery to that endpoint that succeeds
// makes WebhookCatchUp of them due, the first in the schedule's order
// first; another endpoint's waiting message, and one answered 429, stay
// where they were.
func TestWebhookDelivery_ADeliveryBringsWaitingRetriesForward(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "a@example.com")
		e, other := newWebhookEndpoint(t, d, a.ID), newWebhookEndpoint(t, d, a.ID)
		ping := func(endpointID string) string {
			t.Helper()
			m, err := d.SendWebhookPing(ctx, a.ID, endpointID)
			if err != nil {
				t.Fatal(err)
			}
			c.Add(time.Second)
			return m.ID
		}
		record := func(status int, next time.Duration) {
			t.Helper()
			claimed, err := d.ClaimWebhookMessages(ctx, "whd", 100, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			var records []arbiter.WebhookRecord
			for _, del := range claimed {
				step := arbiter.WebhookStep{Status: arbiter.WebhookDelivered,
					Attempt: arbiter.WebhookAttempt{StatusCode: status, AttemptedAt: arbiter.TimestampOf(c.Now())}}
				if status >= 300 {
					step.Status, step.NextAttemptAt = arbiter.WebhookPending, arbiter.TimestampOf(c.Now().Add(next))
				}
				records = append(records, arbiter.WebhookRecord{MessageID: del.Message.ID, Step: step})
			}
			if _, err := d.RecordWebhookAttempts(ctx, "whd", records); err != nil {
				t.Fatal(err)
			}
		}
		var waiting []string
		for range 5 {
			waiting = append(waiting, ping(e.ID))
		}
		otherWaiting := ping(other.ID)
		record(500, 5*time.Minute) // all six wait five minutes
		throttled := ping(e.ID)
		record(429, time.Minute) // and one was asked to slow down
		due := func(endpointID, id string) bool {
			t.Helper()
			m, _, err := d.FindWebhookMessage(ctx, a.ID, endpointID, id)
			if err != nil {
				t.Fatal(err)
			}
			return m.Status == arbiter.WebhookPending && !m.NextAttemptAt.Time().After(c.Now())
		}
		// check says which waiting messages are delivered (the first
		// delivered), due (the next dueNow), and still waiting.
		check := func(when string, delivered, dueNow int) {
			t.Helper()
			for i, id := range waiting {
				m, _, err := d.FindWebhookMessage(ctx, a.ID, e.ID, id)
				if err != nil {
					t.Fatal(err)
				}
				want := "waiting"
				if i < delivered {
					want = arbiter.WebhookDelivered
				} else if i < delivered+dueNow {
					want = "due"
				}
				got := m.Status
				if got == arbiter.WebhookPending {
					got = "waiting"
					if due(e.ID, id) {
						got = "due"
					}
				}
				if got != want {
					t.Errorf("%s: waiting message %d is %s, want %s", when, i, got, want)
				}
			}
			if due(other.ID, otherWaiting) {
				t.Errorf("%s: another endpoint's waiting message is due", when)
			}
			if due(e.ID, throttled) {
				t.Errorf("%s: the message answered 429 is due before its Retry-After", when)
			}
		}
		check("before any delivery", 0, 0)
		ping(e.ID)
		c.Add(-time.Second) // the clock stands still from here
		record(200, 0)
		check("after one delivery", 0, arbiter.WebhookCatchUp)
		// The two brought forward are delivered, and bring the last
		// three forward; then those are delivered.
		record(200, 0)
		check("after two more deliveries", 2, 3)
		record(200, 0)
		check("after the last three", 5, 0)
	})
}

// TestWebhookService_EventTimestampIsWhenItHappened: the payload of a
// completion and of an expiry carries, as its timestamp, the very instant
// its task records (completed_at, expired_at), to the millisecond.
func TestWebhookService_EventTimestampIsWhenItHappened(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		a := newAccount(t, d, "a@example.com")
		e := newWebhookEndpoint(t, d, a.ID)
		completed := completeTask(t, d, a.ID)
		c.Add(1234 * time.Millisecond)
		late, err := d.CreateTask(ctx, a.ID, withDeadline("late", 60))
		if err != nil {
			t.Fatal(err)
		}
		c.Add(2 * time.Minute)
		if _, err := d.ExpireTasks(ctx, 100); err != nil {
			t.Fatal(err)
		}
		msgs, err := d.ListWebhookMessages(ctx, a.ID, e.ID, "", 10)
		if err != nil || len(msgs) != 2 {
			t.Fatalf("%d messages (%v), want the completion and the expiry", len(msgs), err)
		}
		for _, m := range msgs {
			var p struct {
				Timestamp string       `json:"timestamp"`
				Data      arbiter.Task `json:"data"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				t.Fatal(err)
			}
			at := p.Data.CompletedAt
			if m.TaskID == late.ID {
				at = p.Data.ExpiredAt
			} else if m.TaskID != completed {
				t.Fatalf("a message about %s", m.TaskID)
			}
			if at == nil {
				t.Fatalf("%s: the task records no time: %s", m.EventType, m.Payload)
			}
			if want := at.Time().Format("2006-01-02T15:04:05.999Z07:00"); p.Timestamp != want {
				t.Errorf("%s: timestamp %s, want the task's %s", m.EventType, p.Timestamp, want)
			}
		}
	})
}

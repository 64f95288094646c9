package db_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/secretbox"
)

// queueReminders creates n tasks of the account that remind its reviewers
// a minute after they go to a person, sends them to a person, and fires
// the reminders a minute later: one mail per task to the owner.
func queueReminders(t *testing.T, d *db.DB, c *clock, accountID string, n int) {
	t.Helper()
	for range n {
		in := taskCreate("Refund 12 EUR to Ada?")
		in.Alerts = arbiter.Alerts{Reminders: []arbiter.AlertWait{{After: time.Minute}}}
		if _, err := d.CreateTask(ctx, accountID, in); err != nil {
			t.Fatal(err)
		}
	}
	toHumanAll(t, d)
	c.Add(time.Minute)
	if _, err := d.FireDueAlerts(ctx, 100); err != nil {
		t.Fatal(err)
	}
}

// claimOne claims the mails due for owner and fails unless there is one.
func claimOne(t *testing.T, d *db.DB, owner string, lease time.Duration) *arbiter.MailMessage {
	t.Helper()
	claimed, err := d.ClaimMail(ctx, owner, 10, lease)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claimed %d mails (%v), want one", len(claimed), err)
	}
	return claimed[0]
}

// noneDue fails if a mail is due.
func noneDue(t *testing.T, d *db.DB, when string) {
	t.Helper()
	if claimed, err := d.ClaimMail(ctx, "probe", 10, time.Minute); err != nil || len(claimed) != 0 {
		t.Fatalf("%s: claimed %d mails (%v), want none", when, len(claimed), err)
	}
}

// TestMailOutbox_RetriesUntilSent: a reminder is a row, sealed at rest,
// whose content reads as the mail; a failed attempt leaves it pending for
// the rule's delay, a later one sends it, and a sent mail keeps no copy
// of its content and is not claimed again.
func TestMailOutbox_RetriesUntilSent(t *testing.T) {
	t.Parallel()
	key, err := secretbox.Parse(secretbox.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now, Secrets: key}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		queueReminders(t, d, c, acct.ID, 1)
		rows, err := d.Rows(ctx, `SELECT data, status FROM mail_messages`)
		if err != nil || len(rows) != 1 || !secretbox.IsSealed(fmt.Sprint(rows[0][0])) || fmt.Sprint(rows[0][1]) != arbiter.MailPending {
			t.Fatalf("the stored mail: %v (%v), want one pending, its content sealed", rows, err)
		}
		m := claimOne(t, d, "mld_a", time.Minute)
		subject, body, err := m.Compose(arbiter.MailLinks{QueueURL: "https://review.example.com/review"})
		if err != nil || m.Kind != arbiter.MailReminder || m.To != "owner@example.com" || m.Attempts != 0 ||
			subject != "Reminder: a task in owner@example.com waits for review" || !strings.Contains(body, "Refund 12 EUR to Ada?") {
			t.Fatalf("the mail %+v reads %q %q (%v)", m, subject, body, err)
		}
		// The SMTP server is down: tried again after the rule's delay.
		step := arbiter.NextDelivery(arbiter.MailRetry, m.Attempts, arbiter.DeliveryOutcome{}, 0)
		if err := recordMail(d, "mld_a", m.ID, step, "connection refused"); err != nil {
			t.Fatal(err)
		}
		noneDue(t, d, "right after the failure")
		c.Add(arbiter.MailRetry.Delays[0] - time.Millisecond)
		noneDue(t, d, "a millisecond before the retry")
		c.Add(time.Millisecond)
		again := claimOne(t, d, "mld_b", time.Minute)
		if again.ID != m.ID || again.Attempts != 1 || string(again.Content) != string(m.Content) {
			t.Fatalf("the retry: %+v", again)
		}
		sent := arbiter.NextDelivery(arbiter.MailRetry, again.Attempts, arbiter.DeliveryOutcome{Sent: true}, 0)
		if err := recordMail(d, "mld_b", m.ID, sent, ""); err != nil {
			t.Fatal(err)
		}
		c.Add(24 * time.Hour)
		noneDue(t, d, "once sent")
		rows, err = d.Rows(ctx, `SELECT data, status, attempts FROM mail_messages`)
		if err != nil || fmt.Sprint(rows) != "[[ sent 2]]" {
			t.Errorf("the sent mail: %v (%v), want sent after 2 attempts, its content gone", rows, err)
		}
	})
}

// TestMailOutbox_ALeaseThatRunsOutIsClaimedAgain: a deliverer that
// vanished with a mail leased loses it when the lease runs out; another
// claims it, and the first one's record is refused.
func TestMailOutbox_ALeaseThatRunsOutIsClaimedAgain(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		queueReminders(t, d, c, acct.ID, 1)
		first := claimOne(t, d, "mld_gone", time.Hour)
		noneDue(t, d, "while the lease holds")
		if err := d.Exec(ctx, `UPDATE mail_messages SET lease_expires_at = 0`); err != nil {
			t.Fatal(err)
		}
		second := claimOne(t, d, "mld_next", time.Minute)
		if second.ID != first.ID {
			t.Fatalf("claimed %s, want %s again", second.ID, first.ID)
		}
		done := arbiter.DeliveryStep{State: arbiter.DeliveryDone, Attempts: 1}
		if err := recordMail(d, "mld_gone", first.ID, done, ""); arbiter.ErrorCode(err) != arbiter.ECONFLICT {
			t.Errorf("the lost lease's record: %v, want ECONFLICT", err)
		}
		if err := recordMail(d, "mld_next", second.ID, done, ""); err != nil {
			t.Fatal(err)
		}
		// A deliverer that stops gives its leases back at once.
		queueReminders(t, d, c, acct.ID, 1)
		claimOne(t, d, "mld_stopping", time.Hour)
		if err := d.ReleaseMail(ctx, "mld_stopping"); err != nil {
			t.Fatal(err)
		}
		claimOne(t, d, "mld_next", time.Minute)
	})
}

// TestMailOutbox_GivesUpAfterTheSchedule: a mail that fails every attempt
// of the rule, or is refused for good, is failed and never claimed again.
func TestMailOutbox_GivesUpAfterTheSchedule(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		queueReminders(t, d, c, acct.ID, 1)
		for i := 0; ; i++ {
			m := claimOne(t, d, "mld_a", time.Minute)
			step := arbiter.NextDelivery(arbiter.MailRetry, m.Attempts, arbiter.DeliveryOutcome{}, 0)
			if err := recordMail(d, "mld_a", m.ID, step, "451 try later"); err != nil {
				t.Fatal(err)
			}
			if step.State == arbiter.DeliveryFailed {
				if i != len(arbiter.MailRetry.Delays) {
					t.Fatalf("failed after %d attempts, want %d", i+1, len(arbiter.MailRetry.Delays)+1)
				}
				break
			}
			c.Add(step.Delay)
		}
		c.Add(30 * 24 * time.Hour)
		noneDue(t, d, "once failed")
		queueReminders(t, d, c, acct.ID, 1)
		m := claimOne(t, d, "mld_a", time.Minute)
		step := arbiter.NextDelivery(arbiter.MailRetry, m.Attempts, arbiter.DeliveryOutcome{Permanent: true}, 0)
		if err := recordMail(d, "mld_a", m.ID, step, "550 no such user"); err != nil || step.State != arbiter.DeliveryFailed {
			t.Fatal(step, err)
		}
		c.Add(time.Hour)
		noneDue(t, d, "once refused for good")
	})
}

// TestMailOutbox_QuotingMailIsBoundedPerAccountPerDay: past the daily
// bound, an account's reminders are not written, while another account's
// are; the next UTC day the account mails again.
func TestMailOutbox_QuotingMailIsBoundedPerAccountPerDay(t *testing.T) {
	t.Parallel()
	c := newClock()
	quiet := slog.New(slog.DiscardHandler) // the bound's warnings
	dbtest.Each(t, db.Options{Now: c.Now, QuotingMailsPerDay: 2, Logger: quiet}, func(t *testing.T, d *db.DB) {
		busy, other := newAccount(t, d, "busy@example.com"), newAccount(t, d, "quiet@example.com")
		queueReminders(t, d, c, busy.ID, 3)
		queueReminders(t, d, c, other.ID, 1)
		count := func() map[string]int {
			out := map[string]int{}
			for _, m := range dbtest.TakeMail(t, d) {
				out[m.To]++
			}
			return out
		}
		if got := count(); got["busy@example.com"] != 2 || got["quiet@example.com"] != 1 {
			t.Fatalf("mailed %v; want the busy account's 2 of 3 and the quiet one's", got)
		}
		queueReminders(t, d, c, busy.ID, 1)
		if got := count(); len(got) != 0 {
			t.Fatalf("past the bound, mailed %v", got)
		}
		c.Add(24 * time.Hour)
		queueReminders(t, d, c, busy.ID, 1)
		if got := count(); got["busy@example.com"] != 1 {
			t.Fatalf("the next day, mailed %v", got)
		}
	})
}

// TestAlertService_RungsTellMembersOnly: a rung to an address that is no
// member's is refused when a task or a policy names it, and nothing is
// stored; a rung to a member's address mails them, but not once they have
// left the account.
func TestAlertService_RungsTellMembersOnly(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		owner := personOf(t, d, "owner@example.com")
		lead := personOf(t, d, "lead@example.com")
		rung := func(to string) arbiter.TaskCreate {
			in := taskCreate("Refund 12 EUR to Ada?")
			in.Alerts = arbiter.Alerts{Escalation: []arbiter.Rung{{After: arbiter.AlertWait{After: time.Minute}, To: to}}}
			return in
		}
		_, err := d.CreateTask(ctx, acct.ID, rung("email:lead@example.com"))
		if e := (*arbiter.Error)(nil); !errors.As(err, &e) || e.Code != arbiter.EINVALID || e.Field != "escalation" ||
			!strings.Contains(e.Message, "lead@example.com, who is not a member of this account") {
			t.Fatalf("a create's rung to an outsider: %v", err)
		}
		policy := arbiter.Policy{TaskType: "decide", Alerts: arbiter.Alerts{Escalation: rung("email:lead@example.com").Alerts.Escalation}}
		if _, err := d.PutPolicy(ctx, acct.ID, policy, actor(owner)); arbiter.ErrorCode(err) != arbiter.EINVALID {
			t.Fatalf("a policy's rung to an outsider: %v", err)
		}
		if n, err := d.Count(ctx, `SELECT count(*) FROM tasks WHERE account_id = ?`, acct.ID); err != nil || n != 0 {
			t.Fatalf("%d tasks stored (%v)", n, err)
		}
		if _, err := d.FindPolicy(ctx, acct.ID, "decide"); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Fatalf("the refused policy was stored: %v", err)
		}

		if _, err := d.AcceptInvitation(ctx, invite(t, d, acct.ID, "lead@example.com", arbiter.RoleAdmin, owner), lead.ID, arbiter.Client{}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := d.CreateTask(ctx, acct.ID, rung("email:lead@example.com")); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := d.PutPolicy(ctx, acct.ID, policy, actor(owner)); err != nil {
			t.Fatalf("a policy's rung to a member: %v", err)
		}
		toHumanAll(t, d)
		c.Add(time.Minute)
		if _, err := d.FireDueAlerts(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if mails := dbtest.TakeMail(t, d); len(mails) != 1 || mails[0].To != "lead@example.com" || mails[0].Kind != arbiter.MailEscalation {
			t.Fatalf("the rung to a member mailed %+v", mails)
		}
		if _, err := d.RemoveMember(ctx, acct.ID, lead.ID, actor(owner)); err != nil {
			t.Fatal(err)
		}
		if _, err := d.FireDueAlerts(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if mails := dbtest.TakeMail(t, d); len(mails) != 0 {
			t.Fatalf("the rung to a member who left mailed %+v", mails)
		}
	})
}

// recordMail records one attempt and returns its error, or the call's.
func recordMail(d *db.DB, owner, id string, step arbiter.DeliveryStep, lastError string) error {
	errs, err := d.RecordMailAttempts(ctx, owner, []arbiter.MailRecord{{MailID: id, Step: step, LastError: lastError}})
	if err != nil {
		return err
	}
	return errs[0]
}

// TestMailOutbox_RecordsAttemptsTogether: attempts recorded in one call
// each move their own mail on — sent, pending again, failed — and a mail
// whose lease was lost is refused alone, the others recorded.
func TestMailOutbox_RecordsAttemptsTogether(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "owner@example.com")
		queueReminders(t, d, c, acct.ID, 4)
		claimed, err := d.ClaimMail(ctx, "mld_a", 4, time.Minute)
		if err != nil || len(claimed) != 4 {
			t.Fatalf("claimed %d, %v", len(claimed), err)
		}
		lost := claimed[3].ID
		if err := d.Exec(ctx, `UPDATE mail_messages SET lease_owner = 'mld_other' WHERE id = '`+lost+`'`); err != nil {
			t.Fatal(err)
		}
		retry := arbiter.NextDelivery(arbiter.MailRetry, 0, arbiter.DeliveryOutcome{}, 0)
		records := []arbiter.MailRecord{
			{MailID: claimed[0].ID, Step: arbiter.DeliveryStep{State: arbiter.DeliveryDone, Attempts: 1}},
			{MailID: claimed[1].ID, Step: retry, LastError: "451 try later"},
			{MailID: claimed[2].ID, Step: arbiter.DeliveryStep{State: arbiter.DeliveryFailed, Attempts: 1}, LastError: "550 no such user"},
			{MailID: lost, Step: arbiter.DeliveryStep{State: arbiter.DeliveryDone, Attempts: 1}},
		}
		errs, err := d.RecordMailAttempts(ctx, "mld_a", records)
		if err != nil || len(errs) != 4 || errs[0] != nil || errs[1] != nil || errs[2] != nil || arbiter.ErrorCode(errs[3]) != arbiter.ECONFLICT {
			t.Fatalf("errors %v, %v; want the lost lease's ECONFLICT alone", errs, err)
		}
		rows, err := d.Rows(ctx, `SELECT id, status, attempts, last_error FROM mail_messages ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			claimed[0].ID: "sent 1 ", claimed[1].ID: "pending 1 451 try later",
			claimed[2].ID: "failed 1 550 no such user", lost: "pending 0 ",
		}
		for _, r := range rows {
			if got := fmt.Sprint(r[1], " ", r[2], " ", r[3]); got != want[fmt.Sprint(r[0])] {
				t.Errorf("mail %v: %q, want %q", r[0], got, want[fmt.Sprint(r[0])])
			}
		}
		if len(rows) != 4 {
			t.Errorf("%d mails, want 4", len(rows))
		}
	})
}

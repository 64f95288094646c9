package handlers_test

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// steadyClock returns a store clock that moves a second at each reading,
// so tasks made one after the other are ordered as made.
func steadyClock() func() time.Time {
	var ticks atomic.Int64
	start := time.Now().Add(-time.Hour)
	return func() time.Time { return start.Add(time.Duration(ticks.Add(1)) * time.Second) }
}

// TestReviewDesk_TwoReviewersNeverShareATask has Ann work the queue in
// Chromium while Bob, in a session of his own, takes "next" at the same
// time: Ann's desk says the task is reserved for her, her next task after
// deciding is never the one Bob holds, skipping moves on, and her queue
// shows who holds Bob's task.
func TestReviewDesk_TwoReviewersNeverShareATask(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			ctx := t.Context()
			store := dbtest.Open(t, dialect, db.Options{Now: steadyClock()})
			base, links := serveSite(t, store)
			bctx := newBrowser(t)
			var tasks []*arbiter.Task
			for _, prompt := range []string{"First refund?", "Second refund?", "Third refund?", "Fourth refund?"} {
				tasks = append(tasks, waitingTask(t, store, "ann@example.com", prompt, ""))
			}
			acct := tasks[0].AccountID
			// Bob joins Ann's account as a reviewer and has a session.
			ann, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "ann@example.com", Email: "ann@example.com", EmailVerified: true})
			if err != nil {
				t.Fatal(err)
			}
			_, token, err := store.CreateInvitation(ctx, acct, "bob@example.com", arbiter.RoleReviewer, arbiter.Actor{Email: ann.Email, PersonID: ann.ID})
			if err != nil {
				t.Fatal(err)
			}
			bob, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "bob@example.com", Email: "bob@example.com", EmailVerified: true})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := store.AcceptInvitation(ctx, token, bob.ID, arbiter.Client{}); err != nil {
				t.Fatal(err)
			}
			bobSession, _, err := store.CreateSession(ctx, bob.ID, arbiter.SignInEmail, arbiter.Client{})
			if err != nil {
				t.Fatal(err)
			}

			signInAs(t, bctx, base, links, "ann@example.com")
			do(t, bctx, "open the first task with j",
				chromedp.Poll[chromedp.Void](queueReady, chromedp.WithPollingTimeout(10*time.Second)),
				chromedp.KeyEvent("j"),
				until(`(`+deskTaskID+`) !== '' && `+formReady),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid=reservation]`)),
			)
			if id := value(t, bctx, chromedp.Evaluate[string](deskTaskID)); id != tasks[0].ID {
				t.Fatalf("j opened %s, want the oldest %s", id, tasks[0].ID)
			}
			if got := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=reservation]`))); !strings.HasPrefix(got, "Reserved for you until ") {
				t.Errorf("the desk says %q", got)
			}

			// Bob presses "next" while Ann holds the first: he gets the second.
			bobs, err := store.NextTask(ctx, acct, bob.ID, bobSession.ID, arbiter.QueueView{})
			if err != nil || bobs == nil || bobs.TaskID != tasks[1].ID {
				t.Fatalf("bob's next = %+v, %v; want %s", bobs, err, tasks[1].ID)
			}

			// Ann decides with the keyboard: her next is the third, not Bob's.
			do(t, bctx, "decide with 1 and Enter",
				chromedp.KeyEvent("1"),
				chromedp.Poll[chromedp.Void](`document.querySelector('[data-shortcut="1"]').getAttribute('aria-pressed') === 'true'`,
					chromedp.WithPollingTimeout(5*time.Second)),
				chromedp.KeyEvent("\r"),
				until(`(`+deskTaskID+`) !== '' && (`+deskTaskID+`) !== '`+tasks[0].ID+`' && `+formReady),
			)
			if id := value(t, bctx, chromedp.Evaluate[string](deskTaskID)); id != tasks[2].ID {
				t.Fatalf("after deciding, Ann's desk shows %s; want %s (the second is Bob's)", id, tasks[2].ID)
			}
			// Skipping the third moves on to the fourth.
			do(t, bctx, "skip with s",
				chromedp.WaitVisible(chromedp.CSS(`[data-testid=reservation]`)),
				chromedp.KeyEvent("s"),
				until(`(`+deskTaskID+`) === '`+tasks[3].ID+`' && `+formReady),
			)
			if id := value(t, bctx, chromedp.Evaluate[string](deskTaskID)); id != tasks[3].ID {
				t.Fatalf("after skipping, Ann's desk shows %s; want %s", id, tasks[3].ID)
			}
			// As after a decision, the focus is on the new task, so its keys
			// work at once, and the page confirms the skip.
			if !value(t, bctx, chromedp.Evaluate[bool](`document.activeElement === document.querySelector('#review article')`)) {
				t.Errorf("after skipping the focus is on %s, not the next task", value(t, bctx, chromedp.Evaluate[string](`document.activeElement.outerHTML.slice(0, 120)`)))
			}
			if got := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=alert-success]`))); !strings.Contains(got, "Skipped; it comes back after the rest.") {
				t.Errorf("after skipping the desk says %q", got)
			}
			// Her queue shows who holds Bob's task.
			do(t, bctx, "back to the queue",
				chromedp.Navigate(base+"/review"),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue-item-reserved]`)),
			)
			if got := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=queue-item-reserved]`))); !strings.Contains(got, "bob@example.com is working on it") {
				t.Errorf("the queue says %q", got)
			}
		})
	}
}

// TestReviewDesk_AnAuditIsReservedAndSkippedLikeATask has Ann open an
// audit in Chromium: her desk says it is reserved for her and offers Skip;
// Bob, meanwhile, is told Ann holds it and his answer is refused; s lets
// it go and opens the next task, and then Bob may take the audit.
func TestReviewDesk_AnAuditIsReservedAndSkippedLikeATask(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			ctx := t.Context()
			store := dbtest.Open(t, dialect, db.Options{Now: steadyClock()})
			base, links := serveSite(t, store)
			bctx := newBrowser(t)
			acct, err := store.FindOrCreateAccountByEmail(ctx, "ann@example.com")
			if err != nil {
				t.Fatal(err)
			}
			bob := joinAsReviewer(t, store, acct.ID, "ann@example.com", "bob@example.com")
			one := 1.0
			audit := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund a late parcel?", AuditRate: &one}, arbiter.StatusCompleted)
			next := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund a broken mug?"}, arbiter.StatusHumanNeeded)

			signInAs(t, bctx, base, links, "ann@example.com")
			do(t, bctx, "open the audit",
				chromedp.Navigate(base+"/review/tasks/"+audit.ID),
				until(onDesk(audit.ID)+` && `+formReady),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid=audit-banner]`)),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid=skip]`)),
			)
			if got := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=reservation]`))); !strings.HasPrefix(got, "Reserved for you until ") {
				t.Errorf("the audit's desk says %q", got)
			}
			held, err := store.ReserveTask(ctx, acct.ID, audit.ID, bob.ID)
			if err != nil || held == nil || held.Email != "ann@example.com" {
				t.Fatalf("bob's reservation of Ann's audit: %+v, %v", held, err)
			}
			_, err = store.DecideTask(ctx, acct.ID, audit.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: bob.Email, ReviewerID: bob.ID})
			if arbiter.ErrorCode(err) != arbiter.ECONFLICT {
				t.Fatalf("bob's answer to the audit Ann holds: %v, want a conflict", err)
			}

			do(t, bctx, "skip the audit with s",
				chromedp.KeyEvent("s"),
				until(onDesk(next.ID)+` && `+formReady),
			)
			if got := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=alert-success]`))); !strings.HasPrefix(got, "Skipped") {
				t.Errorf("after s the desk says %q", got)
			}
			held, err = store.ReserveTask(ctx, acct.ID, audit.ID, bob.ID)
			if err != nil || held == nil || held.PersonID != bob.ID {
				t.Fatalf("after Ann skipped, bob's reservation of the audit: %+v, %v", held, err)
			}
		})
	}
}

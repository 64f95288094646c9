package handlers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestReviewer_FirstDay follows an invited reviewer's first day in
// Chromium: the owner invites them from the members page; they open the
// mailed invitation, sign in with the invited address (the form comes
// filled in with it), accept, land on
// the queue, decide three tasks with the keyboard alone, and find their
// three decisions on the desk's stats.
func TestReviewer_FirstDay(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{Now: steadyClock()})
	base, links := serveSite(t, store)
	bctx := newBrowserFor(t, 90*time.Second)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	for _, p := range []string{"Refund order 1?", "Refund order 2?", "Refund order 3?"} {
		waitingTask(t, store, "lead@example.com", p, "")
	}

	// The owner invites the reviewer.
	signInAs(t, bctx, base, links, "lead@example.com")
	do(t, bctx, "invite a reviewer",
		chromedp.Navigate(base+"/members"),
		chromedp.WaitVisible(css(`#invite-email`)),
		chromedp.SendKeys(css(`#invite-email`), "new.reviewer@example.com"),
		chromedp.SetValue(css(`#invite-role`), "reviewer"),
		chromedp.Click(css(`[data-testid=invite]`)),
		chromedp.WaitVisible(css(`[data-testid=members-notice]`)),
	)
	invitation := links.next(t)
	if !strings.Contains(invitation, "/invitations/accept?token=") {
		t.Fatalf("the mail holds %q, not an invitation", invitation)
	}
	do(t, bctx, "the owner signs out",
		chromedp.Click(css(`[data-testid=sign-out]`)),
		chromedp.WaitVisible(css(`#email`)),
	)

	// The reviewer opens the invitation and signs in with the invited address.
	do(t, bctx, "open the invitation",
		chromedp.Navigate(invitation),
		chromedp.WaitVisible(css(`[data-testid=invitation-sign-in]`)),
		chromedp.Click(css(`[data-testid=invitation-sign-in]`)),
		chromedp.WaitVisible(css(`#email`)),
		// The form comes filled in with the invited address.
		waitFor(`document.querySelector('#email').value === 'new.reviewer@example.com'`),
		chromedp.Click(css(`form[action="/signin/email"] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=email-sent]`)),
	)
	do(t, bctx, "sign in by the mailed link and accept",
		chromedp.Navigate(links.next(t)),
		chromedp.WaitVisible(css(`[data-testid=confirm-sign-in]`)),
		chromedp.Click(css(`[data-testid=confirm-sign-in]`)),
		chromedp.WaitVisible(css(`[data-testid=accept-invitation]`)),
		chromedp.Click(css(`[data-testid=accept-invitation]`)),
		chromedp.WaitVisible(css(`[data-testid=queue]`)),
		chromedp.Poll[chromedp.Void](queueReady, chromedp.WithPollingTimeout(10*time.Second)),
	)
	if got := value(t, bctx, chromedp.Text(css(`[data-testid=queue-count]`))); got != "3" {
		t.Fatalf("the reviewer's queue counts %q, want 3", got)
	}
	nav := value(t, bctx, chromedp.Evaluate[string](`[...document.querySelectorAll('nav[aria-label=Main] a')].map(a => a.textContent.trim().split(/\s/)[0]).join(',')`))
	if nav != "Review,Desk" {
		t.Errorf("a reviewer's navigation = %q, want the queue and the stats only", nav)
	}

	// Three decisions with the keyboard alone.
	do(t, bctx, "open the first task with j",
		chromedp.KeyEvent("j"),
		until(`(`+deskTaskID+`) !== '' && `+formReady),
	)
	for i := range 3 {
		current := value(t, bctx, chromedp.Evaluate[string](deskTaskID))
		next := `(` + deskTaskID + `) !== '' && (` + deskTaskID + `) !== '` + current + `' && ` + formReady
		if i == 2 {
			next = `!!document.querySelector('[data-testid=queue]')`
		}
		do(t, bctx, "decide with 1 and Enter",
			chromedp.KeyEvent("1"),
			chromedp.Poll[chromedp.Void](`document.querySelector('[data-shortcut="1"]').getAttribute('aria-pressed') === 'true'`,
				chromedp.WithPollingTimeout(5*time.Second)),
			chromedp.KeyEvent("\r"),
			until(next),
		)
	}
	if got := value(t, bctx, chromedp.Text(css(`[data-testid=queue-count]`))); got != "0" {
		t.Errorf("after three decisions the queue counts %q", got)
	}

	// The stats count them.
	do(t, bctx, "open the stats",
		chromedp.Click(css(`nav[aria-label=Main] a[href$="/review/stats"]`)),
		chromedp.WaitVisible(css(`[data-testid=stats-table]`)),
	)
	own := value(t, bctx, chromedp.Text(css(`[data-testid=stats-reviewer]`)))
	if !strings.Contains(own, "new.reviewer@example.com (you)") || !strings.Contains(value(t, bctx, chromedp.Text(css(`[data-testid=stats-reviewer] [data-testid=stats-decisions]`))), "3") {
		t.Errorf("the reviewer's line reads %q", own)
	}
	if got := value(t, bctx, chromedp.Text(css(`[data-testid=stats-waiting]`))); got != "0" {
		t.Errorf("the stats say %q wait", got)
	}
}

package handlers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestReviewQueue_ExplainsItselfToANewReviewer follows Bob, invited by Ann,
// with the keyboard at desktop and phone widths: the invitation's sign-in
// form comes filled in with his address and focused, so Enter sends the
// link; once he has joined, the queue welcomes him and says j opens the
// first task; ? lists the queue's shortcuts; j opens the first task.
func TestReviewQueue_ExplainsItselfToANewReviewer(t *testing.T) {
	for _, size := range []struct{ width, height int64 }{{desktopWidth, desktopHeight}, {phoneWidth, phoneHeight}} {
		t.Run(map[int64]string{desktopWidth: "desktop", phoneWidth: "phone"}[size.width], func(t *testing.T) {
			ctx := t.Context()
			store := dbtest.Open(t, db.SQLite, db.Options{Now: steadyClock()})
			base, links := serveSite(t, store)
			bctx := newBrowser(t)
			acct, err := store.FindOrCreateAccountByEmail(ctx, "ann@example.com")
			if err != nil {
				t.Fatal(err)
			}
			first := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund a broken mug?"}, arbiter.StatusHumanNeeded)
			deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund a late parcel?"}, arbiter.StatusHumanNeeded)
			ann, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: "ann@example.com", Email: "ann@example.com", EmailVerified: true})
			if err != nil {
				t.Fatal(err)
			}
			_, token, err := store.CreateInvitation(ctx, acct.ID, "bob@example.com", arbiter.RoleReviewer, arbiter.Actor{Email: ann.Email, PersonID: ann.ID})
			if err != nil {
				t.Fatal(err)
			}

			do(t, bctx, "open the invitation and go to sign in", viewport(size.width, size.height),
				chromedp.Navigate(base+"/invitations/accept?token="+token),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid=invitation-sign-in]`)),
				chromedp.Click(chromedp.CSS(`[data-testid=invitation-sign-in]`)),
				chromedp.WaitVisible(chromedp.CSS(`#email`)),
				waitFor(`document.activeElement && document.activeElement.id === 'email'`),
			)
			if got := value(t, bctx, chromedp.Evaluate[string](`document.querySelector('#email').value`)); got != "bob@example.com" {
				t.Errorf("the sign-in form holds %q, want the invited address", got)
			}
			do(t, bctx, "send the link with Enter", chromedp.KeyEvent(kb.Enter),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid=email-sent]`)))
			do(t, bctx, "sign in and accept",
				chromedp.Navigate(links.next(t)),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm-sign-in]`)),
				chromedp.Click(chromedp.CSS(`[data-testid=confirm-sign-in]`)),
				until(`document.readyState === 'complete' && !document.querySelector('[data-testid=confirm-sign-in]')`),
			)
			do(t, bctx, "accept",
				chromedp.WaitVisible(chromedp.CSS(`[data-testid=accept-invitation]`)),
				chromedp.Click(chromedp.CSS(`[data-testid=accept-invitation]`)),
				until(`document.readyState === 'complete' && !document.querySelector('[data-testid=accept-invitation]')`),
			)
			do(t, bctx, "welcome", chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue-welcome]`)))
			welcome := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=queue-welcome]`)))
			if !strings.Contains(welcome, "Welcome to ann@example.com") || !strings.Contains(welcome, "j to open the first task") {
				t.Errorf("the queue welcomes Bob with %q", welcome)
			}

			do(t, bctx, "? lists the shortcuts",
				chromedp.Poll[chromedp.Void](queueReady, chromedp.WithPollingTimeout(10*time.Second)),
				chromedp.KeyEvent("?"),
				waitFor(`!!document.querySelector('dialog#shortcuts[open]')`),
			)
			if got := value(t, bctx, chromedp.Text(chromedp.CSS(`dialog#shortcuts`))); !strings.Contains(got, "open the first task") {
				t.Errorf("the queue's shortcuts say %q", got)
			}
			do(t, bctx, "Escape closes them, j opens the first task",
				chromedp.KeyEvent(kb.Escape),
				waitFor(`!document.querySelector('dialog[open]')`),
				chromedp.KeyEvent("j"),
				until(onDesk(first.ID)+` && `+formReady),
			)
		})
	}
}

// TestReviewQueue_AnnouncesOnlyWhatChanged: the queue list, which replaces
// itself every 5 seconds, is no live region; the page's status line stays
// silent while the queue does not change, and says how many wait once a
// task arrives.
func TestReviewQueue_AnnouncesOnlyWhatChanged(t *testing.T) {
	ctx := t.Context()
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	acct, err := store.FindOrCreateAccountByEmail(ctx, "ann@example.com")
	if err != nil {
		t.Fatal(err)
	}
	deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund a broken mug?"}, arbiter.StatusHumanNeeded)
	signInAs(t, bctx, base, links, "ann@example.com")

	// Count the list's swaps, and every change to a live region's text.
	do(t, bctx, "watch the queue",
		chromedp.Poll[chromedp.Void](queueReady, chromedp.WithPollingTimeout(10*time.Second)),
		run(`window.queueSwaps = 0; document.addEventListener('htmx:afterSettle', () => window.queueSwaps++);
			window.announced = [];
			new MutationObserver(() => window.announced.push(document.querySelector('[data-testid=queue-status]').textContent))
				.observe(document.querySelector('[data-testid=queue-status]'), {childList: true, characterData: true, subtree: true})`),
	)
	if live := value(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=queue] [aria-live], [data-testid=queue][aria-live], [aria-live] [data-testid=queue]').length`)); live != 0 {
		t.Errorf("%d live regions hold the queue list", live)
	}
	do(t, bctx, "wait for a refresh that changes nothing", waitFor(`window.queueSwaps >= 1`))
	if got := value(t, bctx, chromedp.Evaluate[[]string](`window.announced`)); len(got) != 0 {
		t.Errorf("an unchanged queue announced %q", got)
	}
	deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund a late parcel?"}, arbiter.StatusHumanNeeded)
	do(t, bctx, "wait for the new task", chromedp.Poll[chromedp.Void](`document.querySelectorAll('[data-testid=queue-item]').length === 2
		&& document.querySelector('[data-testid=queue-status]').textContent !== ''`, chromedp.WithPollingTimeout(30*time.Second)))
	if got := value(t, bctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=queue-status]').textContent`)); got != "2 waiting (1 new)." {
		t.Errorf("the status line says %q", got)
	}
}

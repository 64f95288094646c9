package handlers_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// actionWaitingTask stores a refund task with an action whose amount and
// currency a reviewer may edit, for email's account, and hands it (with
// any other pending task) to a person.
func actionWaitingTask(t *testing.T, store *db.DB, email, prompt string) *arbiter.Task {
	t.Helper()
	ctx := t.Context()
	acct, err := store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "allowed_verdicts": []string{"approve", "reject"},
		"action": json.RawMessage(`{"name": "issue_refund", "args": {"order": "ord_1", "amount": 120, "currency": "EUR"},
			"schema": {"type": "object", "properties": {"amount": {"type": "number", "minimum": 0, "maximum": 500},
				"currency": {"enum": ["EUR", "USD"]}, "order": {"type": "string"}}},
			"editable": ["amount", "currency"]}`)})
	in, err := arbiter.ParseTaskCreate(body)
	if err != nil {
		t.Fatal(err)
	}
	task, err := store.CreateTask(ctx, acct.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	handToPeople(t, store)
	return task
}

// TestReviewActionEdit_Keyboard edits an action on the desk with the
// keyboard alone, at desktop and phone widths: e opens the edit and
// focuses the amount; Enter there decides nothing; Escape, 1 and Enter
// approve; the task completes with the edited action, both digests and
// the patch. axe-core finds no serious violation with the edit open.
func TestReviewActionEdit_Keyboard(t *testing.T) {
	script := axeScript(t)
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowserFor(t, 3*time.Minute)
	signInAs(t, bctx, base, links, "reviewer@example.com")
	acct, _ := store.FindAccountByEmail(context.Background(), "reviewer@example.com")

	for _, size := range []struct {
		name          string
		width, height int64
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			task := actionWaitingTask(t, store, "reviewer@example.com", "Refund order ord_1 ("+size.name+")?")
			do(t, bctx, "open the task", chromedp.EmulateViewport(size.width, size.height),
				chromedp.Navigate(base+"/review/tasks/"+task.ID), until(onDesk(task.ID)+` && `+formReady),
			)
			do(t, bctx, "e opens the edit on the amount", chromedp.KeyEvent("e"),
				until(`document.querySelector('[data-testid=action-edit]').open && document.activeElement?.name === 'arg.amount'`),
			)
			if !value(t, bctx, chromedp.Evaluate[bool](noOverflow)) {
				t.Errorf("the edit widens the page past %d px", size.width)
			}
			checkAccessibility(t, bctx, script, "the desk with the action's edit open ("+size.name+")")
			do(t, bctx, "type a new amount",
				chromedp.KeyEvent(kb.End), chromedp.KeyEvent(kb.Backspace), chromedp.KeyEvent(kb.Backspace), chromedp.KeyEvent(kb.Backspace),
				until(`document.activeElement?.value === ''`), type_("80"), until(`document.activeElement?.value === '80'`),
			)
			do(t, bctx, "Enter in the edit decides nothing", chromedp.KeyEvent(kb.Enter),
				until(deskStatus+`.includes('Your edit is kept')`),
			)
			if got := taskIn(t, store, acct.ID, task.ID); got.Status != arbiter.StatusHumanNeeded {
				t.Fatalf("Enter in the edit decided the task: %s", got.Status)
			}
			do(t, bctx, "Tab to the currency and choose USD", chromedp.KeyEvent(kb.Tab),
				until(`document.activeElement?.name === 'arg.currency'`), chromedp.KeyEvent(kb.ArrowDown),
				until(`document.activeElement?.value === 'USD'`),
			)
			do(t, bctx, "Escape, 1 and Enter approve", chromedp.KeyEvent(kb.Escape), until(`!`+inTextField),
				chromedp.KeyEvent("1"), until(pressed("approve")), chromedp.KeyEvent(kb.Enter),
				until(`!`+onDesk(task.ID)),
			)
			got := waitDecided(t, store, acct.ID, task.ID)
			a := got.ApprovedAction
			if a == nil || !a.Edited || string(a.Args) != `{"amount":80,"currency":"USD","order":"ord_1"}` ||
				a.ProposedDigest != task.Action.Digest || len(a.Patch) != 2 {
				t.Fatalf("approved action = %+v", a)
			}
		})
	}
}

// TestReviewBulk_Keyboard marks two of three tasks in the queue with x,
// decides them with one verdict after the confirmation states the count,
// and leaves the third alone.
func TestReviewBulk_Keyboard(t *testing.T) {
	script := axeScript(t)
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowserFor(t, 3*time.Minute)
	var tasks []*arbiter.Task
	for i := range 3 {
		tasks = append(tasks, waitingTask(t, store, "reviewer@example.com", "Bulk task "+strconv.Itoa(i+1), ""))
	}
	signInAs(t, bctx, base, links, "reviewer@example.com")
	acct, _ := store.FindAccountByEmail(context.Background(), "reviewer@example.com")
	for _, size := range []struct {
		name          string
		width, height int64
	}{{"phone", 390, 844}, {"desktop", 1280, 900}} {
		do(t, bctx, "the queue at "+size.name+" size", chromedp.EmulateViewport(size.width, size.height),
			chromedp.Navigate(base+"/review"), until(`document.querySelectorAll('[data-testid=bulk-mark]').length === 3`))
		checkAccessibility(t, bctx, script, "the queue with marks ("+size.name+")")
	}
	marked := `document.querySelectorAll('[data-testid=bulk-mark]:checked').length`
	do(t, bctx, "x marks the first task", chromedp.KeyEvent("x"), until(marked+` === 1`),
		until(`!document.querySelector('[data-testid=bulk-form]').classList.contains('hidden')`))
	do(t, bctx, "Tab to the second's box, x marks it", chromedp.KeyEvent(kb.Tab),
		until(`document.activeElement?.matches('[data-testid=bulk-mark]')`), chromedp.KeyEvent("x"), until(marked+` === 2`),
		until(`document.querySelector('[data-testid=bulk-count]').textContent.startsWith('2 tasks marked')`),
	)
	checkAccessibility(t, bctx, script, "the queue with two tasks marked")
	do(t, bctx, "the marks survive the list's refresh", run(`window.swaps = 0; document.addEventListener('htmx:afterSettle', () => window.swaps++)`),
		run(`htmx.ajax('GET', '/review/queue', {target: '#queue', swap: 'outerHTML'})`), until(`window.swaps >= 1`), until(marked+` === 2`))
	tabTo(t, bctx, `document.activeElement?.matches('[data-testid=bulk-submit]')`)
	do(t, bctx, "send the marked tasks", chromedp.KeyEvent(kb.Enter),
		until(`document.querySelector('[data-testid=bulk-question]')?.textContent === 'Decide 2 tasks “approve”?'`))
	checkAccessibility(t, bctx, script, "the bulk confirmation")
	tabTo(t, bctx, `document.activeElement?.matches('[data-testid=bulk-confirm]')`)
	do(t, bctx, "confirm", chromedp.KeyEvent(kb.Enter), until(`document.querySelector('[data-testid=queue]') !== null`))
	decided := 0
	for _, task := range tasks {
		if got := taskIn(t, store, acct.ID, task.ID); got.Status == arbiter.StatusCompleted {
			decided++
		}
	}
	if decided != 2 {
		t.Errorf("%d tasks decided, want the 2 marked", decided)
	}
}

// tabTo presses Tab until cond holds, at most 30 times.
func tabTo(t *testing.T, bctx context.Context, cond string) {
	t.Helper()
	for range 30 {
		if value(t, bctx, chromedp.Evaluate[bool](cond)) {
			return
		}
		do(t, bctx, "Tab", chromedp.KeyEvent(kb.Tab))
	}
	t.Fatalf("30 Tabs did not reach %s", cond)
}

// taskIn reads a task from the store.
func taskIn(t *testing.T, store *db.DB, accountID, id string) *arbiter.Task {
	t.Helper()
	got, err := store.FindTaskByID(context.Background(), accountID, id)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// waitDecided waits until the task is completed in the store: the desk
// swaps the next task in once the decision is stored, so this is a state,
// not a time.
func waitDecided(t *testing.T, store *db.DB, accountID, id string) *arbiter.Task {
	t.Helper()
	got := taskIn(t, store, accountID, id)
	if got.Status != arbiter.StatusCompleted {
		t.Fatalf("the task is %s after the desk moved on", got.Status)
	}
	return got
}

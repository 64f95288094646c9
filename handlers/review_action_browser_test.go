package handlers_test

import (
	"context"
	"encoding/json"
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

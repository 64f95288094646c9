package handlers_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// waitingTask stores a task for email's account and hands it to a human,
// as the worker does when the verifier is unsure. The store takes the
// context as it is, past the API's validation.
func waitingTask(t *testing.T, store *db.DB, email, prompt, context string) *arbiter.Task {
	t.Helper()
	ctx := t.Context()
	acct, err := store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	in := arbiter.TaskCreate{Prompt: prompt, AllowedVerdicts: []string{"approve", "reject"},
		ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email"}
	if context != "" {
		in.Context = json.RawMessage(context)
	}
	task, err := store.CreateTask(ctx, acct.ID, in)
	if err != nil {
		t.Fatal(err)
	}
	handToPeople(t, store)
	return task
}

// handToPeople claims every pending task and hands it to a human, as the
// worker does when the verifier is unsure (an action as proposed).
func handToPeople(t *testing.T, store *db.DB) {
	t.Helper()
	ctx := t.Context()
	claimed, err := store.ClaimTasks(ctx, "wrk_test", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if err := store.FinishAgentAttempt(ctx, "wrk_test", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Rationale: "not sure", ActionDigest: c.ProposedDigest()}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// signInAs signs the browser in by e-mail link and lands on the queue.
func signInAs(t *testing.T, bctx context.Context, base string, links mailbox, email string) {
	t.Helper()
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	do(t, bctx, "ask for a link", chromedp.Navigate(base+"/review"),
		chromedp.WaitVisible(css(`a.btn-primary[href^="/signin"]`)),
		chromedp.Click(css(`a.btn-primary[href^="/signin"]`)),
		chromedp.WaitVisible(css(`#email`)),
		chromedp.SendKeys(css(`#email`), email),
		chromedp.Click(css(`form[action="/signin/email"] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=email-sent]`)),
	)
	do(t, bctx, "confirm the link", chromedp.Navigate(links.next(t)),
		chromedp.WaitVisible(css(`[data-testid=confirm-sign-in]`)),
		chromedp.Click(css(`[data-testid=confirm-sign-in]`)),
		chromedp.WaitVisible(css(`[data-testid=queue]`)),
	)
}

// waitFor polls a JavaScript condition until it holds.
func waitFor(condition string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](condition, chromedp.WithPollingTimeout(10*time.Second))
}

func TestReviewDesk_QueueRowsShowWhenTasksCame(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	waitingTask(t, store, "reviewer@example.com", "Refund order ord_7?", "")
	signInAs(t, bctx, base, links, "reviewer@example.com")

	do(t, bctx, "read the queue", chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue-item] time`)))
	row := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=queue-item]`)))
	when := value(t, bctx, chromedp.Evaluate[string](`document.querySelector('[data-testid=queue-item] time').getAttribute('datetime')`))
	if strings.Contains(row, "@components") || !strings.Contains(row, "created just now") || when == "" {
		t.Errorf("the queue row reads %q (datetime %q), want when it was created", row, when)
	}
}

func TestReviewDesk_TheDemosLastVerdictEndsTheDemo(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, _ := serveSite(t, store)
	bctx := newBrowser(t)
	tasks, err := store.ListDemoTasks(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	last := tasks[len(tasks)-1]

	do(t, bctx, "decide the last demo task",
		chromedp.Navigate(base+"/review/demo/tasks/"+last.ID),
		deskReady(""),
		chromedp.Click(chromedp.CSS(`[data-shortcut="1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=demo-finished]`)),
	)
	if loc := value(t, bctx, chromedp.Location()); !strings.HasSuffix(loc, "/review/demo/done") {
		t.Errorf("the demo ends at %s, want /review/demo/done", loc)
	}
	landmarks := value(t, bctx, chromedp.Evaluate[string](`['main', 'header', 'footer', '#review', '[data-testid=verdict-form]']
		.map(s => s + '=' + document.querySelectorAll(s).length).join(' ')`))
	if landmarks != "main=1 header=1 footer=1 #review=0 [data-testid=verdict-form]=0" {
		t.Errorf("the end of the demo holds %s, want one page, not a page in a page", landmarks)
	}
	if got := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=demo-finished] p`))); !strings.Contains(got, "You have given 1 verdict on 10 sample tasks.") {
		t.Errorf("the end of the demo says %q", got)
	}
	if got := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=alert-success]`))); got != `Recorded "`+last.AllowedVerdicts[0]+`".` {
		t.Errorf("the confirmation says %q", got)
	}
}

func TestReviewDesk_ADecisionWithoutJavaScriptIsConfirmed(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	first := waitingTask(t, store, "reviewer@example.com", "First refund?", "")
	second := waitingTask(t, store, "reviewer@example.com", "Second refund?", "")
	signInAs(t, bctx, base, links, "reviewer@example.com")

	noScript := chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	})
	do(t, bctx, "decide without JavaScript", noScript,
		chromedp.Navigate(base+"/review/tasks/"+first.ID),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=verdict-form]`)),
		chromedp.Click(chromedp.CSS(`[data-shortcut="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=alert-success]`)),
	)
	if got := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=alert-success]`))); got != `Decided "reject". Here is the next task.` {
		t.Errorf("after the decision the page says %q", got)
	}
	if loc := value(t, bctx, chromedp.Location()); !strings.HasSuffix(loc, "/review/tasks/"+second.ID) {
		t.Errorf("after the decision the browser is at %s, want the next task", loc)
	}
	// The page was a plain form post: htmx never ran.
	if ran := value(t, bctx, chromedp.Evaluate[bool](`!!document.querySelector('[data-testid=verdict-form]')['htmx-internal-data']`)); ran {
		t.Error("htmx handled the form; the test meant to run without JavaScript")
	}
	decided, _ := store.FindTaskByID(t.Context(), first.AccountID, first.ID)
	if decided.Status != arbiter.StatusCompleted || *decided.FinalVerdict != "reject" {
		t.Errorf("the first task is %s", decided.Status)
	}
}

// longPrompt is a prompt of about 30 KB in paragraphs, as the issue saw.
func longPrompt() string {
	para := "The customer writes that the parcel arrived late, the box was crushed and two of the six glasses were broken. "
	var b strings.Builder
	for b.Len() < 30_000 {
		b.WriteString(strings.Repeat(para, 3) + "\n\n")
	}
	return b.String()
}

// bigContext is a context of about 133 KB: one very long line, a deep
// nesting, a wide array and a multi-line text.
func bigContext() string {
	deep := strings.Repeat(`{"level":`, 70) + `"bottom"` + strings.Repeat("}", 70)
	wide := make([]string, 400)
	for i := range wide {
		wide[i] = `{"sku":"SKU-` + strings.Repeat("9", 20) + `","qty":1}`
	}
	return `{"line":"` + strings.Repeat("unbroken", 14_500) + `","deep":` + deep + `,"items":[` + strings.Join(wide, ",") +
		`],"diff":"--- a/x.go\n+++ b/x.go\n-\told()\n+\tnew()\n"}`
}

// inView is true when the verdict buttons lie wholly inside the viewport.
const inView = `[...document.querySelectorAll('[data-testid=verdict]')].every(b => {
	const r = b.getBoundingClientRect();
	return r.width > 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.left >= 0 && r.right <= window.innerWidth;
})`

// noOverflow is true when nothing makes the page wider than the window.
const noOverflow = `document.documentElement.scrollWidth <= window.innerWidth`

func TestReviewDesk_ALongTaskKeepsTheVerdictsInReach(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	prompt, context := longPrompt(), bigContext()
	if len(context) < 130_000 || len(prompt) < 30_000 {
		t.Fatalf("context %d bytes, prompt %d", len(context), len(prompt))
	}
	task := waitingTask(t, store, "reviewer@example.com", prompt, context)
	signInAs(t, bctx, base, links, "reviewer@example.com")

	for _, size := range []struct {
		name          string
		width, height int64
	}{{"desktop", 1280, 900}, {"phone", 390, 844}} {
		t.Run(size.name, func(t *testing.T) {
			do(t, bctx, "open the task", chromedp.EmulateViewport(size.width, size.height),
				chromedp.Navigate(base+"/review/tasks/"+task.ID),
				chromedp.WaitVisible(chromedp.CSS(`[data-testid=verdict-form]`)),
			)
			if !value(t, bctx, chromedp.Evaluate[bool](inView)) {
				t.Error("the verdict buttons are outside the window when the page opens")
			}
			if !value(t, bctx, chromedp.Evaluate[bool](noOverflow)) {
				t.Errorf("the page is %v px wide in a %d px window",
					value(t, bctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth`)), size.width)
			}
			size := value(t, bctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('[data-testid=prompt]')).fontSize`))
			if size != "16px" {
				t.Errorf("the prompt's text is %s, want the normal 16px", size)
			}
			// The prompt shows its beginning; "show more" opens the rest.
			shown := value(t, bctx, chromedp.Evaluate[int](`document.querySelector('[data-testid=prompt]').innerText.length`))
			if shown > 3000 {
				t.Errorf("the prompt shows %d characters before \"show more\"", shown)
			}
			do(t, bctx, "show the whole prompt",
				chromedp.Click(chromedp.CSS(`[data-testid=prompt-more] summary`)),
				waitFor(`document.querySelector('[data-testid=prompt]').innerText.length > 25000`),
			)
			// Half way down the whole prompt the verdicts are still there.
			value(t, bctx, chromedp.Evaluate[bool](`(window.scrollTo(0, document.documentElement.scrollHeight / 2), true)`))
			if !value(t, bctx, chromedp.Evaluate[bool](inView)) {
				t.Error("the verdict buttons left the window while reading")
			}
			if !value(t, bctx, chromedp.Evaluate[bool](noOverflow)) {
				t.Error("the opened prompt widens the page")
			}
		})
	}
}

// focusClear is true when what has the focus is not under the sticky
// verdict bar: it is in the bar, or the bar does not stick, or their boxes
// do not overlap. It also records what had the focus in window.lastFocus.
const focusClear = `(() => {
	const el = document.activeElement, f = document.querySelector('[data-testid=verdict-form]');
	window.lastFocus = el ? el.tagName + ' ' + (el.textContent || '').trim().slice(0, 40) : '';
	if (!el || !f || f.contains(el) || getComputedStyle(f).position !== 'sticky') return true;
	const r = el.getBoundingClientRect(), bar = f.getBoundingClientRect();
	return r.height === 0 || r.bottom <= bar.top || r.top >= bar.bottom;
})()`

// TestReviewDesk_FocusNeverHidesUnderTheVerdictBar tabs through a task
// with a long prompt and a big context, at desktop and phone sizes, and
// after each Tab waits until the focused control lies wholly above the
// sticky verdict bar's top (WCAG 2.4.11), until the focus reaches the bar.
func TestReviewDesk_FocusNeverHidesUnderTheVerdictBar(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowserFor(t, 3*time.Minute)
	task := waitingTask(t, store, "reviewer@example.com", longPrompt(), bigContext())
	signInAs(t, bctx, base, links, "reviewer@example.com")

	for _, size := range []struct{ width, height int64 }{{desktopWidth, desktopHeight}, {phoneWidth, phoneHeight}} {
		do(t, bctx, "open the task", viewport(size.width, size.height),
			chromedp.Navigate(base+"/review/tasks/"+task.ID), until(onDesk(task.ID)+` && `+formReady))
		if !value(t, bctx, chromedp.Evaluate[bool](`getComputedStyle(document.querySelector('[data-testid=verdict-form]')).position === 'sticky'`)) {
			t.Fatalf("at %d px the verdict bar does not stick", size.width)
		}
		covered := 0 // controls the browser first scrolled to under the bar
		for tab := 0; tab < 80; tab++ {
			do(t, bctx, "press Tab", chromedp.KeyEvent(kb.Tab))
			if value(t, bctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid=verdict-form]').contains(document.activeElement)`)) {
				break
			}
			if _, err := chromedp.Run(bctx, chromedp.Poll[chromedp.Void](focusClear, chromedp.WithPollingTimeout(5*time.Second))); err != nil {
				covered++
				t.Errorf("at %d px, Tab %d: %s stays under the verdict bar", size.width, tab+1,
					value(t, bctx, chromedp.Evaluate[string](`window.lastFocus`)))
			}
		}
		if covered > 0 {
			t.Errorf("at %d px, %d focused controls were hidden under the verdict bar", size.width, covered)
		}
	}
}

// barShare is the share of the window the verdict bar covers while it
// sticks; 0 when it does not stick.
const barShare = `(() => {
	const f = document.querySelector('[data-testid=verdict-form]');
	return getComputedStyle(f).position === 'sticky' ? f.getBoundingClientRect().height / window.innerHeight : 0;
})()`

// TestReviewDesk_ManyVerdictsLeaveAPhoneReadable opens a long task with
// twelve verdicts: on a 390 × 844 phone the bar (462 px, 55% of the
// window) no longer sticks, so the task can be read, while at 1280 × 900
// (352 px, 39%) it still does; a sticky bar never covers more than 45%.
func TestReviewDesk_ManyVerdictsLeaveAPhoneReadable(t *testing.T) {
	d := openKeyboardDesk(t)
	task, err := d.store.CreateTask(t.Context(), d.acct.ID, arbiter.TaskCreate{Prompt: longPrompt(), AllowedVerdicts: twelveVerdicts,
		ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := d.store.ClaimTasks(t.Context(), "wrk_test", 1, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claimed %d, %v", len(claimed), err)
	}
	if err := d.store.FinishAgentAttempt(t.Context(), "wrk_test", task.ID, arbiter.AgentStep{
		Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Rationale: "not sure"}, Next: arbiter.StatusHumanNeeded}); err != nil {
		t.Fatal(err)
	}
	for _, size := range []struct {
		width, height int64
		sticks        bool
	}{{phoneWidth, phoneHeight, false}, {desktopWidth, desktopHeight, true}} {
		d.do("open the task", viewport(size.width, size.height))
		d.open(task)
		share := eval[float64](d, barShare)
		if share > 0.45 {
			t.Errorf("at %d × %d the sticky verdict bar covers %.0f%% of the window", size.width, size.height, share*100)
		}
		if sticks := share > 0; sticks != size.sticks {
			t.Errorf("at %d px the bar sticks: %v, want %v", size.width, sticks, size.sticks)
		}
	}
}

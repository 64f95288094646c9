package handlers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// Viewports the browser tests look at pages in.
const (
	desktopWidth, desktopHeight = 1280, 900
	phoneWidth, phoneHeight     = 390, 844
)

// signInByEmail signs the browser in as email through the mailed link and
// waits for the overview.
func signInByEmail(t *testing.T, bctx context.Context, base string, links mailbox, email string) {
	t.Helper()
	do(t, bctx, "ask for a sign-in link",
		chromedp.Navigate(base+"/signin"),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), email),
		chromedp.Click(chromedp.CSS(`form[action="/signin/email"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=email-sent]`)),
	)
	link := links.next(t)
	do(t, bctx, "open the sign-in link",
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm-sign-in]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=confirm-sign-in]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=usage]`)),
	)
}

// viewport sets the page's size.
func viewport(width, height int64) chromedp.Action[chromedp.Void] {
	return chromedp.EmulateViewport(width, height)
}

// screenshot saves the viewport as NAME.png in ARBITER_SCREENSHOTS, when
// set.
func screenshot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
		dir := os.Getenv("ARBITER_SCREENSHOTS")
		if dir == "" {
			return nil
		}
		png, err := chromedp.CaptureScreenshot()(ctx, tgt)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	})
}

// noSideScroll is true when the page is no wider than the viewport.
const noSideScroll = `document.documentElement.scrollWidth <= window.innerWidth`

func TestDashboardTasks_InABrowser(t *testing.T) {
	// Each reading of the store's clock is a millisecond later, so the
	// tasks' order is their creation order.
	var ticks atomic.Int64
	start := time.Now()
	store := dbtest.Open(t, db.SQLite, db.Options{Now: func() time.Time {
		return start.Add(time.Duration(ticks.Add(1)) * time.Millisecond)
	}})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	acct, err := store.FindOrCreateAccountByEmail(context.Background(), "person@example.com")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := store.FindOrCreateAccountByEmail(context.Background(), "other@example.com")
	var ids []string // newest first
	for i := range 30 {
		in := arbiter.TaskCreate{Prompt: fmt.Sprintf("Refund order ord_%02d for a broken mug? The customer wrote a long message about it.", i),
			AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8, TaskType: "refund",
			Touchpoint: "email", Source: []string{"support-bot", "crm"}[i%2],
			Context: []byte(`{"order":{"id":"ord_` + fmt.Sprint(i) + `","amount":12.5,"note":"line one\nline two"}}`)}
		task, err := store.CreateTask(context.Background(), acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		ids = slices.Insert(ids, 0, task.ID)
	}
	foreign, _ := store.CreateTask(context.Background(), other.ID, arbiter.TaskCreate{Prompt: "Not yours",
		AllowedVerdicts: []string{"a"}, TaskType: "x", Touchpoint: "y"})
	signInByEmail(t, bctx, base, links, "person@example.com")

	rowIDs := func() []string {
		return value(t, bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid=task-row]')].map(r => r.dataset.taskId)`))
	}

	// The nav entry leads to the list: 25 newest, then the 5 older.
	do(t, bctx, "open the task list from the navigation",
		viewport(desktopWidth, desktopHeight),
		chromedp.Click(css(`nav[aria-label=Main] a[href="/tasks"]`)),
		chromedp.WaitVisible(css(`[data-testid=task-list]`)),
		screenshot("tasks"),
	)
	if got := rowIDs(); !slices.Equal(got, ids[:25]) {
		t.Fatalf("the first page shows %d tasks, want the newest 25", len(got))
	}
	if !value(t, bctx, chromedp.Evaluate[bool](noSideScroll)) {
		t.Error("the task list scrolls sideways at 1280 px")
	}
	do(t, bctx, "go to older tasks",
		chromedp.Click(css(`[data-testid=older-page]`)),
		chromedp.WaitVisible(css(`[data-testid=newest-page]`)),
	)
	if got := rowIDs(); !slices.Equal(got, ids[25:]) {
		t.Errorf("the second page shows %v, want %v", got, ids[25:])
	}

	// Filter by source with the form.
	do(t, bctx, "filter by source",
		chromedp.Click(css(`[data-testid=newest-page]`)),
		chromedp.WaitNotPresent(css(`[data-testid=newest-page]`)),
		chromedp.SendKeys(css(`#filter-source`), "crm"),
		chromedp.Click(css(`[data-testid=filter-tasks]`)),
		chromedp.WaitVisible(css(`[data-testid=clear-filters]`)),
		chromedp.WaitVisible(css(`[data-testid=task-list]`)),
	)
	got := rowIDs()
	if len(got) != 15 || slices.Contains(got, foreign.ID) {
		t.Errorf("the crm filter shows %d tasks, want 15", len(got))
	}

	// A task's page: prompt, facts, context.
	do(t, bctx, "open a task",
		chromedp.Click(css(`[data-testid=task-row] a`)),
		chromedp.WaitVisible(css(`[data-testid=task-facts]`)),
		chromedp.WaitVisible(css(`[data-testid=task-context]`)),
		screenshot("task"),
	)
	if loc := value(t, bctx, chromedp.Location()); loc != base+"/tasks/"+got[0] {
		t.Errorf("the first row leads to %s, want its task", loc)
	}

	// On a phone the rows are cards: nothing is off-screen.
	for _, path := range []string{"/tasks", "/tasks/" + ids[0]} {
		do(t, bctx, "look at "+path+" on a phone",
			viewport(phoneWidth, phoneHeight),
			chromedp.Navigate(base+path),
			chromedp.WaitVisible(css(`main h1`)),
			screenshot("phone"+filepath.Base(path)),
		)
		if !value(t, bctx, chromedp.Evaluate[bool](noSideScroll)) {
			t.Errorf("%s scrolls sideways at 390 px", path)
		}
	}
	do(t, bctx, "the list on a phone",
		chromedp.Navigate(base+"/tasks"),
		chromedp.WaitVisible(css(`[data-testid=task-list]`)),
	)
	cut := value(t, bctx, chromedp.Evaluate[int](`[...document.querySelectorAll('[data-testid=task-row] td')]
		.filter(td => { const r = td.getBoundingClientRect(); return r.width > 0 && (r.left < 0 || r.right > window.innerWidth); }).length`))
	if cut != 0 {
		t.Errorf("%d cells of the list reach past the phone's screen", cut)
	}
}

// insideViewport counts the elements matching a selector and those of them
// that are shown but reach past the viewport's left or right edge.
func insideViewport(selector string) string {
	return `(() => {
		const els = [...document.querySelectorAll(` + "`" + selector + "`" + `)];
		const out = els.filter(el => { const r = el.getBoundingClientRect();
			return r.width === 0 || r.height === 0 || r.left < 0 || r.right > window.innerWidth; });
		return {count: els.length, outside: out.map(el => el.textContent.trim())};
	})()`
}

type placement struct {
	Count   int      `json:"count"`
	Outside []string `json:"outside"`
}

func TestDashboard_OnAPhone(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	// A task waits for a human, so the navigation shows its badge.
	acct, _ := store.FindOrCreateAccountByEmail(context.Background(), "a.rather.long.name@example.com")
	if _, err := store.CreateTask(context.Background(), acct.ID, arbiter.TaskCreate{Prompt: "Refund?",
		AllowedVerdicts: []string{"approve", "reject"}, TaskType: "refund", Touchpoint: "chat"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ClaimTasks(context.Background(), "w", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	claimed, _ := store.ListTasks(context.Background(), acct.ID, arbiter.TaskFilter{})
	if err := store.FinishAgentAttempt(context.Background(), "w", claimed.Tasks[0].ID, arbiter.AgentStep{
		Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}); err != nil {
		t.Fatal(err)
	}
	signInByEmail(t, bctx, base, links, "a.rather.long.name@example.com")
	do(t, bctx, "create a key on a phone",
		viewport(phoneWidth, phoneHeight),
		chromedp.Navigate(base+"/keys"),
		chromedp.WaitVisible(css(`#key-name`)),
		chromedp.SendKeys(css(`#key-name`), "phone key with a name long enough to need cutting somewhere"),
		chromedp.Click(css(`[data-testid=create-key]`)),
		chromedp.WaitVisible(css(`[data-testid=new-key]`)),
		chromedp.Navigate(base+"/keys"),
		chromedp.WaitVisible(css(`[data-testid=revoke-link]`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('[data-testid=nav-review-count]').textContent.trim() === '1'`,
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(10*time.Second)),
		screenshot("phone-keys"),
	)

	// Every navigation entry, the badge and the signed-in person are on
	// screen; so are the key's columns and its Revoke link.
	for _, sel := range []string{
		`nav[aria-label=Main] a`, `[data-testid=nav-review-count]`, `[data-testid=signed-in-as]`, `[data-testid=sign-out]`,
		`[data-testid=key-list] td`, `[data-testid=last-used]`, `[data-testid=revoke-link]`,
	} {
		p := value(t, bctx, chromedp.Evaluate[placement](insideViewport(sel)))
		if p.Count == 0 || len(p.Outside) > 0 {
			t.Errorf("at 390 px, %d of %d %s are hidden or off-screen: %q", len(p.Outside), p.Count, sel, p.Outside)
		}
	}
	if n := value(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll('nav[aria-label=Main] a').length`)); n != 9 {
		t.Errorf("the navigation has %d entries, want 9", n)
	}
	do(t, bctx, "revoke the key on a phone",
		chromedp.Click(css(`[data-testid=revoke-link]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-testid=confirm-revoke]`)),
		chromedp.Click(css(`dialog[open] [data-testid=confirm-revoke]`)),
		chromedp.WaitVisible(css(`[data-testid=alert-success]`)),
	)

	// No page scrolls sideways on a phone, nor at 1280 px.
	for _, width := range []int64{phoneWidth, desktopWidth} {
		for _, path := range []string{"/", "/tasks", "/keys", "/members", "/settings", "/webhooks", "/audit", "/review"} {
			do(t, bctx, fmt.Sprintf("open %s at %d px", path, width),
				viewport(width, phoneHeight),
				chromedp.Navigate(base+path),
				chromedp.WaitVisible(css(`main h1`)),
				screenshot(fmt.Sprintf("%d%s", width, strings.ReplaceAll(path, "/", "-"))),
			)
			if !value(t, bctx, chromedp.Evaluate[bool](noSideScroll)) {
				t.Errorf("%s scrolls sideways at %d px", path, width)
			}
		}
	}
	// The audit log's rows fit at 1280 px: no cell reaches past the table.
	do(t, bctx, "open the audit log at 1280 px", viewport(desktopWidth, desktopHeight),
		chromedp.Navigate(base+"/audit"), chromedp.WaitVisible(css(`[data-testid=audit-list]`)))
	if !value(t, bctx, chromedp.Evaluate[bool](`(() => { const t = document.querySelector('[data-testid=audit-list]');
		return t.scrollWidth <= t.parentElement.clientWidth; })()`)) {
		t.Error("the audit table is wider than its card at 1280 px")
	}
}

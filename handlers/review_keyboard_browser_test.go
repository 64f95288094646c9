package handlers_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// The reviewer's desk driven by the keyboard alone, as a reviewer does:
// keys go to whatever has the focus, and every wait is for a state of the
// page or the store.

var (
	twoVerdicts    = []string{"approve", "reject"}
	twelveVerdicts = []string{"approve", "reject", "escalate", "refund", "replace", "repair",
		"credit", "warn", "ban", "ignore", "defer", "split"}
)

// keyboardDesk is a reviewer signed in to the reviewer site in headless
// Chromium, with tasks of the account waiting for a human.
type keyboardDesk struct {
	t     *testing.T
	store *db.DB
	base  string
	bctx  context.Context
	acct  *arbiter.Account
	tasks []*arbiter.Task // in the order they were created
	count *countGate
	// cacheable, while set, strips Cache-Control from every answer, as a
	// browser that keeps no-store pages in its back-forward cache (Safari)
	// would see them.
	cacheable *atomic.Bool
}

// openKeyboardDesk stores one waiting task per verdict list and signs the
// reviewer in.
func openKeyboardDesk(t *testing.T, verdicts ...[]string) *keyboardDesk {
	t.Helper()
	store := dbtest.Open(t, db.SQLite, db.Options{})
	gate, cacheable := &countGate{}, &atomic.Bool{}
	base, links := serveSite(t, store, gate.wrap, withoutNoStore(cacheable))
	t.Cleanup(gate.open)
	d := &keyboardDesk{t: t, store: store, base: base, bctx: newBrowser(t), count: gate, cacheable: cacheable}
	ctx := context.Background()
	acct, err := store.FindOrCreateAccountByEmail(ctx, "reviewer@example.com")
	if err != nil {
		t.Fatal(err)
	}
	d.acct = acct
	for i, vs := range verdicts {
		task, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{
			Prompt: "Task " + strconv.Itoa(i+1) + ": refund order ord_" + strconv.Itoa(i+1) + "?", AllowedVerdicts: vs,
			ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email",
		})
		if err != nil {
			t.Fatal(err)
		}
		d.tasks = append(d.tasks, task)
	}
	claimed, err := store.ClaimTasks(ctx, "wrk_test", len(verdicts), time.Minute)
	if err != nil || len(claimed) != len(verdicts) {
		t.Fatalf("claimed %d tasks, %v", len(claimed), err)
	}
	for _, c := range claimed {
		if err := store.FinishAgentAttempt(ctx, "wrk_test", c.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Rationale: "not sure"}, Next: arbiter.StatusHumanNeeded,
		}); err != nil {
			t.Fatal(err)
		}
	}

	d.do("ask for a sign-in link", chromedp.Navigate(base+"/signin?next=%2Freview"),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), "reviewer@example.com"),
		chromedp.Click(chromedp.CSS(`form[action="/signin/email"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=email-sent]`)),
	)
	d.do("sign in", chromedp.Navigate(links.next(t)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=confirm-sign-in]`)),
		chromedp.Click(chromedp.CSS(`[data-testid=confirm-sign-in]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue]`)),
	)
	return d
}

func (d *keyboardDesk) do(step string, actions ...chromedp.Action[chromedp.Void]) {
	d.t.Helper()
	do(d.t, d.bctx, step, actions...)
}

// eval reads a JavaScript value from the page.
func eval[T any](d *keyboardDesk, js string) T {
	d.t.Helper()
	return value(d.t, d.bctx, chromedp.Evaluate[T](js))
}

// open shows the task on the desk and waits until its keys work.
func (d *keyboardDesk) open(task *arbiter.Task) {
	d.t.Helper()
	d.do("open "+task.ID, chromedp.Navigate(d.base+"/review/tasks/"+task.ID), until(onDesk(task.ID)+` && `+formReady))
}

// task reads a task from the store.
func (d *keyboardDesk) task(task *arbiter.Task) *arbiter.Task {
	d.t.Helper()
	got, err := d.store.FindTaskByID(context.Background(), d.acct.ID, task.ID)
	if err != nil {
		d.t.Fatal(err)
	}
	return got
}

// wantDecided fails unless the store holds the reviewer's decision on task.
func (d *keyboardDesk) wantDecided(task *arbiter.Task, verdict, rationale string) {
	d.t.Helper()
	got := d.task(task)
	if got.Status != arbiter.StatusCompleted || got.FinalVerdict == nil || *got.FinalVerdict != verdict {
		d.t.Fatalf("task %s is %s with verdict %v, want completed with %q", task.ID, got.Status, deref(got.FinalVerdict), verdict)
	}
	last := got.Attempts[len(got.Attempts)-1]
	if last.Tier != arbiter.TierHuman || last.Rationale != rationale {
		d.t.Errorf("the human attempt = %+v, want rationale %q", last, rationale)
	}
}

// wantOpen fails unless task still waits for a human.
func (d *keyboardDesk) wantOpen(task *arbiter.Task) {
	d.t.Helper()
	if got := d.task(task); got.Status != arbiter.StatusHumanNeeded {
		d.t.Fatalf("task %s is %s, want still %s", task.ID, got.Status, arbiter.StatusHumanNeeded)
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// countGate holds the navigation badge's requests (/review/count) while it
// is shut, so a test decides when the badge swaps.
type countGate struct {
	mu   sync.Mutex
	wait chan struct{} // nil while open
}

func (g *countGate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/review/count" {
			g.mu.Lock()
			wait := g.wait
			g.mu.Unlock()
			if wait != nil {
				select {
				case <-wait:
				case <-r.Context().Done():
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (g *countGate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.wait == nil {
		g.wait = make(chan struct{})
	}
}

func (g *countGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.wait != nil {
		close(g.wait)
		g.wait = nil
	}
}

// withoutNoStore strips Cache-Control from the answers while strip is set.
func withoutNoStore(strip *atomic.Bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strip.Load() {
				w = cacheControlStripper{w}
			}
			next.ServeHTTP(w, r)
		})
	}
}

type cacheControlStripper struct{ http.ResponseWriter }

func (w cacheControlStripper) WriteHeader(status int) {
	w.Header().Del("Cache-Control")
	w.ResponseWriter.WriteHeader(status)
}

func (w cacheControlStripper) Write(b []byte) (int, error) {
	w.Header().Del("Cache-Control")
	return w.ResponseWriter.Write(b)
}

// Page conditions, as JavaScript expressions.

// onDesk is true while the desk shows the task.
func onDesk(id string) string { return `((` + deskTaskID + `) === '` + id + `')` }

// pressed is true while the verdict is the picked one.
func pressed(verdict string) string {
	return `(document.querySelector('#review button[name=verdict][value="` + verdict + `"]')?.getAttribute('aria-pressed') === 'true')`
}

// inTextField is true while the focus is in a text field, where keys type.
const inTextField = `(/^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName || '') || !!document.activeElement?.isContentEditable)`

// rationaleValue is what the rationale field holds.
const rationaleValue = `(document.querySelector('#rationale')?.value ?? null)`

// deskStatus is the desk's status line, which screen readers announce.
const deskStatus = `(document.querySelector('[data-testid=desk-status]')?.textContent || '')`

// badgeText is the navigation's count of waiting tasks.
const badgeText = `(document.querySelector('[data-testid=nav-review-count]')?.textContent.trim() ?? null)`

// until waits for a JavaScript condition, across page loads: a wait cut
// short by a navigation starts again on the new page.
func until(cond string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		deadline := time.Now().Add(15 * time.Second)
		for {
			_, err := chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(time.Until(deadline)))(ctx, t)
			if err == nil || errors.Is(err, chromedp.ErrPollingTimeout) || ctx.Err() != nil || time.Now().After(deadline) {
				if err != nil {
					err = errors.Join(err, errors.New("waiting for "+cond))
				}
				return chromedp.Void{}, err
			}
		}
	}
}

// run runs a statement in the page.
func run(js string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool]("(() => { "+js+"; return true })()")(ctx, t)
		return chromedp.Void{}, err
	}
}

// type_ types text into whatever has the focus.
func type_(text string) chromedp.Action[chromedp.Void] { return chromedp.KeyEvent(text) }

var ctrlEnter = chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl))

// watchBadge counts the badge's swaps in window.badgeSwaps and the events
// that made it ask in window.badgeTriggers.
const watchBadge = `window.badgeSwaps = 0; window.badgeTriggers = [];
	document.addEventListener('htmx:afterSettle', (e) => { if (e.target.matches?.('[data-testid=nav-review-count]')) window.badgeSwaps++ });
	document.addEventListener('htmx:configRequest', (e) => { if (e.target.matches?.('[data-testid=nav-review-count]')) window.badgeTriggers.push(e.detail.triggeringEvent?.type || '') })`

// #3: a pick survives the badge refreshing itself while the reviewer types.
func TestReviewKeyboard_APickSurvivesTheBadgeRefreshing(t *testing.T) {
	d := openKeyboardDesk(t, twoVerdicts, twoVerdicts)
	first := d.tasks[0]
	d.open(first)
	// The badge's first count is in; every swap counted from here comes
	// after the pick.
	d.do("the badge has its count", until(badgeText+` === '2'`), run(watchBadge))
	d.do("pick 2, then type a rationale",
		chromedp.KeyEvent("2"), until(pressed("reject")),
		chromedp.KeyEvent(kb.Tab), until(`document.activeElement?.id === 'rationale'`),
		type_("Outside the refund window"), until(rationaleValue+` === 'Outside the refund window'`),
	)
	d.do("the badge refreshes", run(`htmx.trigger(document.body, 'queue-changed')`), until(`window.badgeSwaps >= 1`))
	if !eval[bool](d, pressed("reject")) {
		t.Fatal("the badge's swap dropped the pick")
	}
	d.do("Ctrl+Enter sends the pick", ctrlEnter, until(`!`+onDesk(first.ID)+` && `+formReady))
	d.wantDecided(first, "reject", "Outside the refund window")
}

// #3: a pick made before the badge's first answer survives it too.
func TestReviewKeyboard_APickMadeRightAfterLoadSurvives(t *testing.T) {
	d := openKeyboardDesk(t, twoVerdicts, twoVerdicts)
	first := d.tasks[0]
	d.count.shut()
	d.open(first)
	d.do("pick 2 before the badge has its count, then type", chromedp.KeyEvent("2"), until(pressed("reject")),
		chromedp.KeyEvent(kb.Tab), until(`document.activeElement?.id === 'rationale'`),
		type_("Broken on arrival"), until(rationaleValue+` === 'Broken on arrival'`),
	)
	if got := eval[string](d, badgeText); got != "" {
		t.Fatalf("the badge has its count (%q) before the test lets it", got)
	}
	d.count.open()
	d.do("the badge gets its count", until(badgeText+` === '2'`))
	if !eval[bool](d, pressed("reject")) {
		t.Fatal("the badge's first swap dropped the pick")
	}
	d.do("Ctrl+Enter sends the pick", ctrlEnter, until(`!`+onDesk(first.ID)+` && `+formReady))
	d.wantDecided(first, "reject", "Broken on arrival")
}

// #4: after a decision from the rationale the keys pick again, and Escape
// leaves a text field.
func TestReviewKeyboard_AfterADecisionTheKeysPick(t *testing.T) {
	d := openKeyboardDesk(t, twoVerdicts, twoVerdicts)
	first, second := d.tasks[0], d.tasks[1]
	d.open(first)
	d.do("decide from the rationale with Ctrl+Enter", chromedp.KeyEvent("2"), until(pressed("reject")),
		chromedp.KeyEvent(kb.Tab), until(`document.activeElement?.id === 'rationale'`), type_("No receipt"),
		ctrlEnter, until(onDesk(second.ID)+` && `+formReady),
	)
	d.wantDecided(first, "reject", "No receipt")
	if eval[bool](d, inTextField) {
		t.Fatalf("after the decision the focus is in a text field: %s", eval[string](d, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	if !eval[bool](d, `!!document.activeElement?.closest('#review')`) {
		t.Errorf("after the decision the focus is not on the new task: %s", eval[string](d, `document.activeElement?.outerHTML.slice(0, 120) || ''`))
	}
	d.do("1 picks on the next task", chromedp.KeyEvent("1"), until(pressed("approve")))
	if got := eval[string](d, rationaleValue); got != "" {
		t.Fatalf("1 typed into the rationale: %q", got)
	}

	d.do("type a rationale, then Escape out of it", chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Tab),
		until(`document.activeElement?.id === 'rationale'`), type_("Photo shows damage"),
		chromedp.KeyEvent(kb.Escape), until(`!`+inTextField),
		chromedp.KeyEvent("2"), until(pressed("reject")),
	)
	if got := eval[string](d, rationaleValue); got != "Photo shows damage" {
		t.Fatalf("the rationale holds %q after Escape and 2", got)
	}
	d.do("Enter sends it", chromedp.KeyEvent(kb.Enter), until(`location.pathname === '/review'`))
	d.wantDecided(second, "reject", "Photo shows damage")
}

// #5: Back after a decision shows the task decided, both within the page
// (htmx's history) and across a full page load.
func TestReviewKeyboard_BackShowsADecidedTaskDecided(t *testing.T) {
	d := openKeyboardDesk(t, twoVerdicts, twoVerdicts)
	first, second := d.tasks[0], d.tasks[1]
	decided := func(id string) string {
		return onDesk(id) + ` && !!document.querySelector('[data-testid=decided]') && !document.querySelector('[data-testid=verdict-form]')`
	}
	d.open(first)
	d.do("decide the first task; the second comes in place", chromedp.KeyEvent("1"), until(pressed("approve")),
		chromedp.KeyEvent(kb.Enter), until(onDesk(second.ID)+` && `+formReady))
	d.do("Back shows the first task decided", run(`history.back()`), until(decided(first.ID)))
	d.do("1 and Enter there do nothing", chromedp.KeyEvent("1"), chromedp.KeyEvent(kb.Enter))
	d.wantDecided(first, "approve", "")
	d.wantOpen(second)

	d.do("Forward shows the second task open", run(`history.forward()`), until(onDesk(second.ID)+` && `+formReady))
	d.do("deciding the last task leads to the queue", chromedp.KeyEvent("2"), until(pressed("reject")),
		chromedp.KeyEvent(kb.Enter), until(`location.pathname === '/review' && !!document.querySelector('[data-testid=queue]')`))
	d.wantDecided(second, "reject", "")
	d.do("Back from the queue shows the last task decided", run(`history.back()`), until(decided(second.ID)))
}

// #5: a browser that keeps the desk in its back-forward cache although it
// is no-store (Safari does) shows it as it was when left; the desk loads
// itself afresh then.
func TestReviewKeyboard_BackFromTheBackForwardCacheShowsADecidedTaskDecided(t *testing.T) {
	d := openKeyboardDesk(t, twoVerdicts)
	task := d.tasks[0]
	d.cacheable.Store(true)
	d.open(task)
	d.do("note when the page comes back from the cache",
		run(`window.addEventListener('pageshow', (e) => { if (e.persisted) sessionStorage.setItem('restored', 'yes') })`))
	d.do("deciding the last task leads to the queue", chromedp.KeyEvent("1"), until(pressed("approve")),
		chromedp.KeyEvent(kb.Enter), until(`location.pathname === '/review' && !!document.querySelector('[data-testid=queue]')`))
	d.wantDecided(task, "approve", "")
	d.do("Back shows the task decided", run(`history.back()`),
		until(onDesk(task.ID)+` && !!document.querySelector('[data-testid=decided]') && !document.querySelector('[data-testid=verdict-form]')`))
	if got := eval[string](d, `sessionStorage.getItem('restored') || ''`); got != "yes" {
		t.Fatal("the page did not come from the back-forward cache, so this test proves nothing")
	}
}

// #16: a key that does nothing says why, in the status line.
func TestReviewKeyboard_SaysWhyAKeyDidNothing(t *testing.T) {
	d := openKeyboardDesk(t, twoVerdicts)
	task := d.tasks[0]
	d.open(task)
	if role := eval[string](d, `document.querySelector('[data-testid=desk-status]')?.getAttribute('role') || ''`); role != "status" {
		t.Fatalf("the status line's role is %q, want status (a polite live region)", role)
	}
	d.do("Enter with nothing picked", chromedp.KeyEvent(kb.Enter), until(deskStatus+`.includes('Nothing is picked')`))
	d.do("a digit with no verdict", chromedp.KeyEvent("7"), until(deskStatus+`.includes('no verdict 7')`))
	d.do("0", chromedp.KeyEvent("0"), until(deskStatus+`.includes('no verdict 0')`))
	d.do("/ where every verdict has a number", chromedp.KeyEvent("/"), until(deskStatus+`.includes('Every verdict here has a number')`))
	if !eval[bool](d, `(() => { const s = document.querySelector('[data-testid=desk-status]'); return s.offsetHeight > 0 && getComputedStyle(s).visibility === 'visible' })()`) {
		t.Error("the status line is not visible")
	}
	d.do("Ctrl+Enter in the rationale with nothing picked", run(`document.querySelector('[data-testid=desk-status]').textContent = ''`),
		chromedp.Focus(chromedp.CSS(`#rationale`)), ctrlEnter, until(deskStatus+`.includes('Nothing is picked')`))
	if !eval[bool](d, onDesk(task.ID)) {
		t.Fatal("the desk left the task")
	}
	d.wantOpen(task)
}

// #16: verdicts past the ninth are found by name with /.
func TestReviewKeyboard_FindsVerdictsPastTheNinth(t *testing.T) {
	d := openKeyboardDesk(t, twelveVerdicts)
	task := d.tasks[0]
	d.open(task)
	visible := `[...document.querySelectorAll('#review button[name=verdict]')].filter((b) => b.offsetParent !== null).map((b) => b.value).join(' ')`
	d.do("0 says how to reach the verdicts past nine", chromedp.KeyEvent("0"), until(deskStatus+`.includes('press /')`))
	d.do("/ opens the finder", chromedp.KeyEvent("/"), until(`document.activeElement?.id === 'verdict-filter'`))
	d.do("typing narrows the verdicts", type_("re"), until(visible+` === 'reject refund replace repair credit ignore'`))
	d.do("more letters", type_("f"), until(visible+` === 'refund'`+` && `+deskStatus+`.includes('Enter picks “refund”')`))
	d.do("Escape leaves the finder and shows every verdict", chromedp.KeyEvent(kb.Escape),
		until(`!`+inTextField+` && `+visible+` === '`+strings.Join(twelveVerdicts, " ")+`'`))
	d.do("find the twelfth and pick it with Enter", chromedp.KeyEvent("/"), until(`document.activeElement?.id === 'verdict-filter'`),
		type_("spl"), until(visible+` === 'split'`), chromedp.KeyEvent(kb.Enter), until(pressed("split")))
	if eval[bool](d, inTextField) || eval[string](d, visible) != strings.Join(twelveVerdicts, " ") {
		t.Fatalf("after the pick the focus is in a field or verdicts are hidden: %s", eval[string](d, visible))
	}
	if got := eval[string](d, `document.querySelector('#verdict-filter').getAttribute('name') || ''`); got != "" {
		t.Errorf("the finder is a form field named %q; it must not be sent", got)
	}
	d.do("Enter sends it", chromedp.KeyEvent(kb.Enter), until(`location.pathname === '/review'`))
	d.wantDecided(task, "split", "")
}

// #16: u and Escape lead back to the queue, but not over a typed rationale
// at the first press.
func TestReviewKeyboard_BackToTheQueue(t *testing.T) {
	d := openKeyboardDesk(t, twoVerdicts, twoVerdicts)
	first := d.tasks[0]
	onQueue := `location.pathname === '/review' && ` + queueReady
	d.open(first)
	if href := eval[string](d, `document.querySelector('[data-testid=back-to-queue]')?.getAttribute('href') || ''`); href != "/review" {
		t.Fatalf("the back-to-queue link leads to %q", href)
	}
	d.do("u goes back to the queue", chromedp.KeyEvent("u"), until(onQueue))
	d.do("j opens the first task", chromedp.KeyEvent("j"), until(`(`+deskTaskID+`) !== '' && `+formReady))
	d.do("Escape goes back to the queue", chromedp.KeyEvent(kb.Escape), until(onQueue))

	d.open(first)
	d.do("with a rationale typed, the first Escape out of the field and the next keep the page",
		chromedp.Focus(chromedp.CSS(`#rationale`)), type_("Half done"),
		chromedp.KeyEvent(kb.Escape), until(`!`+inTextField),
		chromedp.KeyEvent(kb.Escape), until(deskStatus+`.includes('not sent yet')`))
	if !eval[bool](d, onDesk(first.ID)) {
		t.Fatal("Escape left a typed rationale behind")
	}
	d.do("u again leaves", chromedp.KeyEvent("u"), until(onQueue))
	d.wantOpen(first)
}

// #16: the navigation's count follows each decision at once, not at its
// next ten-second refresh.
func TestReviewKeyboard_TheBadgeFollowsEachDecision(t *testing.T) {
	d := openKeyboardDesk(t, twoVerdicts, twoVerdicts, twoVerdicts)
	first := d.tasks[0]
	d.open(first)
	d.do("the badge counts three", until(badgeText+` === '3'`), run(watchBadge))
	d.do("decide", chromedp.KeyEvent("1"), until(pressed("approve")), chromedp.KeyEvent(kb.Enter),
		until(`!`+onDesk(first.ID)+` && `+formReady))
	d.do("the badge counts two", until(badgeText+` === '2'`))
	if got := eval[[]string](d, `window.badgeTriggers`); !slices.Contains(got, "queue-changed") {
		t.Errorf("the badge asked again on %q, want on the decision's queue-changed", got)
	}
}

// Queue views (issue 17): a reviewer who opens a view of the queue (one task type) works
// within it from the keyboard: j opens its first task, each decision brings
// the view's next, and the last one returns to the view, while the tasks
// outside it wait.
func TestReviewKeyboard_WorksWithinAView(t *testing.T) {
	d := openKeyboardDesk(t, twoVerdicts, twoVerdicts) // two refunds, the oldest tasks
	ctx := context.Background()
	var moderations []string
	for _, prompt := range []string{"Remove this post?", "Remove this comment?"} {
		task, err := d.store.CreateTask(ctx, d.acct.ID, arbiter.TaskCreate{Prompt: prompt, AllowedVerdicts: twoVerdicts,
			ConfidenceThreshold: 0.8, TaskType: "moderation", Touchpoint: "web"})
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := d.store.ClaimTasks(ctx, "wrk_test", 1, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].ID != task.ID {
			t.Fatalf("claimed %v, %v", claimed, err)
		}
		if err := d.store.FinishAgentAttempt(ctx, "wrk_test", task.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}); err != nil {
			t.Fatal(err)
		}
		moderations = append(moderations, task.ID)
	}
	const view = `'?task_type=moderation'`
	d.do("open the view and press j", chromedp.Navigate(d.base+"/review?task_type=moderation"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue]`)),
		chromedp.KeyEvent("j"), until(onDesk(moderations[0])+` && `+formReady+` && location.search === `+view))
	d.do("decide it: the view's next comes", chromedp.KeyEvent("1"), until(pressed("approve")),
		chromedp.KeyEvent(kb.Enter), until(onDesk(moderations[1])+` && `+formReady+` && location.search === `+view))
	d.do("decide the last of the view: back to the view", chromedp.KeyEvent("2"), until(pressed("reject")),
		chromedp.KeyEvent(kb.Enter),
		until(`location.pathname === '/review' && location.search === `+view+` && !!document.querySelector('[data-testid=queue]')`))
	for _, task := range d.tasks {
		if got := d.task(task); got.Status != arbiter.StatusHumanNeeded {
			t.Errorf("the refund %s outside the view is %s", task.ID, got.Status)
		}
	}
}

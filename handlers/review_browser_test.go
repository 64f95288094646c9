package handlers_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/web"
	"github.com/arbiterhq/arbiter/worker"
)

// serveSite serves the whole service on store, as `arbiter serve` does,
// and returns its address and the sign-in links it mails. Each wrap, if
// any, goes around the site's handler (to hold a request, say).
func serveSite(t *testing.T, store *db.DB, wrap ...func(http.Handler) http.Handler) (string, mailbox) {
	t.Helper()
	links := make(mailbox, 10)
	srv := httptest.NewUnstartedServer(nil)
	srv.Start()
	t.Cleanup(srv.Close)
	// The calibration page's backtests ask a verifiers file's `none`
	// verifier, which calls nothing.
	set, err := agent.ParseVerifiers("verifiers.yaml", []byte("verifiers:\n  - name: none\n    backend: none\ncascade: [none]\n"))
	if err != nil {
		t.Fatal(err)
	}
	verifiers, err := agent.Build(set, func(string) string { return "" }, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	backtester := agent.NewBacktester(context.Background(), verifiers, store, time.Minute, slog.New(slog.DiscardHandler))
	t.Cleanup(backtester.Wait)
	router := &web.Router{
		Services: web.Services{
			Tasks: store, Keys: store, Demo: store, Health: store, Queue: store,
			Accounts: store, Logins: store, Identities: store, Audit: store, Members: store, Reservations: store, Stats: store, Webhooks: store,
			Calibration: store, Policies: store, Backtests: store,
		},
		Backtester: backtester,
		KeyChecker: web.NewKeyChecker(store, nil),
		Logger:     slog.New(slog.DiscardHandler),
		Site:       handlers.Site{BaseURL: srv.URL, AppURL: srv.URL, ReviewURL: srv.URL},
		Sessions:   web.NewSessions(store, "0123456789abcdef0123456789abcdef", false, ""),
		Mailer:     links,
	}
	h := router.Routes()
	for _, w := range wrap {
		h = w(h)
	}
	srv.Config.Handler = h
	return srv.URL, links
}

// newBrowser starts headless Chromium for the test.
//
// The browser tests are not parallel: each drives a Chromium of its own,
// and two at once on a small machine stretch the page waits of both.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	return newBrowserFor(t, 60*time.Second)
}

// newBrowserFor starts headless Chromium for a test that may take up to
// limit in all.
func newBrowserFor(t *testing.T, limit time.Duration) context.Context {
	t.Helper()
	exe := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx)
	bctx, cancelTimeout := context.WithTimeout(bctx, limit)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAlloc() })
	return bctx
}

// deskTaskID reads the id of the task on the reviewer's desk.
const deskTaskID = `document.querySelector('#review')?.dataset.taskId || ''`

// formReady is true once htmx has taken over the verdict form; a key
// pressed before that submits the plain form, which works too but reloads
// the page under the test's feet.
const formReady = `(() => { const f = document.querySelector('[data-testid=verdict-form]'); return !!(f && f['htmx-internal-data']); })()`

// queueReady is true once htmx has taken over the queue page; the page's
// scripts, the keyboard's among them, have run by then, so a key pressed
// after it is not lost.
const queueReady = `(() => { const q = document.querySelector('[data-testid=queue]'); return !!(q && q['htmx-internal-data']); })()`

// deskReady waits until the desk shows a task other than id (any task when
// id is "") and htmx has taken over its form.
func deskReady(id string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](`(`+deskTaskID+`) !== '' && (`+deskTaskID+`) !== '`+id+`' && `+formReady,
		chromedp.WithPollingTimeout(10*time.Second))
}

func TestReview_DemoWithTheKeyboard(t *testing.T) {
	dbURL := dbtest.URL(t, db.SQLite)
	store := dbtest.OpenURL(t, dbURL, db.Options{})
	base, _ := serveSite(t, store)
	bctx := newBrowser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	do(t, bctx, "open the demo", chromedp.Navigate(base+"/review"),
		chromedp.WaitVisible(css(`[data-testid=try-demo]`)),
		chromedp.Click(css(`[data-testid=try-demo]`)),
		chromedp.WaitVisible(css(`[data-testid=demo-banner]`)),
		deskReady(""),
	)
	first := value(t, bctx, chromedp.Evaluate[string](deskTaskID))
	do(t, bctx, "pick verdict 1 and submit with Enter",
		chromedp.KeyEvent("1"),
		chromedp.Poll[chromedp.Void](`document.querySelector('[data-shortcut="1"]').getAttribute('aria-pressed') === 'true'`,
			chromedp.WithPollingTimeout(5*time.Second)),
		chromedp.KeyEvent("\r"),
		deskReady(first),
	)
	second := value(t, bctx, chromedp.Evaluate[string](deskTaskID))
	do(t, bctx, "pick verdict 2 and submit with Enter",
		chromedp.KeyEvent("2"),
		chromedp.KeyEvent("\r"),
		deskReady(second),
	)
	if done := value(t, bctx, chromedp.Text(css(`[data-testid=demo-done]`))); done != "2" {
		t.Errorf("the banner counts %q verdicts, want 2", done)
	}
	// The decisions came in place: the address follows, without a full load.
	if loc := value(t, bctx, chromedp.Location()); !strings.Contains(loc, "/review/demo/tasks/") || strings.Contains(loc, first) {
		t.Errorf("location after two verdicts = %s", loc)
	}

	// The store holds the two verdicts under one anonymous session, and the
	// demo tasks did not change.
	conn, err := sql.Open("sqlite", strings.TrimPrefix(dbURL, "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rows, err := conn.Query(`SELECT task_id, verdict, anon_session_id FROM demo_verdicts ORDER BY created_at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	sessions := map[string]bool{}
	for rows.Next() {
		var task, verdict, anon string
		rows.Scan(&task, &verdict, &anon)
		got = append(got, task+"="+verdict)
		sessions[anon] = true
	}
	firstTask, _ := store.FindDemoTask(context.Background(), first)
	secondTask, _ := store.FindDemoTask(context.Background(), second)
	want := []string{first + "=" + firstTask.AllowedVerdicts[0], second + "=" + secondTask.AllowedVerdicts[1]}
	if strings.Join(got, " ") != strings.Join(want, " ") || len(sessions) != 1 {
		t.Errorf("demo verdicts = %v from %d sessions, want %v from one", got, len(sessions), want)
	}
	if firstTask.Status != arbiter.StatusHumanNeeded || len(firstTask.Attempts) != 1 {
		t.Errorf("a demo task changed: %+v", firstTask)
	}
}

func TestReview_DecideAnAPITaskInABrowser(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	// The API creates a task; the worker, with the default agent, hands it
	// to a human.
	acct, _ := store.FindOrCreateAccountByEmail(context.Background(), "reviewer@example.com")
	_, key, _ := store.CreateAPIKey(context.Background(), acct.ID, "test", arbiter.Actor{Email: "test@example.com"})
	w := worker.New(worker.Config{Queue: store, Verifier: agent.None{}, Health: store,
		Logger: slog.New(slog.DiscardHandler), Poll: 10 * time.Millisecond})
	wctx, stop := context.WithCancel(context.Background())
	defer stop()
	go w.Run(wctx)
	status, created := testutil.APICall(t, "POST", base+"/v1/tasks", key,
		`{"prompt":"Refund order ord_7 for a broken mug?","allowed_verdicts":["approve","reject"],"context":{"amount":12}}`)
	if status != http.StatusOK {
		t.Fatalf("create = %d", status)
	}
	id := created["id"].(string)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, task := testutil.APICall(t, "GET", base+"/v1/tasks/"+id, key, ""); task["status"] == arbiter.StatusHumanNeeded {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the task never reached a human: %v", task["status"])
		}
	}

	// Sign in by e-mail link, open the queue, take the task with j, decide
	// it with 2 and Enter.
	do(t, bctx, "ask for a link", chromedp.Navigate(base+"/review"),
		chromedp.WaitVisible(css(`a.btn-primary[href^="/signin"]`)),
		chromedp.Click(css(`a.btn-primary[href^="/signin"]`)),
		chromedp.WaitVisible(css(`#email`)),
		chromedp.SendKeys(css(`#email`), "reviewer@example.com"),
		chromedp.Click(css(`form[action="/signin/email"] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=email-sent]`)),
	)
	link := links.next(t)
	do(t, bctx, "sign in and review", chromedp.Navigate(link),
		chromedp.WaitVisible(css(`[data-testid=confirm-sign-in]`)),
		chromedp.Click(css(`[data-testid=confirm-sign-in]`)),
		chromedp.WaitVisible(css(`[data-testid=queue-item]`)),
		chromedp.Poll[chromedp.Void](queueReady, chromedp.WithPollingTimeout(10*time.Second)),
		chromedp.KeyEvent("j"),
		chromedp.WaitVisible(css(`[data-testid=verdict-form]`)),
		deskReady(""),
		chromedp.KeyEvent("2"),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(css(`[data-testid=empty-state]`)),
	)

	_, task := testutil.APICall(t, "GET", base+"/v1/tasks/"+id, key, "")
	if task["status"] != "completed" || task["final_tier"] != "human" || task["final_verdict"] != "reject" || task["final_confidence"] != 1.0 {
		t.Fatalf("the API shows %v", task)
	}
	attempts := task["attempts"].([]any)
	if last := attempts[len(attempts)-1].(map[string]any); last["reviewer"] != "reviewer@example.com" {
		t.Errorf("the human attempt = %v", last)
	}
}

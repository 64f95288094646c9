package handlers_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// axeScript returns axe-core's browser script from node_modules (npm ci
// installs it; see package.json). Without it the test skips, except in CI,
// where `make generate-check` has run npm ci and a missing axe is a failure.
func axeScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("axe-core is missing; CI installs it with npm ci: %v", err)
		}
		t.Skipf("axe-core is not installed (run npm ci): %v", err)
	}
	return string(b)
}

// axeViolation is one rule axe-core found broken on a page, with the
// elements that break it.
type axeViolation struct {
	ID      string   `json:"id"`
	Impact  string   `json:"impact"`
	Help    string   `json:"help"`
	Targets []string `json:"targets"`
}

func (v axeViolation) String() string {
	targets := v.Targets
	if len(targets) > 5 {
		targets = append(targets[:5:5], fmt.Sprintf("and %d more", len(v.Targets)-5))
	}
	return fmt.Sprintf("%s (%s): %s: %s", v.ID, v.Impact, v.Help, strings.Join(targets, ", "))
}

// axeRun is the script that runs axe-core on the whole page and answers
// its serious and critical violations.
const axeRun = `axe.run(document, {resultTypes: ['violations']}).then(r => r.violations
	.filter(v => v.impact === 'serious' || v.impact === 'critical')
	.map(v => ({id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map(n => n.target.join(' '))})))`

// checkAccessibility injects axe-core into the page the browser shows and
// fails the test on every violation of impact serious or critical.
func checkAccessibility(t *testing.T, bctx context.Context, script, page string) {
	t.Helper()
	if err := chromedp.Do(bctx, chromedp.Evaluate[chromedp.Void]("if (!window.axe) {\n"+script+"\n}")); err != nil {
		t.Fatalf("inject axe-core into %s: %v", page, err)
	}
	violations, err := chromedp.Run(bctx, chromedp.Evaluate[[]axeViolation](axeRun, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("run axe-core on %s: %v", page, err)
	}
	for _, v := range violations {
		t.Errorf("%s: %s", page, v)
	}
}

// TestAccessibility_Axe runs axe-core over every kind of page, signed out
// and signed in, at desktop and phone widths: sign-in, overview, keys,
// tasks and a task, the audit log, webhooks, an endpoint and a message,
// the calibration report and the audit rate, the review queue (with an
// audit), a task and an audit on the desk, and the demo with its report.
func TestAccessibility_Axe(t *testing.T) {
	script := axeScript(t)
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	// Thirty-four pages, each checked whole: more than the usual minute under
	// the race detector on a busy machine.
	bctx := newBrowserFor(t, 7*time.Minute)

	// The account has a key, tasks in each state, and one waiting for a
	// human with a context to show.
	ctx := context.Background()
	acct, _ := store.FindOrCreateAccountByEmail(ctx, "person@example.com")
	if _, _, err := store.CreateAPIKey(ctx, acct.ID, "production backend", arbiter.Actor{Email: "person@example.com"}); err != nil {
		t.Fatal(err)
	}
	// The context is big enough that its box scrolls.
	lines := make([]string, 60)
	for i := range lines {
		lines[i] = fmt.Sprintf(`"line_%02d": "%s"`, i, strings.Repeat("word ", 30))
	}
	bigContext := `{"order":{"id":"ord_7","amount":12.5,"note":"line one\nline two"},` + strings.Join(lines, ",") + `}`
	var waiting, audited *arbiter.Task
	for i := range 3 {
		in := arbiter.TaskCreate{Prompt: fmt.Sprintf("Refund order ord_%d for a broken mug?", i),
			AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email",
			Source: "support-bot", Context: []byte(bigContext)}
		if i == 1 { // completed by the agent, and audited
			one := 1.0
			in.AuditRate = &one
		}
		task, err := store.CreateTask(ctx, acct.ID, in)
		if err != nil {
			t.Fatal(err)
		}
		switch i {
		case 0:
			waiting = task
		case 1:
			audited = task
		}
	}
	claimed, err := store.ClaimTasks(ctx, "w", 2, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		verdict, confidence, model := "approve", 0.95, "test-model"
		step := arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence,
			Model: &model, Rationale: "Under the limit."}, Next: arbiter.StatusCompleted}
		if c.ID == waiting.ID {
			step = arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Rationale: "Not sure."}, Next: arbiter.StatusHumanNeeded}
		}
		if err := store.FinishAgentAttempt(ctx, "w", c.ID, step); err != nil {
			t.Fatal(err)
		}
	}

	// An endpoint with a message whose one attempt failed.
	endpoint, err := store.CreateWebhookEndpoint(ctx, acct.ID, arbiter.WebhookEndpointInput{URL: "https://example.com/hooks",
		Description: "CRM sync"}, false, arbiter.Actor{Email: "person@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	ping, err := store.SendWebhookPing(ctx, acct.ID, endpoint.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.ClaimWebhookMessages(ctx, "whd", 100, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := store.RecordWebhookAttempt(ctx, "whd", ping.ID, arbiter.WebhookStep{Status: arbiter.WebhookFailed,
		Attempt: arbiter.WebhookAttempt{StatusCode: 502, ResponseBody: "Bad gateway", AttemptedAt: arbiter.TimestampOf(time.Now())}}); err != nil {
		t.Fatal(err)
	}

	// A finished backtest, listed on the calibration page beside its form.
	cost := 0.0012
	backtest, err := store.SaveBacktestRun(ctx, &arbiter.BacktestRun{AccountID: acct.ID, Filter: arbiter.NewBacktestFilter("none"),
		StartedAt: arbiter.TimestampOf(time.Now()), FinishedAt: arbiter.TimestampOf(time.Now()),
		Report: arbiter.BacktestReport{Verifier: "none", Tasks: 2, Candidate: arbiter.BacktestSide{Answered: 2, Decided: 1, Coverage: 0.5,
			Cost: 0.0024, CostPerDecided: &cost}}})
	if err != nil {
		t.Fatal(err)
	}

	type page struct {
		name, path string
		ready      string // a selector shown once the page is ready
	}
	signedOut := []page{
		{"sign-in", "/signin", `#email`},
		{"demo", "/review/demo", `[data-testid=demo-banner]`},
		{"demo calibration", "/review/demo/calibration", `[data-testid=recommendation]`},
	}
	signedIn := []page{
		{"overview", "/", `[data-testid=usage]`},
		{"keys", "/keys", `[data-testid=key-list]`},
		{"tasks", "/tasks", `[data-testid=task-list]`},
		{"task", "/tasks/" + waiting.ID, `[data-testid=task-facts]`},
		{"audit", "/audit", `[data-testid=audit-list]`},
		{"webhooks", "/webhooks", `[data-testid=endpoint-list]`},
		{"webhook", "/webhooks/" + endpoint.ID, `[data-testid=message-list]`},
		{"webhook message", "/webhooks/" + endpoint.ID + "/messages/" + ping.ID, `[data-testid=attempt-list]`},
		{"queue", "/review", `[data-testid=queue]`},
		{"desk", "/review/tasks/" + waiting.ID, `[data-testid=verdict-form]`},
		{"members", "/members", `[data-testid=member-list]`},
		{"settings", "/settings", `#reservation-minutes`},
		{"stats", "/review/stats", `[data-testid=stats-table]`},
		{"audit desk", "/review/tasks/" + audited.ID, `[data-testid=audit-banner]`},
		{"calibration", "/calibration", `[data-testid=backtest-runs]`},
		{"audit rate", "/settings/audit", `[data-testid=audit-rate-input]`},
		{"backtest", "/calibration/backtests/" + backtest, `[data-testid=backtest-report]`},
	}
	visit := func(pages []page) {
		for _, width := range []int64{desktopWidth, phoneWidth} {
			for _, p := range pages {
				name := fmt.Sprintf("%s at %d px", p.name, width)
				do(t, bctx, "open "+name,
					viewport(width, desktopHeight),
					chromedp.Navigate(base+p.path),
					chromedp.WaitVisible(chromedp.CSS(p.ready)),
				)
				checkAccessibility(t, bctx, script, name)
			}
		}
	}
	visit(signedOut)
	signInByEmail(t, bctx, base, links, "person@example.com")
	visit(signedIn)
}

// deskTask stores a task for the account and runs the verifier's step on
// it, as the worker does: to a human (Next human_needed), or completed by
// the agent, audited when in.AuditRate says so.
func deskTask(t *testing.T, store *db.DB, accountID string, in arbiter.TaskCreate, next string) *arbiter.Task {
	t.Helper()
	ctx := t.Context()
	if in.AllowedVerdicts == nil {
		in.AllowedVerdicts = []string{"approve", "reject"}
	}
	in.ConfidenceThreshold, in.TaskType, in.Touchpoint = 0.8, "refund", "email"
	task, err := store.CreateTask(ctx, accountID, in)
	if err != nil {
		t.Fatal(err)
	}
	if next == "" {
		return task
	}
	claimed, err := store.ClaimTasks(ctx, "wrk_axe", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		step := arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Rationale: "Not sure."}, Next: arbiter.StatusHumanNeeded}
		if next == arbiter.StatusCompleted {
			verdict, confidence, model := in.AllowedVerdicts[0], 0.95, "test-model"
			step = arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence,
				Model: &model, Rationale: "Under the limit."}, Next: arbiter.StatusCompleted}
		}
		if err := store.FinishAgentAttempt(ctx, "wrk_axe", c.ID, step); err != nil {
			t.Fatal(err)
		}
	}
	return task
}

// joinAsReviewer makes email a reviewer of the account, invited by the
// owner, and returns the person.
func joinAsReviewer(t *testing.T, store *db.DB, accountID, owner, email string) *arbiter.Person {
	t.Helper()
	ctx := t.Context()
	inviter, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: owner, Email: owner, EmailVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	_, token, err := store.CreateInvitation(ctx, accountID, email, arbiter.RoleReviewer, arbiter.Actor{Email: inviter.Email, PersonID: inviter.ID})
	if err != nil {
		t.Fatal(err)
	}
	person, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: email, Email: email, EmailVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.AcceptInvitation(ctx, token, person.ID, arbiter.Client{}); err != nil {
		t.Fatal(err)
	}
	return person
}

// TestAccessibility_AxeOnEveryDeskState runs axe-core over every state the
// reviewer's desk can be in, at desktop and phone widths, and fails on any
// serious or critical finding: the queue with a task another reviewer
// holds and an audit; on the desk, a task another reviewer holds, the
// refusal of a verdict on it (conflict), an audit, an expired task, a
// decided one, a long prompt, twelve verdicts, a big context, and a
// context with more values than the tree shows, whose array is labelled
// with its real length.
func TestAccessibility_AxeOnEveryDeskState(t *testing.T) {
	script := axeScript(t)
	// The store's clock runs an hour behind, so a task made with a minute's
	// deadline is past it by the database's clock and expires at once.
	store := dbtest.Open(t, db.SQLite, db.Options{Now: steadyClock()})
	base, links := serveSite(t, store)
	bctx := newBrowserFor(t, 5*time.Minute)
	ctx := t.Context()

	acct, err := store.FindOrCreateAccountByEmail(ctx, "ann@example.com")
	if err != nil {
		t.Fatal(err)
	}
	bob := joinAsReviewer(t, store, acct.ID, "ann@example.com", "bob@example.com")

	expired := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund a parcel that never came?", DeadlineSeconds: 60}, "")
	if ids, err := store.ExpireTasks(ctx, 10); err != nil || len(ids) != 1 {
		t.Fatalf("expired %v, %v", ids, err)
	}
	held := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund order ord_1 for a broken mug?"}, arbiter.StatusHumanNeeded)
	if r, err := store.ReserveTask(ctx, acct.ID, held.ID, bob.ID); err != nil || r == nil || r.PersonID != bob.ID {
		t.Fatalf("bob's reservation: %+v, %v", r, err)
	}
	one := 1.0
	audit := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund order ord_2 for a late parcel?", AuditRate: &one}, arbiter.StatusCompleted)
	zero := 0.0
	decided := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund order ord_3?", AuditRate: &zero}, arbiter.StatusCompleted)
	long := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: longPrompt()}, arbiter.StatusHumanNeeded)
	many := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Which action fits this complaint?", AllowedVerdicts: twelveVerdicts}, arbiter.StatusHumanNeeded)
	big := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund this order of many parts?", Context: []byte(bigContext())}, arbiter.StatusHumanNeeded)
	// 300 orders of ten values each: more than the tree keeps.
	orders := make([]string, 300)
	for i := range orders {
		orders[i] = fmt.Sprintf(`{"id":%d,"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9}`, i)
	}
	counted := deskTask(t, store, acct.ID, arbiter.TaskCreate{Prompt: "Refund one of these orders?",
		Context: []byte(`{"orders":[` + strings.Join(orders, ",") + `]}`)}, arbiter.StatusHumanNeeded)

	type state struct {
		name, path string
		ready      string // a selector shown once the page is in the state
		act        []chromedp.Action[chromedp.Void]
		check      string // a JavaScript condition the state must meet, if any
	}
	states := []state{
		{"queue with a held task and an audit", "/review", `[data-testid=queue-item-reserved]`, nil, ""},
		{"held task", "/review/tasks/" + held.ID, `[data-testid=reservation-other]`, nil, ""},
		{"refused verdict on a held task", "/review/tasks/" + held.ID, `[data-testid=review-error]`,
			[]chromedp.Action[chromedp.Void]{waitFor(formReady), chromedp.Click(chromedp.CSS(`[data-shortcut="1"]`))}, ""},
		{"audit", "/review/tasks/" + audit.ID, `[data-testid=audit-banner]`, nil, ""},
		{"expired task", "/review/tasks/" + expired.ID, `[data-testid=expired]`, nil, ""},
		{"decided task", "/review/tasks/" + decided.ID, `[data-testid=decided]`, nil, ""},
		{"long prompt", "/review/tasks/" + long.ID, `[data-testid=prompt-more]`, nil, ""},
		{"twelve verdicts", "/review/tasks/" + many.ID, `[data-testid=verdict-filter]`, nil, ""},
		{"big context", "/review/tasks/" + big.ID, `[data-testid=context-raw]`, nil, ""},
		// Every count is the real length, however much of it the tree shows.
		{"context of 300 orders", "/review/tasks/" + counted.ID, `[data-testid=context-omitted]`, nil,
			`[...document.querySelectorAll('[data-testid=context] summary')].some(s => s.textContent.includes('[300 items]'))`},
	}
	signInAs(t, bctx, base, links, "ann@example.com")
	for _, size := range []struct{ width, height int64 }{{desktopWidth, desktopHeight}, {phoneWidth, phoneHeight}} {
		for _, s := range states {
			name := fmt.Sprintf("%s at %d px", s.name, size.width)
			actions := []chromedp.Action[chromedp.Void]{viewport(size.width, size.height), chromedp.Navigate(base + s.path)}
			actions = append(actions, s.act...)
			do(t, bctx, "open "+name, append(actions, chromedp.WaitVisible(chromedp.CSS(s.ready)))...)
			if s.check != "" && !value(t, bctx, chromedp.Evaluate[bool](s.check)) {
				t.Errorf("%s: %s does not hold", name, s.check)
			}
			checkAccessibility(t, bctx, script, name)
		}
	}
}

// TestWebhookMessage_FitsAPhone opens a webhook message's page at 390 px:
// its id, in the heading, wraps instead of widening the page.
func TestWebhookMessage_FitsAPhone(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	ctx := t.Context()
	acct, err := store.FindOrCreateAccountByEmail(ctx, "person@example.com")
	if err != nil {
		t.Fatal(err)
	}
	endpoint, err := store.CreateWebhookEndpoint(ctx, acct.ID, arbiter.WebhookEndpointInput{URL: "https://example.com/hooks"}, false,
		arbiter.Actor{Email: "person@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	ping, err := store.SendWebhookPing(ctx, acct.ID, endpoint.ID)
	if err != nil {
		t.Fatal(err)
	}
	signInByEmail(t, bctx, base, links, "person@example.com")
	do(t, bctx, "open the message on a phone", viewport(phoneWidth, phoneHeight),
		chromedp.Navigate(base+"/webhooks/"+endpoint.ID+"/messages/"+ping.ID),
		chromedp.WaitVisible(chromedp.CSS(`main h1`)),
	)
	if !value(t, bctx, chromedp.Evaluate[bool](noOverflow)) {
		t.Errorf("the message's page is %v px wide in a 390 px window",
			value(t, bctx, chromedp.Evaluate[float64](`document.documentElement.scrollWidth`)))
	}
}

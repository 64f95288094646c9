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
		{"calibration", "/calibration", `[data-testid=recommendation]`},
		{"audit rate", "/settings/audit", `[data-testid=audit-rate-input]`},
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

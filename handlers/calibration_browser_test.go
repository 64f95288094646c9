package handlers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// recordCSPViolations makes every page the browser loads from now on keep
// the Content-Security-Policy violations it reports in window.__csp. The
// recorder is added through the DevTools protocol, which the page's CSP
// does not govern, and runs before the page's own parsing.
func recordCSPViolations() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.__csp = []; document.addEventListener('securitypolicyviolation',
				e => window.__csp.push(e.violatedDirective + ' ' + (e.blockedURI || 'inline')));`,
		})
		return err
	})
}

// cspViolations reads what the page recorded.
const cspViolations = `(window.__csp || ['the recorder did not run']).join('; ')`

// TestCalibration_ReportInABrowser opens the calibration report, the demo's
// and an account's, at both widths: the charts draw, the page reports no
// Content-Security-Policy violation (a control proves the recorder hears
// one), and without JavaScript the charts are still there.
func TestCalibration_ReportInABrowser(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	do(t, bctx, "install the CSP recorder", recordCSPViolations())

	// The account has one audit, answered against the agent.
	ctx := context.Background()
	acct, _ := store.FindOrCreateAccountByEmail(ctx, "person@example.com")
	one := 1.0
	task, err := store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
		ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "chat", AuditRate: &one})
	if err != nil {
		t.Fatal(err)
	}
	claimed, _ := store.ClaimTasks(ctx, "w", 1, time.Minute)
	verdict, confidence := "approve", 0.9
	if err := store.FinishAgentAttempt(ctx, "w", claimed[0].ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent,
		Verdict: &verdict, Confidence: &confidence}, Next: arbiter.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "person@example.com"}); err != nil {
		t.Fatal(err)
	}

	check := func(name, path string) {
		t.Helper()
		for _, width := range []int64{desktopWidth, phoneWidth} {
			do(t, bctx, "open "+name,
				viewport(width, desktopHeight),
				chromedp.Navigate(base+path),
				chromedp.WaitVisible(chromedp.CSS(`svg[data-testid=reliability]`)),
				chromedp.WaitVisible(chromedp.CSS(`svg[data-testid=risk-coverage]`)),
			)
			if got := value(t, bctx, chromedp.Evaluate[string](cspViolations)); got != "" {
				t.Errorf("%s at %d px: CSP violations: %s", name, width, got)
			}
			// The charts have a size and their marks.
			size := value(t, bctx, chromedp.Evaluate[float64](`document.querySelector('svg[data-testid=reliability]').getBoundingClientRect().width`))
			if size < 200 {
				t.Errorf("%s at %d px: the reliability diagram is %v px wide", name, width, size)
			}
		}
	}
	check("the demo report", "/review/demo/calibration")
	if n := value(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll('svg[data-testid=reliability] circle').length`)); n < 5 {
		t.Errorf("the demo's reliability diagram has %d points", n)
	}

	// The control: an inline style, which the CSP forbids, is heard.
	do(t, bctx, "break the CSP on purpose",
		chromedp.Evaluate[chromedp.Void](`document.body.insertAdjacentHTML('beforeend', '<p style="color: red">x</p>')`),
		chromedp.Poll[chromedp.Void](`window.__csp.length > 0`, chromedp.WithPollingTimeout(5*time.Second)),
	)
	if got := value(t, bctx, chromedp.Evaluate[string](cspViolations)); !strings.Contains(got, "style-src") {
		t.Errorf("the control reported %q, want a style-src violation", got)
	}

	signInByEmail(t, bctx, base, links, "person@example.com")
	check("the account's report", "/calibration")
	if got := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=disagreements]`))); !strings.Contains(got, task.ID) {
		t.Errorf("the report's disagreements say %q", got)
	}

	// Without JavaScript the charts are the same page.
	noScript := chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
		return err
	})
	do(t, bctx, "open the report without JavaScript", noScript,
		chromedp.Navigate(base+"/review/demo/calibration?target_error_rate=5%25"),
		chromedp.WaitVisible(chromedp.CSS(`svg[data-testid=risk-coverage] polyline`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=recommended-threshold]`)),
	)
}

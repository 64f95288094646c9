package handlers_test

import (
	"context"
	"fmt"
	"os"
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
	// docs/calibration.md's picture (docs/calibration.png), with ARBITER_SCREENSHOTS
	// set: the top of the demo's report, its certificate card in view.
	if os.Getenv("ARBITER_SCREENSHOTS") != "" {
		do(t, bctx, "take the report's picture", viewport(1100, 1540),
			chromedp.Navigate(base+"/review/demo/calibration"),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid=certification]`)),
			screenshot("calibration"))
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

// TestCalibration_ApplyInABrowser: an owner whose audits certify a
// threshold sees the offer to apply it to the default policy on the
// report, which passes axe-core and the CSP, and one click makes it the
// policy's threshold and shows the policy.
func TestCalibration_ApplyInABrowser(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	script := axeScript(t)
	do(t, bctx, "install the CSP recorder", recordCSPViolations())

	// 160 blind audits at 0.95, every one agreeing, and one task routed
	// at 0.5 that a person agreed with: together they certify 0.50.
	ctx := context.Background()
	acct, _ := store.FindOrCreateAccountByEmail(ctx, "person@example.com")
	one := 1.0
	var creates []arbiter.TaskCreate
	for i := range 161 {
		creates = append(creates, arbiter.TaskCreate{Prompt: fmt.Sprintf("Refund %d?", i), AllowedVerdicts: []string{"approve", "reject"},
			ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "chat", AuditRate: &one})
	}
	for i := 0; i < len(creates); i += arbiter.MaxBatchTasks {
		if _, err := store.CreateTasks(ctx, acct.ID, creates[i:min(len(creates), i+arbiter.MaxBatchTasks)]); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for routed := true; ; routed = false {
		claimed, err := store.ClaimTasks(ctx, "w", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) == 0 {
			break
		}
		for i, c := range claimed {
			verdict, confidence, next := "approve", 0.95, arbiter.StatusCompleted
			if routed && i == 0 {
				confidence, next = 0.5, arbiter.StatusHumanNeeded
			}
			if err := store.FinishAgentAttempt(ctx, "w", c.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent,
				Verdict: &verdict, Confidence: &confidence}, Next: next}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, c.ID)
		}
	}
	for _, id := range ids {
		if _, err := store.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: "person@example.com"}); err != nil {
			t.Fatal(err)
		}
	}

	signInByEmail(t, bctx, base, links, "person@example.com")
	for _, width := range []int64{desktopWidth, phoneWidth} {
		do(t, bctx, "open the report", viewport(width, desktopHeight),
			chromedp.Navigate(base+"/calibration"),
			chromedp.WaitVisible(chromedp.CSS(`[data-testid=apply-threshold-button]`)),
		)
		checkAccessibility(t, bctx, script, fmt.Sprintf("the report with its offer at %d px", width))
		if got := value(t, bctx, chromedp.Evaluate[string](cspViolations)); got != "" {
			t.Errorf("at %d px: CSP violations: %s", width, got)
		}
	}
	label := value(t, bctx, chromedp.Text(chromedp.CSS(`[data-testid=apply-threshold-button]`)))
	// The routed decision at 0.5 counts beside the audits at 0.95: the
	// certificate reaches 0.50, where a label is, not 0.51, where none was.
	if label != "Apply 0.50 to the default policy" {
		t.Fatalf("the offer says %q", label)
	}
	do(t, bctx, "apply it",
		chromedp.Click(chromedp.CSS(`[data-testid=apply-threshold-button]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=policy-saved]`)),
	)
	p, err := store.FindPolicy(ctx, acct.ID, arbiter.DefaultPolicyName)
	if err != nil || p.ConfidenceThreshold == nil || *p.ConfidenceThreshold != 0.5 {
		t.Fatalf("the default policy: %+v (%v), want the threshold 0.5", p, err)
	}
}

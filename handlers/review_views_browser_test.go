package handlers_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// richContext is a task's context with every view of the desk: a
// conversation with an inline image and markup to escape, a tool call, a
// diff, Markdown with raw HTML and a script link, and an image elsewhere.
func richContext(t *testing.T) string {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 40, 24))
	for i := range img.Pix {
		img.Pix[i] = 0x80
	}
	img.Set(1, 1, color.NRGBA{200, 30, 30, 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	photo := "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
	ctx := map[string]any{
		"conversation": []any{
			map[string]any{"role": "system", "content": "Refunds over 50 EUR need a person."},
			map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": `The box came crushed <img src=x onerror="window.__xss=1">`},
				map[string]any{"type": "image_url", "image_url": map[string]any{"url": photo}},
			}},
			map[string]any{"role": "assistant", "content": "I have asked for a refund."},
		},
		"action": map[string]any{"name": "issue_refund", "arguments": map[string]any{
			"order": "ord_7", "amount": map[string]any{"amount": "84.90", "currency": "EUR"}}},
		// The diff's last line is wider than a phone.
		"diff": "--- a/pager.go\n+++ b/pager.go\n@@ -1,4 +1,4 @@\n func Page() {\n-\tstart := page * size\n+\tstart := (page - 1) * size\n" +
			" }\n // " + strings.Repeat("a comment wider than a phone ", 4) + "\n",
		"summary": map[string]any{"type": "markdown", "text": "# Summary\n\n**Refund** per the [policy](https://example.com/policy).\n\n" +
			"- [x] Read the *conversation*\n- [ ] Call the customer\n\n" +
			"<script>window.__xss=2</script> [click](javascript:window.__xss=3)"},
		"photo": map[string]any{"type": "image", "url": "https://cdn.example.com/p.png"},
	}
	b, err := json.Marshal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReviewDesk_RichViews opens a task whose context holds every view on
// the desk at desktop and phone widths: each view is there and visible,
// the inline image has loaded and no image comes from elsewhere, nothing
// the task holds ran, the page does not scroll sideways, the CSP reported
// nothing and axe finds nothing serious; the keyboard reaches the diff
// and, on a phone, scrolls its wide line into view; then the keyboard
// still decides.
func TestReviewDesk_RichViews(t *testing.T) {
	script := axeScript(t)
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	do(t, bctx, "install the CSP recorder", recordCSPViolations())
	task := waitingTask(t, store, "reviewer@example.com", "Refund order ord_7?", richContext(t))
	signInAs(t, bctx, base, links, "reviewer@example.com")

	views := []string{"conversation", "tool-call", "image", "diff", "markdown", "money"}
	for _, size := range []struct{ width, height int64 }{{desktopWidth, desktopHeight}, {phoneWidth, phoneHeight}} {
		do(t, bctx, "open the task", viewport(size.width, size.height),
			chromedp.Navigate(base+"/review/tasks/"+task.ID), deskReady(""),
			waitFor(`document.querySelector('[data-view=image] img')?.complete === true`),
		)
		for _, view := range views {
			visible := value(t, bctx, chromedp.Evaluate[bool](`(() => { const e = document.querySelector('[data-view="`+view+`"]');
				return !!e && e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().height > 0 })()`))
			if !visible {
				t.Errorf("at %d px the %s view is missing or hidden", size.width, view)
			}
		}
		checks := map[string]string{
			"the inline image loaded":       `document.querySelector('[data-view=image] img').naturalWidth === 40`,
			"no image comes from elsewhere": `[...document.images].every(i => i.src.startsWith('data:') || i.src.startsWith(location.origin))`,
			"the remote image is a link":    `!!document.querySelector('[data-view=image] a[href="https://cdn.example.com/p.png"][rel="noopener noreferrer nofollow"]')`,
			"nothing from the task ran":     `window.__xss === undefined && !document.querySelector('[data-view] script, [data-view] [onerror]')`,
			"no script link":                `![...document.querySelectorAll('a')].some(a => a.href.startsWith('javascript:'))`,
			"the diff marks its lines":      `document.querySelectorAll('[data-view=diff] .diff-add').length === 1 && document.querySelectorAll('[data-view=diff] .diff-del').length === 1`,
			"the markdown is rendered":      `document.querySelector('[data-view=markdown] h1')?.textContent === 'Summary'`,
			"the task list's boxes are named by their items": `[...document.querySelectorAll('[data-view=markdown] input[type=checkbox]')]
				.map(b => b.checked + ' ' + b.getAttribute('aria-label')).join('|') === 'true Read the conversation|false Call the customer'`,
			"the page does not scroll sideways": noSideScroll,
		}
		for name, js := range checks {
			if !value(t, bctx, chromedp.Evaluate[bool](js)) {
				t.Errorf("at %d px: not so: %s", size.width, name)
			}
		}
		if got := value(t, bctx, chromedp.Evaluate[string](cspViolations)); got != "" {
			t.Errorf("at %d px: CSP violations: %s", size.width, got)
		}
		checkAccessibility(t, bctx, script, "the desk with rich views")
		tabToDiff(t, bctx, size.width)
	}

	do(t, bctx, "decide with the keyboard",
		chromedp.KeyEvent("1"), until(pressed("approve")),
		ctrlEnter, until(`!`+onDesk(task.ID)),
	)
	got, err := store.FindTaskByID(context.Background(), task.AccountID, task.ID)
	if err != nil || got.Status != arbiter.StatusCompleted || got.FinalVerdict == nil || *got.FinalVerdict != "approve" {
		t.Fatalf("the task is %+v, %v; want approved", got, err)
	}
	if strings.Contains(value(t, bctx, chromedp.Evaluate[string](cspViolations)), "img-src") {
		t.Error("an image was refused by the CSP")
	}

	// docs/reviewer-site.md's picture (docs/desk-views.png): the demo's refund, its conversation and photo.
	if os.Getenv("ARBITER_SCREENSHOTS") != "" {
		do(t, bctx, "capture the demo", viewport(desktopWidth, 1100),
			chromedp.Navigate(base+"/review/demo/tasks/"+arbiter.DemoTaskIDPrefix+"refund_late_delivery"), deskReady(""),
			screenshot("desk-views"))
	}
}

// tabToDiff presses Tab until the diff view has the focus; where its lines
// are wider than the box (a phone), the right arrow scrolls them.
func tabToDiff(t *testing.T, bctx context.Context, width int64) {
	t.Helper()
	const onDiff = `document.activeElement?.dataset.view === 'diff'`
	for tab := 0; !value(t, bctx, chromedp.Evaluate[bool](onDiff)); tab++ {
		if tab == 80 {
			t.Fatalf("at %d px, 80 presses of Tab never reach the diff", width)
		}
		do(t, bctx, "press Tab", chromedp.KeyEvent(kb.Tab))
	}
	const diff = `document.querySelector('[data-view=diff]')`
	if width != phoneWidth {
		return
	}
	if !value(t, bctx, chromedp.Evaluate[bool](diff+`.scrollWidth > `+diff+`.clientWidth && `+diff+`.scrollLeft === 0`)) {
		t.Fatalf("at %d px the diff's lines fit, or it starts scrolled: nothing to scroll", width)
	}
	do(t, bctx, "scroll the diff with the right arrow", chromedp.KeyEvent(kb.ArrowRight), until(diff+`.scrollLeft > 0`))
}

package handlers_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// mailbox is a LoginMailer that hands each link to the test.
type mailbox chan string

func (m mailbox) SendLoginLink(_ context.Context, _, link string) error {
	m <- link
	return nil
}

// next waits up to 30 s for the next link sent.
func (m mailbox) next(t *testing.T) string {
	t.Helper()
	select {
	case link := <-m:
		return link
	case <-time.After(30 * time.Second):
		t.Fatal("no sign-in link was sent")
		return ""
	}
}

// chromium returns Debian's Chromium, skipping the test without it, except
// in CI, which must have it. Under go test -short (the fast lane) every
// browser test skips.
func chromium(t *testing.T) string {
	if testing.Short() {
		t.Skip("-short: the browser tests run in make test")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; CI installs it with apt")
	}
	t.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// TestDashboard_InABrowser drives the dashboard in headless Chromium: sign in
// by e-mail link, create a key, copy it, use it against the API, and revoke
// it through the confirmation dialog. With ARBITER_SCREENSHOTS=DIR it leaves
// screenshots of each page there, at desktop and phone widths.
func TestDashboard_InABrowser(t *testing.T) {
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)

	shots := os.Getenv("ARBITER_SCREENSHOTS")
	shoot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
			if shots == "" {
				return nil
			}
			for _, w := range []struct {
				suffix        string
				width, height int64
			}{{"", 1280, 900}, {"-phone", 390, 844}} {
				if _, err := chromedp.EmulateViewport(w.width, w.height)(ctx, tgt); err != nil {
					return err
				}
				png, err := chromedp.FullScreenshot(100)(ctx, tgt)
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(shots, name+w.suffix+".png"), png, 0o644); err != nil {
					return err
				}
			}
			_, err := chromedp.EmulateViewport(1280, 900)(ctx, tgt)
			return err
		})
	}
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }

	// Sign in by e-mail link.
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		_, err := chromedp.CallBrowser(bctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name}, Setting: browser.PermissionSettingGranted, Origin: base,
		})
		if err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
	}
	do(t, bctx, "ask for a link",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(css(`#email`)),
		shoot("signin"),
		chromedp.SendKeys(css(`#email`), "person@example.com"),
		chromedp.Click(css(`form[action="/signin/email"] button[type=submit]`)),
		chromedp.WaitVisible(css(`[data-testid=email-sent]`)),
	)
	link := links.next(t)
	do(t, bctx, "confirm the link",
		chromedp.Navigate(link),
		chromedp.WaitVisible(css(`[data-testid=confirm-sign-in]`)),
		shoot("confirm"),
		chromedp.Click(css(`[data-testid=confirm-sign-in]`)),
		chromedp.WaitVisible(css(`[data-testid=usage]`)),
		shoot("overview"),
	)

	// Create a key (htmx swaps the section in) and copy it.
	do(t, bctx, "create a key",
		chromedp.Navigate(base+"/keys"),
		chromedp.WaitVisible(css(`#key-name`)),
		shoot("keys-empty"),
		chromedp.SendKeys(css(`#key-name`), "browser key"),
		chromedp.Click(css(`[data-testid=create-key]`)),
		chromedp.WaitVisible(css(`[data-testid=new-key]`)),
		chromedp.WaitVisible(css(`[data-testid=copy-key]`)),
		chromedp.Click(css(`[data-testid=copy-key]`)),
		// The label changes once the clipboard write has finished; wait for
		// that state (checked on every DOM change, so its two seconds on
		// screen cannot be missed), not for a time.
		chromedp.Poll[chromedp.Void](`document.querySelector('[data-testid=copy-key]').textContent.trim() === 'Copied'`,
			chromedp.WithPollingMutation(), chromedp.WithPollingTimeout(10*time.Second)),
		shoot("key-created"),
	)
	plaintext := value(t, bctx, chromedp.Value(css(`[data-testid=new-key]`)))
	copied := value(t, bctx, chromedp.Evaluate[string](`navigator.clipboard.readText()`, chromedp.EvalAwaitPromise))
	if !arbiter.ValidAPIKey(plaintext) {
		t.Fatalf("the page shows %q, not a key", plaintext)
	}
	if copied != plaintext {
		t.Errorf("the copy button copied %q, want the key %q", copied, plaintext)
	}

	// Use it against the API.
	if status := apiStatus(t, base, plaintext); status != http.StatusOK {
		t.Fatalf("the copied key gets %d from POST /v1/tasks", status)
	}

	// Revoke it through the dialog.
	do(t, bctx, "revoke the key",
		chromedp.Navigate(base+"/keys"),
		chromedp.WaitVisible(css(`[data-testid=revoke-link]`)),
		chromedp.Click(css(`[data-testid=revoke-link]`)),
		chromedp.WaitVisible(css(`dialog[open] [data-testid=confirm-revoke]`)),
		shoot("revoke-dialog"),
		chromedp.Click(css(`dialog[open] [data-testid=confirm-revoke]`)),
		chromedp.WaitVisible(css(`[data-testid=alert-success]`)),
		shoot("key-revoked"),
	)
	if notice := value(t, bctx, chromedp.Text(css(`[data-testid=alert-success]`))); !strings.Contains(notice, "browser key") {
		t.Errorf("the revocation notice says %q", notice)
	}
	revoked := time.Now()
	for sent := time.Now(); apiStatus(t, base, plaintext) != http.StatusUnauthorized; sent = time.Now() {
		if sent.Sub(revoked) > 2*time.Second {
			t.Fatal("the revoked key still works after 2 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	do(t, bctx, "look at the audit log and a 404",
		chromedp.Navigate(base+"/audit"),
		chromedp.WaitVisible(css(`[data-testid=audit-list]`)),
		shoot("audit"),
		chromedp.Navigate(base+"/nowhere"),
		chromedp.WaitVisible(css(`[data-testid=error-page]`)),
		shoot("not-found"),
	)

	// Delete the account from the keyboard: a wrong name is refused with
	// the name to type; the right one deletes it.
	do(t, bctx, "mistype the account's name",
		chromedp.Navigate(base+"/settings"),
		chromedp.WaitVisible(css(`#delete-confirm`)),
		chromedp.SendKeys(css(`#delete-confirm`), "person@example.org\r"),
		chromedp.WaitVisible(css(`[data-testid=delete-error]`)),
		shoot("delete-refused"),
	)
	if msg := value(t, bctx, chromedp.Text(css(`[data-testid=delete-error]`))); !strings.Contains(msg, "person@example.com") {
		t.Errorf("the refusal says %q, not the name to type", msg)
	}
	// The refusal is in view and its field has the focus, at a desk's and
	// a phone's width, though the form is the page's last.
	errorInView := `document.activeElement.id === 'delete-confirm' &&
		(r => r.top >= 0 && r.bottom <= window.innerHeight)(document.querySelector('[data-testid=delete-error]').getBoundingClientRect())`
	if !value(t, bctx, chromedp.Evaluate[bool](errorInView)) {
		t.Error("at 1280 px the refusal is out of view or its field lacks the focus")
	}
	do(t, bctx, "mistype it again on a phone",
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(base+"/settings"),
		chromedp.WaitVisible(css(`#delete-confirm`)),
		chromedp.SendKeys(css(`#delete-confirm`), "person@example.org\r"),
		chromedp.WaitVisible(css(`[data-testid=delete-error]`)),
	)
	if !value(t, bctx, chromedp.Evaluate[bool](errorInView)) {
		t.Error("at 390 px the refusal is out of view or its field lacks the focus")
	}
	do(t, bctx, "back to the desk's width", chromedp.EmulateViewport(1280, 900))
	do(t, bctx, "delete the account",
		chromedp.SendKeys(css(`#delete-confirm`), "person@example.com\r"),
		chromedp.WaitVisible(css(`[data-testid=start-afresh]`)),
		shoot("account-deleted"),
		chromedp.Navigate(base+"/keys"),
		chromedp.WaitVisible(css(`[data-testid=error-page]`)),
	)
	if msg := value(t, bctx, chromedp.Text(css(`[data-testid=error-message]`))); !strings.Contains(msg, "not a member of any account") {
		t.Errorf("after the deletion /keys says %q", msg)
	}
}

// do performs the browser actions of one step, failing the test with the
// step's name.
func do(t *testing.T, ctx context.Context, step string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

// value runs an action that reads something from the page.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// apiStatus creates a task with the key and returns the status.
func apiStatus(t *testing.T, base, key string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/v1/tasks", strings.NewReader(`{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

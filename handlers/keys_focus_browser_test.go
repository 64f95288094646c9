package handlers_test

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestOverviewAndKeys_FromTheKeyboard: the overview's first call has a
// Copy button, which the keyboard presses; a key created from the
// keyboard takes the focus away from the name field to the new key, so
// the next keystroke neither retypes a name nor creates a second key; at
// a desk's width and a phone's, with axe finding nothing serious.
func TestOverviewAndKeys_FromTheKeyboard(t *testing.T) {
	script := axeScript(t)
	store := dbtest.Open(t, db.SQLite, db.Options{})
	base, links := serveSite(t, store)
	bctx := newBrowser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	signInByEmail(t, bctx, base, links, "keys@example.com")
	for _, size := range []struct{ width, height int64 }{{desktopWidth, desktopHeight}, {phoneWidth, phoneHeight}} {
		do(t, bctx, fmt.Sprintf("copy the first call at %d px", size.width),
			viewport(size.width, size.height),
			chromedp.Navigate(base+"/"),
			chromedp.WaitVisible(css(`[data-testid=copy-first-call]`)),
			chromedp.Focus(css(`[data-testid=copy-first-call]`)),
			chromedp.KeyEvent("\r"),
			waitFor(`document.querySelector('[data-testid=copy-first-call] [data-copy-label]').textContent !== 'Copy'`),
		)
		checkAccessibility(t, bctx, script, fmt.Sprintf("the overview at %d px", size.width))
		do(t, bctx, fmt.Sprintf("create a key from the keyboard at %d px", size.width),
			chromedp.Navigate(base+"/keys"),
			chromedp.WaitVisible(css(`#key-name`)),
			chromedp.Focus(css(`#key-name`)),
			chromedp.SendKeys(css(`#key-name`), fmt.Sprintf("backend %d\r", size.width)),
			chromedp.WaitVisible(css(`[data-testid=new-key]`)),
			waitFor(`document.activeElement && document.activeElement.id === 'new-key'`),
		)
		if n := value(t, bctx, chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=key-list] tbody tr').length`)); n != int(map[int64]int{desktopWidth: 1, phoneWidth: 2}[size.width]) {
			t.Errorf("at %d px the list holds %d keys", size.width, n)
		}
		checkAccessibility(t, bctx, script, fmt.Sprintf("a new key at %d px", size.width))
	}
}

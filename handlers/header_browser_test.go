package handlers_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// headerFits is true when the header shows who is signed in (the address,
// on screen and wide enough to read its start), a sign-out button on one
// line, and an account switcher whose closed select names the whole
// current account in its tooltip.
const headerFits = `(() => {
	const who = document.querySelector('[data-testid=signed-in-as]').getBoundingClientRect();
	const out = document.querySelector('[data-testid=sign-out]');
	const r = document.createRange(); r.selectNodeContents(out);
	const sel = document.querySelector('#account-switch');
	return who.width >= 80 && who.left >= 0 && who.right <= window.innerWidth &&
		r.getClientRects().length === 1 && out.getBoundingClientRect().right <= window.innerWidth &&
		sel.title === sel.options[sel.selectedIndex].title && sel.title.length > 30;
})()`

// TestInvitation_JoiningSaysWhereYouAre: a person with an account of their
// own accepts, from the keyboard, an invitation to a second account with a
// long name, at a phone's width and a desk's. The page they land on says
// which account they joined, in which role, and that they switched to it;
// the header keeps who they are and a one-line "Sign out", and the
// switcher names the whole account; axe finds nothing serious.
func TestInvitation_JoiningSaysWhereYouAre(t *testing.T) {
	script := axeScript(t)
	const team = "olga.owner.of.a.team.with.a.long.name@example.com"
	for _, tc := range []struct {
		name          string
		width, height int64
		role, notice  string
		landing       string
	}{
		{"AsAnAdminOnAPhone", phoneWidth, phoneHeight, arbiter.RoleAdmin, "home-notice", "/"},
		{"AsAReviewerAtADesk", desktopWidth, desktopHeight, arbiter.RoleReviewer, "queue-joined", "/review"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := dbtest.Open(t, db.SQLite, db.Options{Now: steadyClock()})
			base, links := serveSite(t, store)
			ctx := t.Context()
			acct, err := store.FindOrCreateAccountByEmail(ctx, team)
			if err != nil {
				t.Fatal(err)
			}
			owner, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{Provider: arbiter.SignInEmail, Subject: team, Email: team, EmailVerified: true})
			if err != nil {
				t.Fatal(err)
			}
			bctx := newBrowserFor(t, 90*time.Second)
			css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
			do(t, bctx, "size the window", viewport(tc.width, tc.height))
			// Ann signs in first: her own account is made.
			signInAs(t, bctx, base, links, "ann@example.com")
			_, token, err := store.CreateInvitation(ctx, acct.ID, "ann@example.com", tc.role, arbiter.Actor{Email: owner.Email, PersonID: owner.ID})
			if err != nil {
				t.Fatal(err)
			}
			do(t, bctx, "accept the invitation with the keyboard",
				chromedp.Navigate(base+"/invitations/accept?token="+token),
				chromedp.WaitVisible(css(`[data-testid=accept-invitation]`)),
				chromedp.Focus(css(`[data-testid=accept-invitation]`)),
				chromedp.KeyEvent("\r"),
				chromedp.WaitVisible(css(`[data-testid=`+tc.notice+`]`)),
			)
			if path := value(t, bctx, chromedp.Evaluate[string](`location.pathname`)); path != tc.landing {
				t.Errorf("accepting led to %s, want %s", path, tc.landing)
			}
			said := value(t, bctx, chromedp.Text(css(`[data-testid=`+tc.notice+`]`)))
			role := map[string]string{arbiter.RoleAdmin: "an admin", arbiter.RoleReviewer: "a reviewer"}[tc.role]
			if !strings.Contains(said, "You joined "+team+" as "+role+" and switched to it") {
				t.Errorf("the page says %q, not which account was joined and that it is the current one", said)
			}
			if !value(t, bctx, chromedp.Evaluate[bool](headerFits)) {
				t.Errorf("at %d px the header loses who is signed in, wraps Sign out or cuts the account's name", tc.width)
			}
			checkAccessibility(t, bctx, script, tc.name+" after joining")
		})
	}
}

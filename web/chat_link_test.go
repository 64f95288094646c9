package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// TestChatLinkPage: a chat link's page asks a visitor to sign in; shown
// to a member who does not sign in with the address the chat app
// confirmed, it says whose it is and links nothing, by GET or POST;
// shown to that member, it offers the link and GET links nothing; its
// form links the chat user to them, once, with a line in the audit log;
// after that the link is refused with a page.
func TestChatLinkPage(t *testing.T) {
	eachDash(t, func(d *dash) { d.router.Services.ChatLinks = d.store }, func(t *testing.T, d *dash) {
		owner, _, reviewer := d.team()
		acct, err := d.store.FindAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		user := arbiter.ChatUser{Provider: arbiter.ChatSlack, Workspace: "T0FAKE", UserID: "UREV", Email: "Rev@Example.com"}
		token, err := d.store.OfferChatLink(ctx, acct.ID, user)
		if err != nil {
			t.Fatal(err)
		}
		page := "/review/chat-links/" + token
		linked := func() bool {
			_, err := d.store.FindChatMember(ctx, acct.ID, user)
			if err != nil && arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
				t.Fatal(err)
			}
			return err == nil
		}

		if r := d.browser().get(page); r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "signin") {
			t.Errorf("a visitor: %d to %q, want the sign-in page", r.status, r.header.Get("Location"))
		}
		for _, method := range []string{"GET", "POST"} {
			r := owner.do(method, page, url.Values{}, nil)
			if r.status != http.StatusForbidden || !strings.Contains(r.body, "signs in with rev@example.com") {
				t.Errorf("%s by another member: %d\n%.1500s", method, r.status, r.body)
			}
		}
		if linked() {
			t.Fatal("another member linked the chat user")
		}

		r := reviewer.get(page)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="chat-link-confirm"`) || !strings.Contains(r.body, "UREV") {
			t.Fatalf("the offer:\n%.2000s", r.body)
		}
		if linked() {
			t.Fatal("opening the page linked the chat user")
		}
		r = reviewer.post(page, url.Values{})
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="chat-link-done"`) || !linked() {
			t.Fatalf("after the form: linked %v\n%.2000s", linked(), r.body)
		}
		if m, err := d.store.FindChatMember(ctx, acct.ID, user); err != nil || m.Email != "rev@example.com" {
			t.Errorf("linked to %+v, %v; want rev@example.com", m, err)
		}
		r = reviewer.post(page, url.Values{})
		if r.status != http.StatusNotFound || !strings.Contains(r.body, `data-testid="chat-link-error"`) {
			t.Errorf("the link used again: %d\n%.1500s", r.status, r.body)
		}
		events, err := d.store.ListAuditEvents(ctx, acct.ID, 50)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range events {
			found = found || e.Kind == arbiter.AuditChatLinked && e.Actor == "rev@example.com" && strings.Contains(e.Detail, "UREV")
		}
		if !found {
			t.Errorf("no audit line of the link: %+v", events)
		}
	})
}

package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// TestAccountDeletion_OverHTTP: an owner deletes the account from its
// settings by typing its name. Admins and reviewers cannot, a wrong name
// or a form from another site changes nothing; after the deletion its API
// key is refused at once, its members fall back to their other accounts,
// and its owner's next sign-in starts a new account.
func TestAccountDeletion_OverHTTP(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, admin, reviewer := d.team()
		acctID := mustAccount(t, d, "owner@example.com")
		task := humanTask(t, d.store, "owner@example.com", "Refund?", "")
		_, key, err := d.store.CreateAPIKey(ctx, acctID, "ci", arbiter.Actor{})
		if err != nil {
			t.Fatal(err)
		}
		// The reviewer also reviews for another account.
		other := d.browser()
		other.signIn("other@example.com")
		link := other.invite("rev@example.com", arbiter.RoleReviewer)
		token := link[strings.Index(link, "token=")+len("token="):]
		if r := reviewer.post("/invitations/accept", url.Values{"token": {token}}); r.status != http.StatusSeeOther {
			t.Fatalf("accept: %d\n%.1000s", r.status, r.body)
		}
		createBody := `{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`
		apiCreate := func() int {
			req, _ := http.NewRequest("POST", d.url+"/v1/tasks", strings.NewReader(createBody))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		if s := apiCreate(); s != http.StatusOK {
			t.Fatalf("create before the deletion = %d", s)
		}
		unchanged := func(when string) {
			t.Helper()
			if _, err := d.store.FindTaskByID(ctx, acctID, task.ID); err != nil {
				t.Fatalf("%s: the account's task is gone: %v", when, err)
			}
		}

		// Only the owner sees the form.
		if r := owner.get("/settings"); !strings.Contains(r.body, `data-testid="delete-account"`) || !strings.Contains(r.body, "owner@example.com") {
			t.Errorf("the owner's settings have no deletion form:\n%.3000s", r.body)
		}
		if r := admin.get("/settings"); r.status != http.StatusOK || strings.Contains(r.body, `data-testid="delete-account"`) {
			t.Errorf("the admin's settings = %d, with the deletion form: %v", r.status, strings.Contains(r.body, "delete-account"))
		}
		// Admins and reviewers get the page any missing page gets.
		for role, b := range map[string]*browser{"admin": admin, "reviewer": reviewer} {
			if r := b.post("/settings/delete", url.Values{"confirm": {"owner@example.com"}}); r.status != http.StatusNotFound {
				t.Errorf("the %s's deletion = %d", role, r.status)
			}
		}
		unchanged("after the admin's and the reviewer's tries")
		// A wrong or empty name is refused on the settings page, saying what
		// to type.
		for _, typed := range []string{"", "admin@example.com", "owner@example.co"} {
			r := owner.post("/settings/delete", url.Values{"confirm": {typed}})
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, `data-testid="delete-error"`) ||
				!strings.Contains(r.body, "type its name, owner@example.com (capitals or not)") ||
				!strings.Contains(r.body, `aria-invalid="true" aria-describedby="delete-error" autofocus`) {
				t.Errorf("deletion confirmed with %q = %d\n%.3000s", typed, r.status, r.body)
			}
		}
		// A form from another site is refused.
		if r := owner.do("POST", "/settings/delete", url.Values{"confirm": {"owner@example.com"}},
			map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}); r.status != http.StatusForbidden {
			t.Errorf("a cross-site deletion = %d", r.status)
		}
		unchanged("after the refused deletions")

		// The owner deletes it.
		r := owner.post("/settings/delete", url.Values{"confirm": {"Owner@Example.com"}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != "/account/deleted" {
			t.Fatalf("deletion = %d to %q\n%.2000s", r.status, r.header.Get("Location"), r.body)
		}
		if r := owner.follow(r); r.status != http.StatusOK || !strings.Contains(r.body, `data-testid="start-afresh"`) ||
			!strings.Contains(r.body, `<form action="/signout" method="post" class="mt-8"><button type="submit" class="btn-primary" data-testid="deleted-sign-out">Sign out</button>`) {
			t.Errorf("after the deletion the owner sees %d, without a button to sign out\n%.2000s", r.status, r.body)
		}
		if _, err := d.store.FindTaskByID(ctx, acctID, task.ID); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
			t.Errorf("the account's task: %v", err)
		}
		// Its key is refused at once, even by a process that still trusts it.
		if s := apiCreate(); s != http.StatusUnauthorized {
			t.Errorf("create after the deletion = %d", s)
		}
		// Its pages are no one's: the admin is a member of nothing, the
		// reviewer works the other account's queue.
		if r := admin.follow(admin.get("/")); r.status != http.StatusNotFound || !strings.Contains(r.body, "You are not a member of any account") {
			t.Errorf("the admin's dashboard = %d\n%.2000s", r.status, r.body)
		}
		humanTask(t, d.store, "other@example.com", "The other account's refund?", "")
		if r := reviewer.get("/review"); r.status != http.StatusOK || !strings.Contains(r.body, "The other account&#39;s refund?") {
			t.Errorf("the reviewer's queue = %d\n%.2000s", r.status, r.body)
		}
		if r := reviewer.get("/review/tasks/" + task.ID); r.status != http.StatusNotFound {
			t.Errorf("the deleted account's task on the desk = %d", r.status)
		}
		// The owner's next sign-in starts a new account of their own.
		again := d.browser()
		again.signIn("owner@example.com")
		fresh := mustAccount(t, d, "owner@example.com")
		if fresh == acctID {
			t.Fatal("the deleted account is back")
		}
		if r := again.follow(again.get("/")); r.status != http.StatusOK || !strings.Contains(r.body, `data-testid="signed-in-as"`) {
			t.Errorf("the new account's overview = %d\n%.2000s", r.status, r.body)
		}
	})
}

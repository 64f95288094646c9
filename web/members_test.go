package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

var invitationPattern = regexp.MustCompile(`http://\S+/invitations/accept\?token=([0-9a-f]{64})`)

// invitationLink returns the invitation link of a message.
func (m sentMail) invitationLink(t *testing.T) string {
	t.Helper()
	found := invitationPattern.FindSubmatch(m.text(t))
	if found == nil {
		t.Fatalf("no invitation link in the mail:\n%s", m.text(t))
	}
	return string(found[0])
}

// inviteOverHTTP has the signed-in browser invite the address with the role
// and returns the mailed link.
func (b *browser) invite(email, role string) string {
	b.t.Helper()
	r := b.post("/members/invite", url.Values{"email": {email}, "role": {role}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/members" {
		b.t.Fatalf("invite %s: %d to %q\n%.2000s", email, r.status, r.header.Get("Location"), r.body)
	}
	if r = b.follow(r); r.status != http.StatusOK || !strings.Contains(r.body, `data-testid="members-notice"`) {
		b.t.Fatalf("after inviting %s: %d\n%.2000s", email, r.status, r.body)
	}
	m := b.d.mail.next(b.t)
	if m.to != email {
		b.t.Fatalf("the invitation went to %q, not %q", m.to, email)
	}
	return m.invitationLink(b.t)
}

// join signs a new browser in as email and accepts the invitation link.
func (d *dash) join(link, email string) *browser {
	d.t.Helper()
	b := d.browser()
	b.signIn(email)
	r := b.get(link)
	if r.status != http.StatusOK || !strings.Contains(r.body, `data-testid="accept-invitation"`) {
		d.t.Fatalf("invitation page: %d\n%.2000s", r.status, r.body)
	}
	token := link[strings.Index(link, "token=")+len("token="):]
	if r := b.post("/invitations/accept", url.Values{"token": {token}}); r.status != http.StatusSeeOther {
		d.t.Fatalf("accept: %d\n%.2000s", r.status, r.body)
	}
	return b
}

// memberID returns the person id of the account's member of email.
func memberID(t *testing.T, d *dash, accountID, email string) string {
	t.Helper()
	members, err := d.store.ListMembers(ctx, accountID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Email == email {
			return m.PersonID
		}
	}
	t.Fatalf("%s is not a member", email)
	return ""
}

// team signs in an owner and has them invite an admin and a reviewer, who
// join; it returns the three browsers.
func (d *dash) team() (owner, admin, reviewer *browser) {
	d.t.Helper()
	owner = d.browser()
	owner.signIn("owner@example.com")
	adminLink := owner.invite("admin@example.com", arbiter.RoleAdmin)
	reviewerLink := owner.invite("rev@example.com", arbiter.RoleReviewer)
	return owner, d.join(adminLink, "admin@example.com"), d.join(reviewerLink, "rev@example.com")
}

// TestRoles_EveryPageChecksTheRole runs the table of roles and pages over
// HTTP: a page a role may not see answers 404, as a page of another
// account would.
func TestRoles_EveryPageChecksTheRole(t *testing.T) {
	t.Parallel()
	eachDash(t, func(d *dash) { d.router.Services.Backtests = d.store }, func(t *testing.T, d *dash) {
		owner, admin, reviewer := d.team()
		task := humanTask(t, d.store, "owner@example.com", "Refund?", "")
		browsers := map[string]*browser{arbiter.RoleOwner: owner, arbiter.RoleAdmin: admin, arbiter.RoleReviewer: reviewer}
		const ok, see, none = http.StatusOK, http.StatusSeeOther, http.StatusNotFound
		for _, c := range []struct {
			method, path string
			form         url.Values
			want         map[string]int // by role
		}{
			{"GET", "/", nil, map[string]int{"owner": ok, "admin": ok, "reviewer": see}},
			{"GET", "/keys", nil, map[string]int{"owner": ok, "admin": ok, "reviewer": none}},
			{"POST", "/keys", url.Values{"name": {"k"}}, map[string]int{"owner": ok, "admin": ok, "reviewer": none}},
			{"GET", "/tasks", nil, map[string]int{"owner": ok, "admin": ok, "reviewer": none}},
			{"GET", "/tasks/" + task.ID, nil, map[string]int{"owner": ok, "admin": ok, "reviewer": none}},
			{"GET", "/audit", nil, map[string]int{"owner": ok, "admin": ok, "reviewer": none}},
			{"GET", "/members", nil, map[string]int{"owner": ok, "admin": ok, "reviewer": none}},
			{"GET", "/calibration", nil, map[string]int{"owner": ok, "admin": ok, "reviewer": ok}},
			// Without a verifiers file an owner's start is refused with a
			// page saying so; no one else may start one.
			{"POST", "/calibration/backtests", url.Values{"verifier": {"small"}}, map[string]int{"owner": http.StatusConflict, "admin": none, "reviewer": none}},
			{"GET", "/settings", nil, map[string]int{"owner": ok, "admin": ok, "reviewer": none}},
			{"POST", "/settings", url.Values{"reservation_minutes": {"10"}}, map[string]int{"owner": ok, "admin": ok, "reviewer": none}},
			// The owner's name is wrong on purpose: the table goes on.
			{"POST", "/settings/delete", url.Values{"confirm": {"not-the-name"}}, map[string]int{"owner": http.StatusBadRequest, "admin": none, "reviewer": none}},
			{"POST", "/review/tasks/" + task.ID + "/reservation", url.Values{}, map[string]int{"owner": ok, "admin": ok, "reviewer": ok}},
			{"POST", "/members/invite", url.Values{"email": {"x@example.com"}, "role": {"reviewer"}}, map[string]int{"owner": http.StatusSeeOther, "admin": http.StatusSeeOther, "reviewer": none}},
			{"GET", "/review", nil, map[string]int{"owner": ok, "admin": ok, "reviewer": ok}},
			{"GET", "/review/tasks/" + task.ID, nil, map[string]int{"owner": ok, "admin": ok, "reviewer": ok}},
		} {
			for role, b := range browsers {
				r := b.do(c.method, c.path, c.form, nil)
				if r.status != c.want[role] {
					t.Errorf("%s %s as %s = %d, want %d\n%.500s", c.method, c.path, role, r.status, c.want[role], r.body)
				}
				if r.status == none && !strings.Contains(r.body, "There is nothing at this address") {
					t.Errorf("%s %s as %s: the 404 is not the page any missing page gets", c.method, c.path, role)
				}
			}
			// Invitations sent by the table's POSTs are drained.
			if c.path == "/members/invite" {
				d.mail.next(t)
				d.mail.next(t)
			}
		}
		// The navigation shows each role its own pages only.
		for role, b := range browsers {
			r := b.follow(b.get("/review"))
			hasKeys := strings.Contains(r.body, `href="/keys"`)
			if hasKeys != arbiter.Can(role, arbiter.ActionManageKeys) {
				t.Errorf("the %s's navigation links the keys: %v", role, hasKeys)
			}
		}
		// The reviewer's decision is theirs, recorded in the audit log (on
		// a task nobody opened: the table's pages reserved the first).
		task = humanTask(t, d.store, "owner@example.com", "Another refund?", "")
		r := reviewer.post("/review/tasks/"+task.ID, url.Values{"verdict": {"approve"}})
		if r.status != http.StatusSeeOther {
			t.Fatalf("the reviewer's decision: %d\n%.1000s", r.status, r.body)
		}
		events, _ := d.store.ListAuditEvents(ctx, task.AccountID, 50)
		if len(events) == 0 || events[0].Kind != arbiter.AuditReviewDecided || events[0].Actor != "rev@example.com" {
			t.Errorf("latest audit event = %+v", events[0])
		}
	})
}

func TestInvitations_OverHTTP(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner := d.browser()
		owner.signIn("owner@example.com")
		link := owner.invite("rev@example.com", arbiter.RoleReviewer)
		token := link[strings.Index(link, "token=")+len("token="):]

		// A visitor is asked to sign in, and comes back to the invitation.
		visitor := d.browser()
		r := visitor.get(link)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="invitation-sign-in"`) || !strings.Contains(r.body, "rev@example.com") {
			t.Fatalf("the invitation page for a visitor:\n%.2000s", r.body)
		}
		if r.header.Get("Referrer-Policy") != "strict-origin" {
			t.Errorf("the invitation page sends its address on: %q", r.header.Get("Referrer-Policy"))
		}

		// Signed in with another address: refused, nothing used up.
		other := d.browser()
		other.signIn("other@example.com")
		r = other.post("/invitations/accept", url.Values{"token": {token}})
		wantStatus(t, r, http.StatusUnauthorized)
		if !strings.Contains(r.body, "This invitation is for rev@example.com") {
			t.Errorf("the refusal does not say whom the invitation is for:\n%.2000s", r.body)
		}

		// The invited address joins, and starts on the review queue.
		reviewer := d.join(link, "rev@example.com")
		r = reviewer.get("/review")
		wantStatus(t, r, http.StatusOK)
		// The link works once.
		r = reviewer.post("/invitations/accept", url.Values{"token": {token}})
		wantStatus(t, r, http.StatusUnauthorized)
		r = visitor.get(link)
		wantStatus(t, r, http.StatusUnauthorized)

		// Removal ends the reviewer's access at once.
		revID := memberID(t, d, mustAccount(t, d, "owner@example.com"), "rev@example.com")
		r = owner.post("/members/"+revID+"/remove", url.Values{})
		wantStatus(t, r, http.StatusSeeOther)
		for _, path := range []string{"/review", "/"} {
			r = reviewer.follow(reviewer.get(path))
			wantStatus(t, r, http.StatusNotFound)
			if !strings.Contains(r.body, "not a member of any account") {
				t.Errorf("%s after removal:\n%.1500s", path, r.body)
			}
		}
		if r := reviewer.get("/review/count"); r.status != http.StatusNoContent {
			t.Errorf("/review/count after removal = %d", r.status)
		}

		// Bad input answers a readable page and changes nothing.
		for _, c := range []struct {
			path   string
			form   url.Values
			status int
			says   string
		}{
			{"/members/invite", url.Values{"email": {"not an address"}, "role": {"reviewer"}}, 400, "is not a valid e-mail address"},
			{"/members/invite", url.Values{"email": {"x@example.com"}, "role": {"boss"}}, 400, "Pick a role"},
			{"/members/invite", url.Values{"email": {"owner@example.com"}, "role": {"admin"}}, 409, "is a member already"},
			{"/members/per_nobody/role", url.Values{"role": {"admin"}}, 404, "There is nothing at this address"},
			{"/members/per_nobody/remove", url.Values{}, 404, "There is nothing at this address"},
			{"/invitations/inv_nobody/revoke", url.Values{}, 404, "Invitation not found"},
			{"/account", url.Values{"account_id": {"acct_nobody"}}, 404, "There is nothing at this address"},
			{"/invitations/accept", url.Values{"token": {"garbage"}}, 401, "This invitation has expired"},
		} {
			r := owner.post(c.path, c.form)
			if r.status != c.status || !strings.Contains(r.body, c.says) {
				t.Errorf("POST %s %v = %d, want %d saying %q\n%.1500s", c.path, c.form, r.status, c.status, c.says, r.body)
			}
		}
		if list, _ := d.store.ListInvitations(ctx, mustAccount(t, d, "owner@example.com")); len(list) != 0 {
			t.Errorf("refused invitations were stored: %+v", list)
		}
		// Forms from another site are refused.
		r = owner.do("POST", "/members/invite", url.Values{"email": {"x@example.com"}, "role": {"admin"}},
			map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"})
		if r.status != http.StatusForbidden {
			t.Errorf("a cross-site invite = %d", r.status)
		}
	})
}

// TestInvitations_RemovedAdminLeavesNoWayBack: an admin's pending
// invitation is revoked when the admin is removed; the members page and
// the audit log say so, and the link no longer lets anyone in.
func TestInvitations_RemovedAdminLeavesNoWayBack(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, admin, _ := d.team()
		backdoor := admin.invite("back@example.com", arbiter.RoleAdmin)
		members, err := d.store.ListMembers(ctx, mustAccount(t, d, "owner@example.com"))
		if err != nil {
			t.Fatal(err)
		}
		var adminID string
		for _, m := range members {
			if m.Email == "admin@example.com" {
				adminID = m.PersonID
			}
		}
		r := owner.post("/members/"+adminID+"/remove", url.Values{})
		wantStatus(t, r, http.StatusSeeOther)
		r = owner.follow(r)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, "The pending invitation they sent was revoked.") || strings.Contains(r.body, "back@example.com") {
			t.Errorf("the members page does not say the admin's invitation was revoked:\n%.3000s", r.body)
		}
		r = owner.get("/audit")
		if !strings.Contains(r.body, "back@example.com as Admin, sent by admin@example.com: they were removed") {
			t.Errorf("the audit log does not record the revocation:\n%.3000s", r.body)
		}
		back := d.browser()
		back.signIn("back@example.com")
		r = back.get(backdoor)
		wantStatus(t, r, http.StatusUnauthorized)
		token := backdoor[strings.Index(backdoor, "token=")+len("token="):]
		r = back.post("/invitations/accept", url.Values{"token": {token}})
		wantStatus(t, r, http.StatusUnauthorized)
	})
}

func TestAccountSwitcher(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		alice := d.browser()
		alice.signIn("alice@example.com")
		bob := d.browser()
		bob.signIn("bob@example.com")
		humanTask(t, d.store, "alice@example.com", "Alice's refund", "")
		humanTask(t, d.store, "bob@example.com", "Bob's refund", "")
		// Bob joins Alice's account as a reviewer: two accounts now.
		link := alice.invite("bob@example.com", arbiter.RoleReviewer)
		token := link[strings.Index(link, "token=")+len("token="):]
		if r := bob.post("/invitations/accept", url.Values{"token": {token}}); r.status != http.StatusSeeOther {
			t.Fatalf("accept: %d\n%s", r.status, r.body)
		}
		// Accepting switched him to Alice's queue.
		r := bob.get("/review")
		if !strings.Contains(r.body, "Alice&#39;s refund") || strings.Contains(r.body, "Bob&#39;s refund") {
			t.Fatalf("after joining, the queue is not Alice's:\n%.2000s", r.body)
		}
		if !strings.Contains(r.body, `data-testid="account-switcher"`) || !strings.Contains(r.body, `action="/review/account"`) {
			t.Fatalf("no switcher for a person in two accounts:\n%.3000s", r.body)
		}
		// It says which is the account and which is the person.
		if !strings.Contains(r.body, `data-testid="account-label">Account<`) || !strings.Contains(r.body, `data-testid="person-label">You<`) {
			t.Errorf("the switcher does not name the account and the person apart:\n%.3000s", r.body)
		}
		bobAccount := mustAccount(t, d, "bob@example.com")
		r = bob.post("/review/account", url.Values{"account_id": {bobAccount}})
		wantStatus(t, r, http.StatusSeeOther)
		r = bob.get("/review")
		if !strings.Contains(r.body, "Bob&#39;s refund") || strings.Contains(r.body, "Alice&#39;s refund") {
			t.Fatalf("after switching, the queue is not Bob's:\n%.2000s", r.body)
		}
		// Alice has one account: no switcher; nobody switches into another's.
		if r := alice.get("/review"); strings.Contains(r.body, `data-testid="account-switcher"`) {
			t.Error("a switcher for a person in one account")
		}
		if r := alice.post("/account", url.Values{"account_id": {bobAccount}}); r.status != http.StatusNotFound {
			t.Errorf("switching into another's account = %d", r.status)
		}
	})
}

// TestInvitations_ALinkOpenedAgainAfterJoining says the person is a
// member already and leads to the queue, instead of a failed sign-in; to
// anyone else the used link still says nothing.
func TestInvitations_ALinkOpenedAgainAfterJoining(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner := d.browser()
		owner.signIn("owner@example.com")
		link := owner.invite("rev@example.com", arbiter.RoleReviewer)
		rev := d.join(link, "rev@example.com")

		r := rev.get(link)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="invitation-used"`) || !strings.Contains(r.body, "already a member of owner@example.com") ||
			!strings.Contains(r.body, "as Reviewer") || !strings.Contains(r.body, `href="/review"`) || strings.Contains(r.body, "Go to the dashboard") {
			t.Errorf("the used link's page for its member:\n%.3000s", r.body)
		}
		other := d.browser()
		other.signIn("other@example.com")
		wantStatus(t, other.get(link), http.StatusUnauthorized)
		wantStatus(t, d.browser().get(link), http.StatusUnauthorized)
	})
}

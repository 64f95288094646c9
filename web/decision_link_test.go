package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

var decisionLinkPattern = regexp.MustCompile(`(approve|reject): https?://[^/]+/review/links/([0-9a-f]{64})`)

// digestLinks queues the digests due, takes their mails from the outbox as
// the deliverer does, and returns, per address, its links by verdict, as
// the mail's body reads them.
func digestLinks(t *testing.T, d *dash) map[string]map[string]string {
	t.Helper()
	if _, err := d.store.ClaimDigests(ctx, 10); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, m := range dbtest.TakeMail(t, d.store) {
		_, body, err := m.Compose(arbiter.MailLinks{QueueURL: d.url + "/review"})
		if err != nil || m.Kind != arbiter.MailDigest {
			t.Fatalf("mail %+v (%v), want a digest", m, err)
		}
		out[m.To] = map[string]string{}
		for _, l := range decisionLinkPattern.FindAllStringSubmatch(body, -1) {
			out[m.To][l[1]] = "/review/links/" + l[2]
		}
	}
	return out
}

// TestDecisionLinks: a digest carries each reviewer's own links, one per
// verdict; opening one decides nothing; its form decides once, as its
// person, via the e-mail link in the audit log; the link then refuses,
// and so do the person's other links for the task; another person's
// link is refused to a signed-in reviewer; a link whose task was decided
// answers the outcome; an expired and an unknown link are refused with a
// readable page.
func TestDecisionLinks(t *testing.T) {
	eachDash(t, func(d *dash) { d.router.Services.DecisionLinks = d.store }, func(t *testing.T, d *dash) {
		_, _, reviewer := d.team()
		task := humanTask(t, d.store, "owner@example.com", "Refund order 77?", "")
		acct, err := d.store.FindAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		minute := time.Minute
		if err := d.store.SetNotifyAfter(ctx, acct.ID, &minute, arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
			t.Fatal(err)
		}
		d.clock.Advance(2 * time.Minute)
		links := digestLinks(t, d)
		mine, owners := links["rev@example.com"], links["owner@example.com"]
		if len(mine) != 2 || len(owners) != 2 || mine["approve"] == owners["approve"] {
			t.Fatalf("links per person: %v", links)
		}
		status := func() string {
			got, err := d.store.FindTaskByID(ctx, acct.ID, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got.Status
		}

		r := reviewer.get(mine["approve"])
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, "Refund order 77?") || !strings.Contains(r.body, `data-testid="decision-link-confirm"`) {
			t.Fatalf("the confirm page:\n%.2000s", r.body)
		}
		if status() != arbiter.StatusHumanNeeded {
			t.Fatal("opening a link decided")
		}

		for _, method := range []string{"GET", "POST"} {
			r := reviewer.do(method, owners["approve"], url.Values{}, nil)
			if r.status != http.StatusForbidden || !strings.Contains(r.body, "sent to someone else") {
				t.Errorf("%s of another person's link: %d\n%.1500s", method, r.status, r.body)
			}
		}
		if status() != arbiter.StatusHumanNeeded {
			t.Fatal("another person's link decided")
		}

		r = reviewer.post(mine["approve"], url.Values{})
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="decision-link-done"`) {
			t.Fatalf("after deciding:\n%.2000s", r.body)
		}
		got, err := d.store.FindTaskByID(ctx, acct.ID, task.ID)
		if err != nil || got.Status != arbiter.StatusCompleted || *got.FinalVerdict != "approve" || got.DecidedBy() != "rev@example.com" {
			t.Fatalf("the task after the link: %+v, %v", got, err)
		}
		events, _ := d.store.ListAuditEvents(ctx, acct.ID, 5)
		if len(events) == 0 || !strings.HasSuffix(events[0].Detail, "via e-mail link") {
			t.Errorf("audit: %+v", events)
		}

		for _, link := range []string{mine["approve"], mine["reject"]} {
			for _, method := range []string{"GET", "POST"} {
				if r := reviewer.do(method, link, url.Values{}, nil); r.status != http.StatusGone || !strings.Contains(r.body, "used already") {
					t.Errorf("%s of a used link: %d\n%.1500s", method, r.status, r.body)
				}
			}
		}

		anonymous := d.browser()
		r = anonymous.post(owners["reject"], url.Values{})
		if r.status != http.StatusConflict || !strings.Contains(r.body, `data-testid="decision-link-outcome"`) {
			t.Errorf("a link to a task decided since: %d\n%.2000s", r.status, r.body)
		}
		if r := anonymous.get(owners["approve"]); r.status != http.StatusGone {
			t.Errorf("the owner's other link after a use: %d", r.status)
		}

		late := humanTask(t, d.store, "owner@example.com", "Refund order 78?", "")
		d.clock.Advance(2 * time.Hour) // a new hour: a new digest
		fresh := digestLinks(t, d)["rev@example.com"]
		if len(fresh) != 2 {
			t.Fatalf("second digest links: %v", fresh)
		}
		d.clock.Advance(arbiter.DecisionLinkLife)
		for _, method := range []string{"GET", "POST"} {
			if r := reviewer.do(method, fresh["approve"], url.Values{}, nil); r.status != http.StatusGone || !strings.Contains(r.body, "expired") {
				t.Errorf("%s of an expired link: %d\n%.1500s", method, r.status, r.body)
			}
		}
		if got, _ := d.store.FindTaskByID(ctx, acct.ID, late.ID); got.Status != arbiter.StatusHumanNeeded {
			t.Error("an expired link decided")
		}
		if r := reviewer.get("/review/links/" + strings.Repeat("ab", 32)); r.status != http.StatusNotFound || !strings.Contains(r.body, "not valid") {
			t.Errorf("an unknown link: %d", r.status)
		}
	})
}

// TestDecisionLinks_ARemovedMembersLinkShowsNothing: a reviewer's digest
// links, once the reviewer is removed from the account, show nothing of
// the task (its prompt) to anyone, signed in or not, and decide nothing;
// the owner's own links still work.
func TestDecisionLinks_ARemovedMembersLinkShowsNothing(t *testing.T) {
	eachDash(t, func(d *dash) { d.router.Services.DecisionLinks = d.store }, func(t *testing.T, d *dash) {
		owner, _, reviewer := d.team()
		task := humanTask(t, d.store, "owner@example.com", "Refund order 91?", "")
		acct := mustAccount(t, d, "owner@example.com")
		minute := time.Minute
		if err := d.store.SetNotifyAfter(ctx, acct, &minute, arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
			t.Fatal(err)
		}
		d.clock.Advance(2 * time.Minute)
		links := digestLinks(t, d)
		mine, owners := links["rev@example.com"], links["owner@example.com"]
		if len(mine) != 2 || len(owners) != 2 {
			t.Fatalf("links per person: %v", links)
		}
		wantStatus(t, owner.post("/members/"+memberID(t, d, acct, "rev@example.com")+"/remove", url.Values{}), http.StatusSeeOther)

		for _, b := range []*browser{reviewer, d.browser()} {
			for _, method := range []string{"GET", "POST"} {
				r := b.do(method, mine["approve"], url.Values{}, nil)
				if r.status != http.StatusGone || strings.Contains(r.body, "Refund order 91?") || !strings.Contains(r.body, "no longer reviews for this account") {
					t.Errorf("%s of a removed member's link: %d\n%.2000s", method, r.status, r.body)
				}
			}
		}
		if got, _ := d.store.FindTaskByID(ctx, acct, task.ID); got.Status != arbiter.StatusHumanNeeded {
			t.Fatal("a removed member's link decided")
		}
		if r := owner.get(owners["reject"]); r.status != http.StatusOK || !strings.Contains(r.body, "Refund order 91?") {
			t.Errorf("the owner's own link: %d\n%.1500s", r.status, r.body)
		}
	})
}

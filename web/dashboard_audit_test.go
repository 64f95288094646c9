package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

const chromeOnLinux = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.7390.54 Safari/537.36"

func TestDashboardAudit_SignOutsAndDecisions(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		task := humanTask(t, d.store, "alice@example.com", "Refund?", "")
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")

		// Sign in, decide the task, sign out: each one is a line.
		first := d.browser()
		first.signIn("alice@example.com")
		r := first.do("POST", "/review/tasks/"+task.ID, url.Values{"verdict": {"reject"}}, map[string]string{"User-Agent": chromeOnLinux})
		if r.status != http.StatusSeeOther {
			t.Fatalf("decide = %d\n%.1000s", r.status, r.body)
		}
		r = first.do("POST", "/signout", url.Values{}, map[string]string{"User-Agent": chromeOnLinux})
		if r.status != http.StatusSeeOther || first.signedIn() {
			t.Fatalf("sign-out = %d", r.status)
		}
		// Signing out again, without a session, ends nothing and says nothing.
		first.post("/signout", url.Values{})

		events, err := d.store.ListAuditEvents(ctx, acct.ID, 10)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, e := range events {
			kinds = append(kinds, e.Kind)
		}
		if strings.Join(kinds, " ") != "sign_out review_decided sign_in" {
			t.Fatalf("audit log = %v, want a sign-in, the decision and a sign-out", kinds)
		}
		out, decided := events[0], events[1]
		if out.Actor != "alice@example.com" || out.Detail != arbiter.SignInEmail || out.UserAgent != chromeOnLinux || out.ClientIP != "127.0.0.1" {
			t.Errorf("sign-out event = %+v", out)
		}
		if decided.Actor != "alice@example.com" || decided.Detail != "“reject” on "+task.ID || decided.UserAgent != chromeOnLinux {
			t.Errorf("decision event = %+v", decided)
		}

		// The page: the events by name, the browser and system with the full
		// user agent on hover.
		second := d.browser()
		second.signIn("alice@example.com")
		page := second.get("/audit")
		wantStatus(t, page, http.StatusOK)
		for _, want := range []string{
			`data-testid="audit-sign_out"`, "Signed out",
			`data-testid="audit-review_decided"`, "Decided a task", "“reject” on " + task.ID,
			`title="` + chromeOnLinux + `" data-testid="audit-browser">Chrome 156 on Linux<`,
			`title="dashboard-test/1.0" data-testid="audit-browser">dashboard-test/1.0<`,
		} {
			if !strings.Contains(page.body, want) {
				t.Errorf("the audit page lacks %s", want)
			}
		}
	})
}

package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

var whsecPattern = regexp.MustCompile(`whsec_[A-Za-z0-9+/=]{44}`)

// createEndpoint adds an endpoint through the page and returns its id and
// the secret its page reveals, where the create leads.
func (b *browser) createEndpoint(rawURL string) (id, secret string) {
	b.t.Helper()
	r := b.post("/webhooks", url.Values{"url": {rawURL}, "description": {"CRM <sync>"},
		"event_types": arbiter.WebhookEventTypes})
	wantStatus(b.t, r, http.StatusSeeOther)
	m := createdPattern.FindStringSubmatch(r.header.Get("Location"))
	if m == nil {
		b.t.Fatalf("the create leads to %q, not the endpoint's page", r.header.Get("Location"))
	}
	r = b.post("/webhooks/"+m[1]+"/reveal", url.Values{})
	if secret = whsecPattern.FindString(r.body); secret == "" {
		b.t.Fatalf("the endpoint's page reveals no secret:\n%s", r.body)
	}
	return m[1], secret
}

// createdPattern reads the endpoint's id from where a create leads.
var createdPattern = regexp.MustCompile(`^/webhooks/(wh_[0-9a-f]{16})\?notice=created$`)

// TestDashboardWebhooks_CreateShowsTheSecretOnce: the create leads to the
// endpoint's page (post, redirect, get), which confirms it once, and a
// reload of that page adds nothing; the list and the endpoint's page show
// no secret until "Reveal secret" is pressed. The audit log records the
// creation; a bad URL is refused with the form kept, and stores nothing.
func TestDashboardWebhooks_CreateShowsTheSecretOnce(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("alice@example.com")
		r := b.get("/webhooks")
		wantStatus(t, r, http.StatusOK)
		for _, want := range []string{`href="/webhooks" aria-current="page"`, "No endpoints yet", `data-testid="reveal-callback-secret"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the empty page lacks %s", want)
			}
		}
		if whsecPattern.MatchString(r.body) {
			t.Error("the page shows the callback secret before it is revealed")
		}

		r = b.post("/webhooks", url.Values{"url": {"http://example.com/hooks"}, "event_types": {arbiter.EventTaskCompleted}})
		wantStatus(t, r, http.StatusBadRequest)
		if !strings.Contains(r.body, "must start with https://") || !strings.Contains(r.body, `value="http://example.com/hooks"`) {
			t.Errorf("the refused form:\n%s", r.body)
		}
		account, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		if list, _ := d.store.ListWebhookEndpoints(ctx, account.ID); len(list) != 0 {
			t.Fatalf("a refused create stored %d endpoints", len(list))
		}

		id, secret := b.createEndpoint("https://example.com/hooks")
		e, err := d.store.FindWebhookEndpoint(ctx, account.ID, id)
		if err != nil || e.Secret != secret || e.Description != "CRM <sync>" || len(e.EventTypes) != 0 {
			t.Fatalf("stored %+v, %v; the page showed %s", e, err, secret)
		}
		for range 2 { // the page the create led to, loaded and reloaded
			r := b.get("/webhooks/" + id + "?notice=created")
			if !strings.Contains(r.body, "The endpoint is added. Press Reveal secret") || strings.Contains(r.body, secret) {
				t.Errorf("the endpoint's page after the create:\n%.3000s", r.body)
			}
		}
		if list, _ := d.store.ListWebhookEndpoints(ctx, account.ID); len(list) != 1 {
			t.Errorf("after a reload there are %d endpoints, want the one", len(list))
		}
		for _, path := range []string{"/webhooks", "/webhooks/" + id} {
			r := b.get(path)
			wantStatus(t, r, http.StatusOK)
			if strings.Contains(r.body, secret) {
				t.Errorf("%s shows the secret unasked", path)
			}
			if !strings.Contains(r.body, "CRM &lt;sync&gt;") {
				t.Errorf("%s does not show the description, escaped", path)
			}
		}
		r = b.post("/webhooks/"+id+"/reveal", url.Values{})
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, secret) {
			t.Error("Reveal secret does not show the secret")
		}
		r = b.post("/webhooks/callback-secret/reveal", url.Values{})
		wantStatus(t, r, http.StatusOK)
		callback, _ := d.store.FindCallbackSecret(ctx, account.ID)
		if !strings.Contains(r.body, callback.Secret) {
			t.Error("Reveal does not show the callback secret")
		}
		r = b.get("/audit")
		if !strings.Contains(r.body, `data-testid="audit-webhook_created"`) || !strings.Contains(r.body, "Webhook created") {
			t.Error("the audit log does not show the creation")
		}
	})
}

// TestDashboardWebhooks_RotateAndCallbackRotate: rotating shows both
// secrets and keeps the old one signing; so does the callback secret's.
func TestDashboardWebhooks_Rotate(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("alice@example.com")
		id, old := b.createEndpoint("https://example.com/hooks")
		r := b.post("/webhooks/"+id+"/rotate", url.Values{})
		wantStatus(t, r, http.StatusSeeOther)
		if !strings.Contains(b.follow(r).body, "was rotated") {
			t.Error("the endpoint's page does not confirm the rotation")
		}
		r = b.post("/webhooks/"+id+"/reveal", url.Values{})
		account, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		e, _ := d.store.FindWebhookEndpoint(ctx, account.ID, id)
		if e.Secret == old || e.PreviousSecret != old {
			t.Fatalf("after rotating: %s, previous %s", e.Secret, e.PreviousSecret)
		}
		if !strings.Contains(r.body, e.Secret) || !strings.Contains(r.body, old) {
			t.Errorf("the rotated page does not show both secrets:\n%s", r.body)
		}
		before, _ := d.store.FindCallbackSecret(ctx, account.ID)
		r = b.post("/webhooks/callback-secret/rotate", url.Values{})
		wantStatus(t, r, http.StatusSeeOther)
		if !strings.Contains(b.follow(r).body, "The callback secret was rotated") {
			t.Error("the webhooks page does not confirm the callback secret's rotation")
		}
		r = b.post("/webhooks/callback-secret/reveal", url.Values{})
		after, _ := d.store.FindCallbackSecret(ctx, account.ID)
		if after.Secret == before.Secret || after.PreviousSecret != before.Secret || !strings.Contains(r.body, after.Secret) {
			t.Errorf("the callback secret rotated from %s to %+v", before.Secret, after)
		}
		audit := b.get("/audit").body
		for _, kind := range []string{arbiter.AuditWebhookRotated, arbiter.AuditCallbackSecretRotated} {
			if !strings.Contains(audit, `data-testid="audit-`+kind+`"`) {
				t.Errorf("the audit log lacks %s", kind)
			}
		}
	})
}

// TestDashboardWebhooks_TestEventAndResend: "Send test event" queues a
// ping, listed in the log; after it fails, "Resend" and "Resend all failed
// since" queue it again with the same id; the status filter and the
// message's page work.
func TestDashboardWebhooks_TestEventAndResend(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("alice@example.com")
		id, _ := b.createEndpoint("https://example.com/hooks")
		account, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")

		r := b.post("/webhooks/"+id+"/ping", url.Values{})
		wantStatus(t, r, http.StatusSeeOther)
		r = b.follow(r)
		if !strings.Contains(r.body, "test event (ping) is on its way") || strings.Count(r.body, `data-testid="message-row"`) != 1 {
			t.Fatalf("after the test event:\n%s", r.body)
		}
		list, _ := d.store.ListWebhookMessages(ctx, account.ID, id, "", 10)
		if len(list) != 1 || list[0].EventType != arbiter.EventPing {
			t.Fatalf("the store holds %+v", list)
		}
		msg := list[0]

		// The ping fails for good.
		claimed, err := d.store.ClaimWebhookMessages(ctx, "whd_t", 1, time.Minute)
		if err != nil || len(claimed) != 1 {
			t.Fatal(err)
		}
		fail := arbiter.WebhookStep{Status: arbiter.WebhookFailed,
			Attempt: arbiter.WebhookAttempt{StatusCode: 500, ResponseBody: "<b>down</b>", AttemptedAt: arbiter.TimestampOf(d.clock.Now())}}
		if _, err := d.store.RecordWebhookAttempt(ctx, "whd_t", msg.ID, fail); err != nil {
			t.Fatal(err)
		}
		r = b.get("/webhooks/" + id + "?status=failed")
		if strings.Count(r.body, `data-testid="message-row"`) != 1 || !strings.Contains(r.body, `aria-current="page" class="rounded-md bg-slate-100 px-3 py-1 font-medium text-slate-900">failed`) {
			t.Errorf("the failed filter:\n%s", r.body)
		}
		if r := b.get("/webhooks/" + id + "?status=delivered"); strings.Count(r.body, `data-testid="message-row"`) != 0 {
			t.Error("the delivered filter lists the failed ping")
		}
		r = b.get("/webhooks/" + id + "/messages/" + msg.ID)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, "&lt;b&gt;down&lt;/b&gt;") || !strings.Contains(r.body, `data-testid="attempt-row"`) {
			t.Errorf("the message page does not show the attempt, escaped:\n%s", r.body)
		}

		r = b.post("/webhooks/"+id+"/messages/"+msg.ID+"/resend", url.Values{})
		wantStatus(t, r, http.StatusSeeOther)
		if m, _, _ := d.store.FindWebhookMessage(ctx, account.ID, id, msg.ID); m.Status != arbiter.WebhookPending {
			t.Fatalf("after Resend the message is %s", m.Status)
		}
		if !strings.Contains(b.follow(r).body, "same webhook-id") {
			t.Error("Resend does not say so")
		}

		// It fails again; "Resend all failed since" an hour back resends it.
		claimed, _ = d.store.ClaimWebhookMessages(ctx, "whd_t", 1, time.Minute)
		if len(claimed) != 1 {
			t.Fatal("the resent message was not due")
		}
		d.store.RecordWebhookAttempt(ctx, "whd_t", msg.ID, fail)
		since := d.clock.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")
		r = b.post("/webhooks/"+id+"/resend-failed", url.Values{"since": {since}})
		wantStatus(t, r, http.StatusSeeOther)
		if !strings.Contains(b.follow(r).body, "1 failed messages are on their way again") {
			t.Error("Resend failed does not count what it resent")
		}
		r = b.post("/webhooks/"+id+"/resend-failed", url.Values{"since": {"yesterday"}})
		wantStatus(t, r, http.StatusBadRequest)

		// Disable (the page says its events are held), enable, delete.
		r = b.post("/webhooks/"+id+"/enabled", url.Values{"enabled": {"0"}})
		wantStatus(t, r, http.StatusSeeOther)
		if e, _ := d.store.FindWebhookEndpoint(ctx, account.ID, id); e.Enabled() {
			t.Error("Disable left it enabled")
		}
		if body := b.follow(r).body; !strings.Contains(body, `data-testid="held-note"`) || !strings.Contains(body, "its events are held") {
			t.Errorf("the disabled endpoint's page does not say its events are held:\n%s", body)
		}
		wantStatus(t, b.post("/webhooks/"+id+"/enabled", url.Values{"enabled": {"maybe"}}), http.StatusBadRequest)
		r = b.post("/webhooks/"+id+"/enabled", url.Values{"enabled": {"1"}})
		wantStatus(t, r, http.StatusSeeOther)
		if body := b.follow(r).body; strings.Contains(body, `data-testid="held-note"`) || !strings.Contains(body, "held for it go out now, oldest first") {
			t.Errorf("the enabled endpoint's page:\n%s", body)
		}
		r = b.post("/webhooks/"+id+"/delete", url.Values{})
		wantStatus(t, r, http.StatusSeeOther)
		if !strings.Contains(b.follow(r).body, "The endpoint was deleted") {
			t.Error("delete does not say so")
		}
		wantStatus(t, b.get("/webhooks/"+id), http.StatusNotFound)
	})
}

// webhookForms are every form of the webhook pages, for the endpoint id
// and message id.
func webhookForms(id, msgID string) map[string]url.Values {
	return map[string]url.Values{
		"/webhooks":                                          {"url": {"https://example.com/forged"}, "event_types": {arbiter.EventTaskCompleted}},
		"/webhooks/callback-secret/reveal":                   {},
		"/webhooks/callback-secret/rotate":                   {},
		"/webhooks/" + id + "/reveal":                        {},
		"/webhooks/" + id + "/rotate":                        {},
		"/webhooks/" + id + "/ping":                          {},
		"/webhooks/" + id + "/enabled":                       {"enabled": {"0"}},
		"/webhooks/" + id + "/delete":                        {},
		"/webhooks/" + id + "/edit":                          {"url": {"https://example.com/forged"}, "event_types": {arbiter.EventTaskCompleted}},
		"/webhooks/" + id + "/resend-failed":                 {"since": {"2020-01-01T00:00"}},
		"/webhooks/" + id + "/messages/" + msgID + "/resend": {},
	}
}

// TestDashboardWebhooks_CSRFOnEveryForm: each form posted from another site
// is refused with 403, and nothing changes: no endpoint, no rotation, no
// message, no secret in the answer.
func TestDashboardWebhooks_CSRFOnEveryForm(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("alice@example.com")
		id, secret := b.createEndpoint("https://example.com/hooks")
		account, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		m, err := d.store.SendWebhookPing(ctx, account.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		callback, _ := d.store.FindCallbackSecret(ctx, account.ID)
		for path, form := range webhookForms(id, m.ID) {
			for _, header := range []map[string]string{{"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}} {
				r := b.do("POST", path, form, header)
				if r.status != http.StatusForbidden || whsecPattern.MatchString(r.body) {
					t.Errorf("POST %s with %v: %d\n%.500s", path, header, r.status, r.body)
				}
			}
		}
		list, _ := d.store.ListWebhookEndpoints(ctx, account.ID)
		msgs, _ := d.store.ListWebhookMessages(ctx, account.ID, id, "", 10)
		after, _ := d.store.FindCallbackSecret(ctx, account.ID)
		if len(list) != 1 || list[0].Secret != secret || !list[0].Enabled() || list[0].URL != "https://example.com/hooks" ||
			len(msgs) != 1 || after.Secret != callback.Secret {
			t.Errorf("cross-site posts changed something: %d endpoints, %d messages, callback rotated %v",
				len(list), len(msgs), after.Secret != callback.Secret)
		}
	})
}

// TestDashboardWebhooks_AnotherAccountsEndpointIs404: every page and form
// of an endpoint answers 404 to another account, shows nothing of it, and
// changes nothing.
func TestDashboardWebhooks_AnotherAccountsEndpointIs404(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		alice := d.browser()
		alice.signIn("alice@example.com")
		id, secret := alice.createEndpoint("https://example.com/alice")
		account, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		m, _ := d.store.SendWebhookPing(ctx, account.ID, id)

		bob := d.browser()
		bob.signIn("bob@example.com")
		for _, path := range []string{"/webhooks/" + id, "/webhooks/" + id + "/messages/" + m.ID, "/webhooks/wh_0000000000000000", "/webhooks/nope"} {
			r := bob.get(path)
			wantStatus(t, r, http.StatusNotFound)
			if strings.Contains(r.body, "example.com/alice") {
				t.Errorf("%s shows alice's endpoint", path)
			}
		}
		if r := bob.get("/webhooks"); strings.Contains(r.body, id) {
			t.Error("bob's list shows alice's endpoint")
		}
		for path, form := range webhookForms(id, m.ID) {
			if !strings.Contains(path, id) {
				continue
			}
			r := bob.post(path, form)
			if r.status != http.StatusNotFound || strings.Contains(r.body, secret) {
				t.Errorf("bob's POST %s: %d", path, r.status)
			}
		}
		e, err := d.store.FindWebhookEndpoint(ctx, account.ID, id)
		msgs, _ := d.store.ListWebhookMessages(ctx, account.ID, id, "", 10)
		if err != nil || e.Secret != secret || !e.Enabled() || e.URL != "https://example.com/alice" || len(msgs) != 1 {
			t.Errorf("bob's posts changed alice's endpoint: %+v %v, %d messages", e, err, len(msgs))
		}
	})
}

// TestDashboardWebhooks_OnlyManagersSeeThem: owners and admins manage
// webhooks, so an admin may reveal a secret; a reviewer gets 404 from every
// webhook page and form, and no Webhooks entry in the navigation.
func TestDashboardWebhooks_OnlyManagersSeeThem(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, admin, reviewer := d.team()
		id, secret := owner.createEndpoint("https://example.com/hooks")
		account, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")
		m, err := d.store.SendWebhookPing(ctx, account.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if r := admin.post("/webhooks/"+id+"/reveal", url.Values{}); r.status != http.StatusOK || !strings.Contains(r.body, secret) {
			t.Errorf("an admin's reveal: %d", r.status)
		}
		for _, path := range []string{"/webhooks", "/webhooks/" + id, "/webhooks/" + id + "/messages/" + m.ID} {
			if r := reviewer.get(path); r.status != http.StatusNotFound {
				t.Errorf("a reviewer's GET %s = %d, want 404", path, r.status)
			}
		}
		for path, form := range webhookForms(id, m.ID) {
			if r := reviewer.post(path, form); r.status != http.StatusNotFound || whsecPattern.MatchString(r.body) {
				t.Errorf("a reviewer's POST %s = %d, want 404", path, r.status)
			}
		}
		if r := reviewer.follow(reviewer.get("/review")); strings.Contains(r.body, `href="/webhooks"`) {
			t.Error("the reviewer's navigation links the webhooks")
		}
		if r := owner.get("/"); !strings.Contains(r.body, `href="/webhooks"`) {
			t.Error("the owner's navigation does not link the webhooks")
		}
	})
}

// TestDashboardWebhooks_Edit: the endpoint's page changes its URL,
// description and events in place: the form shows the endpoint as it is,
// a refused change comes back with what was typed and why and changes
// nothing, a change keeps the secret and the log, sends what waits to the
// new URL, and is in the audit log.
func TestDashboardWebhooks_Edit(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("alice@example.com")
		id, secret := b.createEndpoint("https://example.com/hooks")
		account, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		if _, err := d.store.SendWebhookPing(ctx, account.ID, id); err != nil {
			t.Fatal(err)
		}
		page := "/webhooks/" + id
		r := b.get(page)
		wantStatus(t, r, http.StatusOK)
		for _, want := range []string{`data-testid="edit-endpoint"`, `action="` + page + `/edit"`, `value="https://example.com/hooks"`, `value="CRM &lt;sync&gt;"`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the endpoint's page lacks %s", want)
			}
		}

		for _, c := range []struct {
			form url.Values
			says string
		}{
			{url.Values{"url": {"http://example.com/plain"}, "event_types": {arbiter.EventTaskCompleted}}, "must start with https://"},
			{url.Values{"url": {"https://10.0.0.1/hooks"}, "event_types": {arbiter.EventTaskCompleted}}, "10.0.0.1"},
			{url.Values{"url": {"https://example.com/new"}}, "Choose at least one event type."},
			{url.Values{"url": {"https://example.com/new"}, "event_types": {"task.nope"}}, "is not an event type"},
			{url.Values{"url": {"https://example.com/new"}, "event_types": {arbiter.EventTaskCompleted}, "description": {strings.Repeat("x", 201)}}, "at most 200 characters"},
		} {
			r := b.post(page+"/edit", c.form)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, `data-testid="edit-error"`) || !strings.Contains(r.body, c.says) ||
				!strings.Contains(r.body, `value="`+c.form.Get("url")+`"`) || !strings.Contains(r.body, "<details class=\"card p-6\" data-testid=\"edit-endpoint\" open") {
				t.Errorf("edit %v = %d, want 400 saying %q with the form open and kept\n%.3000s", c.form, r.status, c.says, r.body)
			}
		}
		if e, _ := d.store.FindWebhookEndpoint(ctx, account.ID, id); e.URL != "https://example.com/hooks" || e.Description != "CRM <sync>" || len(e.EventTypes) != 0 {
			t.Fatalf("refused edits changed the endpoint: %+v", e)
		}

		r = b.post(page+"/edit", url.Values{"url": {"https://example.com/v2/hooks"}, "description": {" Billing "},
			"event_types": {arbiter.EventTaskCompleted, arbiter.EventTaskExpired}})
		if r.status != http.StatusSeeOther || r.header.Get("Location") != page+"?notice=updated" {
			t.Fatalf("edit = %d to %q\n%.2000s", r.status, r.header.Get("Location"), r.body)
		}
		r = b.get(r.header.Get("Location"))
		if !strings.Contains(r.body, "The endpoint is changed") || !strings.Contains(r.body, "https://example.com/v2/hooks") {
			t.Errorf("the page after the change:\n%.3000s", r.body)
		}
		e, err := d.store.FindWebhookEndpoint(ctx, account.ID, id)
		if err != nil || e.URL != "https://example.com/v2/hooks" || e.Description != "Billing" || e.Secret != secret ||
			strings.Join(e.EventTypes, ",") != arbiter.EventTaskCompleted+","+arbiter.EventTaskExpired {
			t.Errorf("after the change the endpoint is %+v (%v)", e, err)
		}
		// The ping queued before the change goes to the new URL.
		claimed, err := d.store.ClaimWebhookMessages(ctx, "wrk_test", 10, time.Minute)
		if err != nil || len(claimed) != 1 || claimed[0].Message.URL != "https://example.com/v2/hooks" {
			t.Errorf("claimed %+v (%v), want the ping to the new URL", claimed, err)
		}
		if r := b.get("/audit"); !strings.Contains(r.body, "Webhook changed") || !strings.Contains(r.body, "https://example.com/v2/hooks ("+id+")") {
			t.Errorf("the audit log does not show the change:\n%.3000s", r.body)
		}
	})
}

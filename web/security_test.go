package web_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/static"
	"github.com/arbiterhq/arbiter/web"
)

var plaintextPattern = regexp.MustCompile(`svc_live_[0-9a-f]{28}`)

// apiStatus calls GET /v1/tasks/{unknown id} with the key: 404 for a good
// key, 401 for a revoked one.
func (d *dash) apiStatus(key string) int {
	d.t.Helper()
	req, _ := http.NewRequest("GET", d.url+"/v1/tasks/tsk_0123456789abcdef", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func TestKeyLifecycle(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("owner@example.com")
		empty := b.get("/keys")
		wantStatus(t, empty, http.StatusOK)
		if !strings.Contains(empty.body, `data-testid="empty-state"`) || !strings.Contains(empty.body, "Rotating a key") {
			t.Errorf("the empty keys page lacks its empty state or the rotation procedure:\n%s", empty.body)
		}

		// Create: the plaintext is shown exactly once, with a warning and a
		// copy button, and is not cached.
		r := b.post("/keys", url.Values{"name": {"ci <prod>"}})
		wantStatus(t, r, http.StatusOK)
		keys := plaintextPattern.FindAllString(r.body, -1)
		if len(keys) != 1 {
			t.Fatalf("the create answer shows %d plaintext keys, want exactly 1:\n%s", len(keys), r.body)
		}
		key := keys[0]
		for _, want := range []string{`data-copy="new-key"`, "only time it is shown", "ci &lt;prod&gt;"} {
			if !strings.Contains(r.body, want) {
				t.Errorf("the create answer lacks %q", want)
			}
		}
		if cc := r.header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("the page with the plaintext has Cache-Control %q, want no-store", cc)
		}

		// The list never holds it: name, prefix, created, never used.
		list := b.get("/keys")
		if plaintextPattern.MatchString(list.body) || strings.Contains(list.body, key) {
			t.Fatal("the keys list shows a plaintext key")
		}
		for _, want := range []string{"ci &lt;prod&gt;", key[:13] + "…", ">never<", "Active"} {
			if !strings.Contains(list.body, want) {
				t.Errorf("the keys list lacks %q", want)
			}
		}

		// The key works; its last use shows once flushed.
		if status := d.apiStatus(key); status != http.StatusNotFound {
			t.Fatalf("the new key gets %d from the API, want 404 for an unknown task", status)
		}
		if err := d.keys.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if list := b.get("/keys"); strings.Contains(list.body, ">never<") || !strings.Contains(list.body, "just now") {
			t.Error("last used did not update after a call")
		}

		// Revoke: a confirmation step, then 401 from the API within 2 s.
		k, err := d.store.FindAPIKeyByHash(ctx, arbiter.HashToken(key))
		if err != nil {
			t.Fatal(err)
		}
		confirm := b.get("/keys/" + k.ID + "/revoke")
		wantStatus(t, confirm, http.StatusOK)
		if !strings.Contains(confirm.body, `action="/keys/`+k.ID+`/revoke"`) || !strings.Contains(confirm.body, "cannot be undone") {
			t.Fatalf("no confirmation form:\n%s", confirm.body)
		}
		if k, _ := d.store.FindAPIKeyByHash(ctx, arbiter.HashToken(key)); !k.Active() {
			t.Fatal("asking for confirmation revoked the key")
		}
		// Another account cannot revoke it: 404, as for an unknown key.
		mallory := d.browser()
		mallory.signIn("mallory@example.com")
		wantStatus(t, mallory.post("/keys/"+k.ID+"/revoke", url.Values{}), http.StatusNotFound)
		wantStatus(t, mallory.get("/keys/"+k.ID+"/revoke"), http.StatusNotFound)

		r = b.post("/keys/"+k.ID+"/revoke", url.Values{})
		revoked := time.Now()
		wantStatus(t, r, http.StatusSeeOther)
		for sent := time.Now(); d.apiStatus(key) != http.StatusUnauthorized; sent = time.Now() {
			if sent.Sub(revoked) > 2*time.Second {
				t.Fatal("the API still accepts the key 2 s after revocation")
			}
			time.Sleep(50 * time.Millisecond)
		}
		list = b.follow(r)
		if !strings.Contains(list.body, "was revoked") || !strings.Contains(list.body, "Revoked") || !strings.Contains(list.body, key[:13]) {
			t.Errorf("the revoked key is not listed as revoked:\n%s", list.body)
		}
		// Revoking again changes nothing.
		wantStatus(t, b.post("/keys/"+k.ID+"/revoke", url.Values{}), http.StatusSeeOther)

		// The audit log: created and revoked, by whom.
		audit := b.get("/audit")
		for _, want := range []string{`data-testid="audit-key_created"`, `data-testid="audit-key_revoked"`, "owner@example.com", key[:13]} {
			if !strings.Contains(audit.body, want) {
				t.Errorf("the audit log lacks %q", want)
			}
		}
		if plaintextPattern.MatchString(audit.body) {
			t.Error("the audit log shows a plaintext key")
		}
	})
}

func TestKeyCreate_Refused(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("owner@example.com")
		r := b.post("/keys", url.Values{"name": {"   "}})
		wantStatus(t, r, http.StatusBadRequest)
		if plaintextPattern.MatchString(r.body) || !strings.Contains(r.body, "needs a name") {
			t.Errorf("an empty name:\n%s", r.body)
		}
		// htmx gets the section alone, which it swaps in.
		r = b.do("POST", "/keys", url.Values{"name": {"fragment"}}, map[string]string{"HX-Request": "true"})
		wantStatus(t, r, http.StatusOK)
		if strings.Contains(r.body, "<html") || !strings.HasPrefix(strings.TrimSpace(r.body), `<div id="keys"`) || !plaintextPattern.MatchString(r.body) {
			t.Errorf("htmx create answered:\n%s", r.body)
		}
		// Signed out, nothing is created.
		anon := d.browser()
		wantStatus(t, anon.post("/keys", url.Values{"name": {"x"}}), http.StatusUnauthorized)
		if r := anon.get("/keys"); r.status != http.StatusSeeOther || r.header.Get("Location") != "/signin?next=%2Fkeys" {
			t.Errorf("signed-out /keys = %d to %q", r.status, r.header.Get("Location"))
		}
	})
}

func TestCSRF_CrossOriginPostRefused(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("owner@example.com")
		account, _ := d.store.FindAccountByEmail(ctx, "owner@example.com")
		for name, header := range map[string]map[string]string{
			"SecFetchSiteCrossSite": {"Sec-Fetch-Site": "cross-site"},
			"SecFetchSiteSameSite":  {"Sec-Fetch-Site": "same-site"},
			"ForeignOrigin":         {"Origin": "https://evil.example"},
		} {
			t.Run(name, func(t *testing.T) {
				r := b.do("POST", "/keys", url.Values{"name": {"forged"}}, header)
				wantStatus(t, r, http.StatusForbidden)
				if plaintextPattern.MatchString(r.body) || !strings.Contains(r.body, `data-testid="error-page"`) {
					t.Errorf("refused answer:\n%s", r.body)
				}
				r = b.do("POST", "/signout", url.Values{}, header)
				wantStatus(t, r, http.StatusForbidden)
			})
		}
		if keys, _ := d.store.ListAPIKeys(ctx, account.ID); len(keys) != 0 {
			t.Fatalf("a cross-origin POST created %d keys", len(keys))
		}
		if !b.signedIn() {
			t.Fatal("a cross-origin sign-out ended the session")
		}
		// The same form from the same origin works.
		r := b.do("POST", "/keys", url.Values{"name": {"real"}}, map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": d.url})
		wantStatus(t, r, http.StatusOK)
	})
}

func TestPages_SecurityHeaders(t *testing.T) {
	t.Parallel()
	d := newDash(t, db.SQLite, nil)
	b := d.browser()
	b.signIn("owner@example.com")
	b.post("/keys", url.Values{"name": {"k"}})
	for _, path := range []string{"/signin", "/", "/keys", "/audit", "/nowhere", "/review"} {
		r := b.get(path)
		csp := r.header.Get("Content-Security-Policy")
		for _, want := range []string{"script-src 'self'", "frame-ancestors 'none'", "default-src 'self'", "object-src 'none'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %s", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline script or eval", path, csp)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || r.header.Get("Referrer-Policy") == "" {
			t.Errorf("%s: headers %v", path, r.header)
		}
		if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: Content-Type %q", path, r.header.Get("Content-Type"))
		}
		// No inline script or style: every script has a src.
		for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(r.body, -1) {
			if !strings.Contains(tag, ` src="/static/`) {
				t.Errorf("%s: inline script %s", path, tag)
			}
		}
		if strings.Contains(r.body, " style=") || regexp.MustCompile(` on[a-z]+=`).MatchString(r.body) {
			t.Errorf("%s: inline style or event handler in the page", path)
		}
	}
}

func TestErrorPages(t *testing.T) {
	t.Parallel()
	d := newDash(t, db.SQLite, nil)
	b := d.browser()
	r := b.get("/no/such/page")
	wantStatus(t, r, http.StatusNotFound)
	if !strings.Contains(r.body, `data-testid="error-page"`) || !strings.Contains(r.body, "Page not found") || !strings.Contains(r.body, static.Path("app.css")) {
		t.Errorf("the 404 page is not a styled page:\n%s", r.body)
	}
	wantStatus(t, b.get("/auth/myspace"), http.StatusNotFound)
	r = b.do("DELETE", "/keys", nil, nil)
	wantStatus(t, r, http.StatusMethodNotAllowed)

	// A browser on the API's routes gets the API's JSON, and pages' failures
	// are pages even for clients that do not ask for HTML (htmx).
	for path, wantJSON := range map[string]bool{"/v1/no/such": true, "/v1/tasks/tsk_0123456789abcdef": true, "/review/no/such": false} {
		r := b.get(path)
		if got := r.header.Get("Content-Type") == "application/json"; got != wantJSON || r.status < 400 {
			t.Errorf("%s from a browser = %d %s", path, r.status, r.header.Get("Content-Type"))
		}
	}
	req, _ := http.NewRequest("GET", d.url+"/review/no/such", nil)
	req.Header.Set("Accept", "*/*")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 404 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Errorf("a page's 404 without Accept: text/html = %v %v", res, err)
	} else {
		res.Body.Close()
	}

	// API clients still get JSON.
	res, err := http.Get(d.url + "/no/such/page")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 || res.Header.Get("Content-Type") != "application/json" {
		t.Errorf("an API client's 404 = %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

func TestStatic_CacheHeaders(t *testing.T) {
	t.Parallel()
	d := newDash(t, db.SQLite, nil)
	for _, tc := range []struct {
		path, cache, ctype string
		status             int
	}{
		{static.Path("app.css"), "public, max-age=31536000, immutable", "text/css", 200},
		{static.Path("htmx.min.js"), "public, max-age=31536000, immutable", "text/javascript", 200},
		{static.Path("app.js"), "public, max-age=31536000, immutable", "text/javascript", 200},
		{static.Path("favicon.svg"), "public, max-age=31536000, immutable", "image/svg+xml", 200},
		{"/static/app.css", "no-cache", "text/css", 200},
		{"/static/app.css?v=stale", "no-cache", "text/css", 200},
		{"/static/", "", "", 404},
		{"/static/embed.go", "", "", 404},
		{"/static/../go.mod", "", "", 404},
	} {
		res, err := http.Get(d.url + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("%s: status %d, want %d", tc.path, res.StatusCode, tc.status)
			continue
		}
		if tc.status != 200 {
			continue
		}
		if cc := res.Header.Get("Cache-Control"); cc != tc.cache {
			t.Errorf("%s: Cache-Control %q, want %q", tc.path, cc, tc.cache)
		}
		if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.ctype) {
			t.Errorf("%s: Content-Type %q, want %s", tc.path, ct, tc.ctype)
		}
	}
}

func TestRoutes_DispatchByHost(t *testing.T) {
	t.Parallel()
	store := dbtest.Open(t, db.SQLite, db.Options{})
	router := &web.Router{
		Services: web.Services{
			Tasks: store, Keys: store, Demo: store, Health: store,
			Accounts: store, Logins: store, Identities: store, Audit: store, Members: store, Reservations: store, Stats: store, Webhooks: store,
			Calibration: store,
		},
		KeyChecker: web.NewKeyChecker(store, nil),
		Logger:     discardLogger(),
		Site:       handlers.Site{BaseURL: "https://api.example.com", AppURL: "https://app.example.com", ReviewURL: "https://review.example.com"},
		Sessions:   web.NewSessions(store, "0123456789abcdef0123456789abcdef", true, ".example.com"),
	}
	h := router.Routes()
	for _, tc := range []struct {
		host, path string
		status     int
		location   string
	}{
		{"app.example.com", "/", http.StatusSeeOther, "https://app.example.com/signin"},
		{"review.example.com", "/review/tasks/tsk_0123456789abcdef", http.StatusSeeOther, "https://app.example.com/signin?next=https%3A%2F%2Freview.example.com%2Freview%2Ftasks%2Ftsk_0123456789abcdef"},
		{"app.example.com", "/signin", http.StatusOK, ""},
		{"app.example.com", "/v1/tasks/tsk_0123456789abcdef", http.StatusNotFound, ""},
		{"app.example.com", "/demo/tasks", http.StatusNotFound, ""},
		{"api.example.com", "/demo/tasks", http.StatusOK, ""},
		{"api.example.com", "/v1/tasks/tsk_0123456789abcdef", http.StatusUnauthorized, ""},
		{"api.example.com", "/signin", http.StatusNotFound, ""},
		{"review.example.com", "/", http.StatusFound, "/review"},
		{"review.example.com", "/review", http.StatusOK, ""},
		{"review.example.com", "/keys", http.StatusNotFound, ""},
		{"10.0.0.7:8080", "/demo/tasks", http.StatusOK, ""}, // any other host gets the API
		{"APP.example.com", "/signin", http.StatusOK, ""},
	} {
		req, _ := http.NewRequest("GET", "https://"+tc.host+tc.path, nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status || rec.Header().Get("Location") != tc.location {
			t.Errorf("%s%s = %d to %q, want %d to %q", tc.host, tc.path, rec.Code, rec.Header().Get("Location"), tc.status, tc.location)
		}
	}
	// The sign-in page links the reviewer site on its own host.
	req, _ := http.NewRequest("GET", "https://app.example.com/signin", nil)
	req.Host = "app.example.com"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self' https://app.example.com https://review.example.com") {
		t.Errorf("CSP form-action does not allow the sibling origins: %q", csp)
	}
}

// refusingAudit is an audit log that cannot be written to, beside the store.
type refusingAudit struct{ arbiter.AuditService }

func (refusingAudit) RecordAuditEvent(context.Context, *arbiter.AuditEvent) error {
	return errors.New("the audit log is full")
}

// TestKeyCreate_AuditWrittenWithTheKey creates a key where a separate audit
// write would fail: the key and its audit event are one step of the store,
// so the plaintext is shown and the event is on record; no key exists that
// nobody saw.
func TestKeyCreate_AuditWrittenWithTheKey(t *testing.T) {
	t.Parallel()
	eachDash(t, func(d *dash) { d.router.Services.Audit = refusingAudit{d.store} }, func(t *testing.T, d *dash) {
		b := d.browser()
		b.signIn("owner@example.com")
		r := b.post("/keys", url.Values{"name": {"ci"}})
		wantStatus(t, r, http.StatusOK)
		if len(plaintextPattern.FindAllString(r.body, -1)) != 1 {
			t.Fatalf("the create answer does not show the key:\n%s", r.body)
		}
		account, err := d.store.FindAccountByEmail(ctx, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		events, err := d.store.ListAuditEvents(ctx, account.ID, 10)
		if err != nil || len(events) == 0 || events[0].Kind != arbiter.AuditKeyCreated || events[0].Actor != "owner@example.com" ||
			events[0].UserAgent != "dashboard-test/1.0" {
			t.Fatalf("audit log = %+v (%v), want the key's creation by its owner first", events, err)
		}
	})
}

package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	sharedlimits "github.com/arbiterhq/arbiter/internal/limits"
	"github.com/arbiterhq/arbiter/web"
)

// behindProxy trusts the test's loopback peer as a reverse proxy, so each
// request's X-Forwarded-For names its client.
func behindProxy(d *dash) {
	d.router.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
}

// stillClock is a clock that moves only when told, for limits that refill
// with time: a slow test run earns nothing back.
type stillClock struct {
	mu  sync.Mutex
	now time.Time
}

func newStillClock() *stillClock { return &stillClock{now: time.Now()} }

func (c *stillClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stillClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// postFrom sends a form as the client ip behind the proxy.
func (b *browser) postFrom(ip, target string, form url.Values) response {
	b.t.Helper()
	return b.do("POST", target, form, map[string]string{"X-Forwarded-For": ip})
}

func TestClientIP_BehindATrustedProxyIsTheForwardedClient(t *testing.T) {
	t.Parallel()
	eachDash(t, behindProxy, func(t *testing.T, d *dash) {
		b := d.browser()
		wantStatus(t, b.postFrom("6.6.6.6, 198.51.100.7", "/signin/email", url.Values{"email": {"a@example.com"}}), http.StatusOK)
		_, token := d.mail.next(t).link(t)
		wantStatus(t, b.postFrom("198.51.100.7", "/signin/email/confirm", url.Values{"token": {token}}), http.StatusSeeOther)
		account, err := d.store.FindAccountByEmail(ctx, "a@example.com")
		if err != nil {
			t.Fatal(err)
		}
		events, err := d.store.ListAuditEvents(ctx, account.ID, 10)
		if err != nil || len(events) != 1 {
			t.Fatalf("audit events = %v, %v", events, err)
		}
		if events[0].ClientIP != "198.51.100.7" {
			t.Errorf("audit log's client IP = %q, want the forwarded client 198.51.100.7", events[0].ClientIP)
		}
	})
}

func TestClientIP_ForwardedForFromAnUntrustedPeerIsIgnored(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		b := d.browser()
		wantStatus(t, b.postFrom("198.51.100.7", "/signin/email", url.Values{"email": {"a@example.com"}}), http.StatusOK)
		_, token := d.mail.next(t).link(t)
		wantStatus(t, b.postFrom("198.51.100.7", "/signin/email/confirm", url.Values{"token": {token}}), http.StatusSeeOther)
		account, _ := d.store.FindAccountByEmail(ctx, "a@example.com")
		events, err := d.store.ListAuditEvents(ctx, account.ID, 10)
		if err != nil || len(events) != 1 || events[0].ClientIP != "127.0.0.1" {
			t.Fatalf("audit events = %+v, %v; want the peer 127.0.0.1", events, err)
		}
	})
}

func TestMagicLink_OneClientCannotLockAnAddressOut(t *testing.T) {
	t.Parallel()
	limits := newStillClock()
	setup := func(d *dash) {
		behindProxy(d)
		d.router.SignInLimits = web.DefaultSignInLimits(sharedlimits.Local{Now: limits.Now})
	}
	eachDash(t, setup, func(t *testing.T, d *dash) {
		attacker, victim := d.browser(), d.browser()
		ask := func(b *browser, ip, email string) int {
			t.Helper()
			r := b.postFrom(ip, "/signin/email", url.Values{"email": {email}})
			if r.status == http.StatusOK {
				d.mail.next(t)
			}
			return r.status
		}
		// The attacker spends its own budget for the victim's address…
		for i := range 5 {
			if s := ask(attacker, "198.51.100.66", "victim@example.com"); s != http.StatusOK {
				t.Fatalf("attacker's request %d = %d, want 200", i, s)
			}
		}
		r := attacker.postFrom("198.51.100.66", "/signin/email", url.Values{"email": {"victim@example.com"}})
		wantStatus(t, r, http.StatusTooManyRequests)
		if ra := r.header.Get("Retry-After"); ra != "180" {
			t.Errorf("the refused request's Retry-After = %q, want 180 (one request per 3 minutes)", ra)
		}
		// …and keeps asking once every 3 minutes for an hour.
		for range 20 {
			d.clock.Advance(3 * time.Minute)
			limits.Advance(3 * time.Minute)
			ask(attacker, "198.51.100.66", "victim@example.com")
		}
		// The victim, from their own address, still gets a link.
		if s := ask(victim, "203.0.113.5", "victim@example.com"); s != http.StatusOK {
			t.Fatalf("the victim's request = %d, want 200: one client locked the address out", s)
		}

		// The address has a ceiling from everywhere: 10 at once.
		for i := range 10 {
			ip := netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}).String()
			if s := ask(d.browser(), ip, "target@example.com"); s != http.StatusOK {
				t.Fatalf("request %d from its own IP = %d, want 200", i, s)
			}
		}
		if s := ask(d.browser(), "192.0.2.200", "target@example.com"); s != http.StatusTooManyRequests {
			t.Fatalf("the 11th request for one address = %d, want 429 from the per-address ceiling", s)
		}
	})
}

func TestDemoLimit_FormAndAPIShareOnePerClientBudget(t *testing.T) {
	t.Parallel()
	limit := newStillClock()
	setup := func(d *dash) {
		behindProxy(d)
		d.router.DemoLimit = web.DefaultDemoLimit(sharedlimits.Local{Now: limit.Now})
	}
	eachDash(t, setup, func(t *testing.T, d *dash) {
		tasks, err := d.store.ListDemoTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		task := tasks[0]
		form := url.Values{"verdict": {task.AllowedVerdicts[0]}}
		visitor := d.browser()
		post := func(ip string, json bool, htmx bool) response {
			t.Helper()
			if json {
				req, _ := http.NewRequest("POST", d.url+"/demo/verdicts", strings.NewReader(
					fmt.Sprintf(`{"task_id":%q,"verdict":%q,"anon_session_id":"anon_api"}`, task.ID, task.AllowedVerdicts[0])))
				req.Header.Set("X-Forwarded-For", ip)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, _ := io.ReadAll(res.Body)
				return response{res.StatusCode, res.Header, string(b)}
			}
			h := map[string]string{"X-Forwarded-For": ip}
			if htmx {
				h["HX-Request"] = "true"
			}
			return visitor.do("POST", "/review/demo/tasks/"+task.ID, form, h)
		}
		const client = "198.51.100.10"
		for i := range 10 {
			r := post(client, i%2 == 0, false)
			if r.status != http.StatusOK && r.status != http.StatusSeeOther {
				t.Fatalf("verdict %d = %d, want it stored:\n%.500s", i, r.status, r.body)
			}
		}

		// The eleventh, by either way, is refused with when to come back.
		r := post(client, true, false)
		msg := wantError(t, r.status, r.header, []byte(r.body), http.StatusTooManyRequests)
		if ra := r.header.Get("Retry-After"); ra != "2" {
			t.Errorf("API Retry-After = %q, want 2 seconds", ra)
		}
		r = post(client, false, false)
		wantStatus(t, r, http.StatusTooManyRequests)
		if !strings.Contains(r.body, "<html") || !strings.Contains(r.body, msg) || r.header.Get("Retry-After") == "" {
			t.Errorf("the form's 429 is not a readable page with Retry-After (%q):\n%.1500s", r.header.Get("Retry-After"), r.body)
		}
		r = post(client, false, true)
		if !strings.Contains(r.body, msg) || r.header.Get("Retry-After") == "" {
			t.Errorf("the htmx form's refusal does not say why (%d, Retry-After %q):\n%.800s", r.status, r.header.Get("Retry-After"), r.body)
		}

		// Another client is not held back, and time earns one more.
		if r := post("203.0.113.20", true, false); r.status != http.StatusOK {
			t.Fatalf("another client's verdict = %d %s", r.status, r.body)
		}
		limit.Advance(2 * time.Second)
		if r := post(client, true, false); r.status != http.StatusOK {
			t.Fatalf("after 2 s = %d %s, want one more verdict", r.status, r.body)
		}
		if r := post(client, true, false); r.status != http.StatusTooManyRequests {
			t.Fatalf("the verdict after that = %d, want 429", r.status)
		}
	})
}

func TestDemoVerdict_TextLimitsInBytes(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		tasks, err := a.store.ListDemoTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		task := tasks[0]
		body := func(rationale, anon string) string {
			b, _ := json.Marshal(map[string]string{"task_id": task.ID, "verdict": task.AllowedVerdicts[0], "rationale": rationale, "anon_session_id": anon})
			return string(b)
		}
		bytesOver := strings.Repeat("語", arbiter.MaxRationaleBytes/3+1) // under 4000 characters, over 8 KiB
		status, h, b := a.do("POST", "/demo/verdicts", "", body(bytesOver, "anon_bytes"))
		wantError(t, status, h, b, http.StatusBadRequest)
		status, h, b = a.do("POST", "/demo/verdicts", "", body("ok", strings.Repeat("é", 65)))
		wantError(t, status, h, b, http.StatusBadRequest)
		status, h, b = a.do("POST", "/demo/verdicts", "", body("nul\u0000inside", "anon_bytes"))
		wantError(t, status, h, b, http.StatusBadRequest)
		if n, _ := a.store.CountDemoVerdicts(ctx, "anon_bytes"); n != 0 {
			t.Fatalf("%d refused verdicts stored", n)
		}
	})
}

func TestRationale_NULOnTheFormsIs400(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		task := humanTask(t, d.store, "alice@example.com", "Refund?", "")
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		alice := d.browser()
		alice.signIn("alice@example.com")
		r := alice.post("/review/tasks/"+task.ID, url.Values{"verdict": {"approve"}, "rationale": {"fine\x00"}})
		wantStatus(t, r, http.StatusBadRequest)
		if got, _ := d.store.FindTaskByID(ctx, acct.ID, task.ID); got.Status != arbiter.StatusHumanNeeded {
			t.Fatal("a rationale with NUL decided the task")
		}

		demo, _ := d.store.ListDemoTasks(ctx)
		visitor := d.browser()
		r = visitor.post("/review/demo/tasks/"+demo[0].ID, url.Values{"verdict": {demo[0].AllowedVerdicts[0]}, "rationale": {"fine\x00"}})
		wantStatus(t, r, http.StatusBadRequest)
		if !strings.Contains(r.body, "NUL") {
			t.Errorf("the demo desk does not say what was wrong:\n%.1500s", r.body)
		}
	})
}

func TestAuth_FailedKeysAre429AfterABurstAndValidKeysStillWork(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		// The key checker's clock stands still, so no check is earned back
		// while the test runs, however slowly.
		frozen := time.Now()
		a.keys = web.NewKeyChecker(a.store, func() time.Time { return frozen })
		router := &web.Router{
			Services:   web.Services{Tasks: a.store, Keys: a.store, Demo: a.store, Health: a.store},
			KeyChecker: a.keys, Logger: discardLogger(),
		}
		a.srv = httptest.NewServer(router.Routes())
		t.Cleanup(a.srv.Close)

		valid := a.newKey("a@example.com")
		id := createTask(t, a, valid, goodTask)["id"].(string)
		for i := range web.FailedKeyChecksBurst {
			status, h, b := a.do("GET", "/v1/tasks/"+id, arbiter.NewAPIKeyPlaintext(), "")
			if wantError(t, status, h, b, http.StatusUnauthorized); h.Get("WWW-Authenticate") == "" {
				t.Fatalf("guess %d: 401 without WWW-Authenticate", i)
			}
		}
		status, h, b := a.do("GET", "/v1/tasks/"+id, arbiter.NewAPIKeyPlaintext(), "")
		wantError(t, status, h, b, http.StatusTooManyRequests)
		if ra := h.Get("Retry-After"); ra != "1" {
			t.Errorf("Retry-After = %q, want 1", ra)
		}
		if status, _, b := a.do("GET", "/v1/tasks/"+id, valid, ""); status != http.StatusOK {
			t.Fatalf("the valid key from the same client = %d %s", status, b)
		}
		if status, _, b := a.do("POST", "/v1/tasks", valid, goodTask); status != http.StatusOK {
			t.Fatalf("a create with the valid key from the same client = %d %s", status, b)
		}
	})
}

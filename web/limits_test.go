package web_test

import (
	"net/http"
	"net/netip"
	"net/url"
	"testing"
	"time"
)

// behindProxy trusts the test's loopback peer as a reverse proxy, so each
// request's X-Forwarded-For names its client.
func behindProxy(d *dash) {
	d.router.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
}

// from sends a form as the client ip behind the proxy.
func (b *browser) postFrom(ip, target string, form url.Values) response {
	b.t.Helper()
	return b.do("POST", target, form, map[string]string{"X-Forwarded-For": ip})
}

func TestClientIP_BehindATrustedProxyIsTheForwardedClient(t *testing.T) {
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
	eachDash(t, behindProxy, func(t *testing.T, d *dash) {
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
		if s := ask(attacker, "198.51.100.66", "victim@example.com"); s != http.StatusTooManyRequests {
			t.Fatalf("attacker's sixth request = %d, want 429", s)
		}
		// …and keeps asking once every 3 minutes for an hour.
		for range 20 {
			d.clock.Advance(3 * time.Minute)
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

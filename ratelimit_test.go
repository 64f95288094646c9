package arbiter

import (
	"context"
	"testing"
	"time"
)

var ctx = context.Background()

func TestRateLimiter_Allow(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := NewRateLimiter(2, time.Minute, func() time.Time { return now })
	allow := func(key string) bool { ok, _, _ := l.Allow(ctx, key); return ok }
	for i, want := range []bool{true, true, false, false} {
		if got := allow("a"); got != want {
			t.Fatalf("request %d: Allow = %v, want %v", i, got, want)
		}
	}
	if !allow("b") {
		t.Fatal("another key shares a's bucket")
	}
	now = now.Add(59 * time.Second)
	if allow("a") {
		t.Fatal("a request came back before a minute passed")
	}
	now = now.Add(time.Second)
	if !allow("a") || allow("a") {
		t.Fatal("after a minute, exactly one more request should pass")
	}
	now = now.Add(time.Hour)
	if !allow("a") || !allow("a") || allow("a") {
		t.Fatal("a bucket refills to its burst and no further")
	}
}

func TestRateLimiter_RetryAfterIsTheWaitForTheNextRequest(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := NewRateLimiter(1, 2*time.Second, func() time.Time { return now })
	if ok, wait, _ := l.Allow(ctx, "a"); !ok || wait != 0 {
		t.Fatalf("first request = %v, %v; want allowed with no wait", ok, wait)
	}
	if ok, wait, _ := l.Allow(ctx, "a"); ok || wait != 2*time.Second {
		t.Fatalf("second request = %v, %v; want refused with a 2s wait", ok, wait)
	}
	now = now.Add(1500 * time.Millisecond)
	if ok, wait, _ := l.Allow(ctx, "a"); ok || wait != 500*time.Millisecond {
		t.Fatalf("after 1.5s = %v, %v; want refused with a 0.5s wait", ok, wait)
	}
	now = now.Add(500 * time.Millisecond)
	if ok, _, _ := l.Allow(ctx, "a"); !ok {
		t.Fatal("refused after the wait it announced")
	}
}

func TestRateLimiter_ReturnGivesBackOneRequest(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := NewRateLimiter(2, time.Hour, func() time.Time { return now })
	l.Allow(ctx, "a")
	l.Allow(ctx, "a")
	l.Return(ctx, "a")
	if ok, _, _ := l.Allow(ctx, "a"); !ok {
		t.Fatal("a returned request cannot be spent again")
	}
	if ok, _, _ := l.Allow(ctx, "a"); ok {
		t.Fatal("Return gave back more than one request")
	}
	l.Return(ctx, "b")
	l.Return(ctx, "b")
	for i, want := range []bool{true, true, false} {
		if ok, _, _ := l.Allow(ctx, "b"); ok != want {
			t.Fatalf("request %d after returns to a full bucket: Allow = %v, want %v (never above the burst)", i, ok, want)
		}
	}
}

func TestRateLimiter_AvailableSpendsNothing(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := NewRateLimiter(1, time.Minute, func() time.Time { return now })
	for range 3 {
		if ok, _, _ := l.Available(ctx, "a"); !ok {
			t.Fatal("Available with a full bucket = false")
		}
	}
	if ok, _, _ := l.Allow(ctx, "a"); !ok {
		t.Fatal("Available spent the request")
	}
	if ok, wait, _ := l.Available(ctx, "a"); ok || wait != time.Minute {
		t.Fatalf("Available with an empty bucket = %v, %v; want false, 1m", ok, wait)
	}
}

func TestClient_LimitKey(t *testing.T) {
	for ip, want := range map[string]string{
		"203.0.113.7":                "203.0.113.7",
		"::ffff:203.0.113.7":         "203.0.113.7",
		"2001:db8:1:2:aaaa::1":       "2001:db8:1:2::/64",
		"2001:db8:1:2:bbbb::9":       "2001:db8:1:2::/64",
		"fe80::1%eth0":               "fe80::/64",
		"not an address":             "not an address",
		"2001:db8:1:3:ffff:ffff::ff": "2001:db8:1:3::/64",
	} {
		if got := (Client{IP: ip}).LimitKey(); got != want {
			t.Errorf("LimitKey(%q) = %q, want %q", ip, got, want)
		}
	}
}

func TestExternalIdentity_Validate(t *testing.T) {
	cases := []struct {
		name string
		id   ExternalIdentity
		ok   bool
	}{
		{"Verified", ExternalIdentity{SignInGitHub, "1", "a@example.com", true}, true},
		{"Unverified", ExternalIdentity{SignInGitHub, "1", "a@example.com", false}, false},
		{"NoEmail", ExternalIdentity{SignInGitHub, "1", "", true}, false},
		{"NoSubject", ExternalIdentity{SignInGitHub, " ", "a@example.com", true}, false},
		{"BadEmail", ExternalIdentity{SignInOIDC, "1", "not an address", true}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.id.Validate()
			if (err == nil) != tc.ok || (err != nil && ErrorCode(err) != EUNAUTHORIZED) {
				t.Fatalf("Validate = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

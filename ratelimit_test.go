package arbiter

import (
	"testing"
	"time"
)

func TestRateLimiter_Allow(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	l := NewRateLimiter(2, time.Minute, func() time.Time { return now })
	for i, want := range []bool{true, true, false, false} {
		if got := l.Allow("a"); got != want {
			t.Fatalf("request %d: Allow = %v, want %v", i, got, want)
		}
	}
	if !l.Allow("b") {
		t.Fatal("another key shares a's bucket")
	}
	now = now.Add(59 * time.Second)
	if l.Allow("a") {
		t.Fatal("a request came back before a minute passed")
	}
	now = now.Add(time.Second)
	if !l.Allow("a") || l.Allow("a") {
		t.Fatal("after a minute, exactly one more request should pass")
	}
	now = now.Add(time.Hour)
	if !l.Allow("a") || !l.Allow("a") || l.Allow("a") {
		t.Fatal("a bucket refills to its burst and no further")
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

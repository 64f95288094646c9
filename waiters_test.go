package arbiter_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// TestWaiterCounts_BoundsAKeyAndAnAccount admits waits up to each bound,
// refuses the next with ERATELIMIT and a Retry-After, counting nothing,
// and admits again once one has left; leaving twice counts out once.
func TestWaiterCounts_BoundsAKeyAndAnAccount(t *testing.T) {
	t.Parallel()
	w := arbiter.NewWaiterCounts(2, 3)
	enter := func(account, key string) (func(), error) {
		t.Helper()
		return w.EnterWait(account, key)
	}
	first, err := enter("acct_a", "key_1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enter("acct_a", "key_1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, account, key, says string }{
		{"a key past its bound", "acct_a", "key_1", "this API key"},
		{"an account past its bound", "acct_a", "key_3", "this account"},
	} {
		if tc.key == "key_3" {
			if _, err := enter("acct_a", "key_2"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := enter(tc.account, tc.key)
		var e *arbiter.Error
		if arbiter.ErrorCode(err) != arbiter.ERATELIMIT || !errors.As(err, &e) || e.RetryAfter != time.Second {
			t.Fatalf("%s: %v, want ERATELIMIT with a Retry-After of 1s", tc.name, err)
		}
		if got := arbiter.ErrorMessage(err); !strings.Contains(got, tc.says) {
			t.Errorf("%s says %q, want it to name %s", tc.name, got, tc.says)
		}
	}
	if key, account := w.Waiting("acct_a", "key_1"); key != 2 || account != 3 {
		t.Fatalf("counted %d of the key and %d of the account, want 2 and 3", key, account)
	}
	// Another account is not held back.
	if _, err := enter("acct_b", "key_9"); err != nil {
		t.Fatalf("another account: %v", err)
	}
	first()
	first()
	if key, account := w.Waiting("acct_a", "key_1"); key != 1 || account != 2 {
		t.Fatalf("after one left (twice): %d of the key and %d of the account, want 1 and 2", key, account)
	}
	if _, err := enter("acct_a", "key_1"); err != nil {
		t.Fatalf("once one left: %v", err)
	}
}

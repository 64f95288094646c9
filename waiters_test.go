package arbiter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// waiterLimiters are the in-process WaiterCounts and SlotWaiters (over
// in-process slots, as it runs over shared ones), each with how many
// waits of a key and of an account it holds, bound to 2 a key and 3 an
// account.
func waiterLimiters() []struct {
	name    string
	limiter arbiter.WaiterLimiter
	waiting func(accountID, keyID string) (key, account int)
} {
	counts := arbiter.NewWaiterCounts(2, 3)
	keys, accounts := arbiter.NewInFlightLimiter(2), arbiter.NewInFlightLimiter(3)
	return []struct {
		name    string
		limiter arbiter.WaiterLimiter
		waiting func(accountID, keyID string) (key, account int)
	}{
		{"WaiterCounts", counts, counts.Waiting},
		{"SlotWaiters", arbiter.SlotWaiters{Keys: keys, Accounts: accounts, PerKey: 2, PerAccount: 3},
			func(accountID, keyID string) (int, int) { return keys.Running(keyID), accounts.Running(accountID) }},
	}
}

// TestWaiterLimiters_BoundAKeyAndAnAccount admits waits up to each bound,
// refuses the next with ERATELIMIT and a Retry-After, counting nothing
// (a key's slot taken before its account's refusal is given back), and
// admits again once one has left; leaving twice counts out once.
func TestWaiterLimiters_BoundAKeyAndAnAccount(t *testing.T) {
	t.Parallel()
	for _, l := range waiterLimiters() {
		t.Run(l.name, func(t *testing.T) {
			enter := func(account, key string) (func(), error) {
				t.Helper()
				return l.limiter.EnterWait(context.Background(), account, key)
			}
			first, err := enter("acct_a", "key_1")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := enter("acct_a", "key_1"); err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct{ name, account, key, says string }{
				{"a key past its bound", "acct_a", "key_1", "this API key are waiting for tasks at once (at most 2)"},
				{"an account past its bound", "acct_a", "key_3", "this account are waiting for tasks at once (at most 3)"},
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
			if key, account := l.waiting("acct_a", "key_1"); key != 2 || account != 3 {
				t.Fatalf("counted %d of the key and %d of the account, want 2 and 3", key, account)
			}
			if key, _ := l.waiting("acct_a", "key_3"); key != 0 {
				t.Fatalf("the wait its account refused holds %d of its key's", key)
			}
			// Another account is not held back.
			if _, err := enter("acct_b", "key_9"); err != nil {
				t.Fatalf("another account: %v", err)
			}
			first()
			first()
			if key, account := l.waiting("acct_a", "key_1"); key != 1 || account != 2 {
				t.Fatalf("after one left (twice): %d of the key and %d of the account, want 1 and 2", key, account)
			}
			if _, err := enter("acct_a", "key_1"); err != nil {
				t.Fatalf("once one left: %v", err)
			}
		})
	}
}

// failingSlots is a SlotLimit whose store does not answer.
type failingSlots struct{}

func (failingSlots) Acquire(context.Context, string) (func(), bool, error) {
	return nil, false, &arbiter.Error{Code: arbiter.EUNAVAILABLE, Message: "The database cannot be reached; try again shortly."}
}

// TestSlotWaiters_AStoreThatDoesNotAnswerAdmitsNoWait: the store's error
// is the wait's (EUNAVAILABLE, answered 503), and a key's slot taken
// before the account's failed is given back.
func TestSlotWaiters_AStoreThatDoesNotAnswerAdmitsNoWait(t *testing.T) {
	t.Parallel()
	keys := arbiter.NewInFlightLimiter(2)
	for _, w := range []arbiter.SlotWaiters{
		{Keys: failingSlots{}, Accounts: arbiter.NewInFlightLimiter(3), PerKey: 2, PerAccount: 3},
		{Keys: keys, Accounts: failingSlots{}, PerKey: 2, PerAccount: 3},
	} {
		leave, err := w.EnterWait(context.Background(), "acct_a", "key_1")
		if leave != nil || arbiter.ErrorCode(err) != arbiter.EUNAVAILABLE {
			t.Fatalf("EnterWait = %v, %v; want EUNAVAILABLE", leave != nil, err)
		}
	}
	if n := keys.Running("key_1"); n != 0 {
		t.Fatalf("the refused wait holds %d of its key's slots", n)
	}
}

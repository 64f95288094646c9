package arbiter

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Default bounds on the requests that wait for a task at once
// (GET /v1/tasks/{id}?wait=N), per API key and per account: a sixteenth
// and a quarter of the server's default connections, so that one key, or
// one account, cannot hold every connection by waiting.
const (
	DefaultMaxWaitersPerKey     = 256
	DefaultMaxWaitersPerAccount = 1024
)

// WaiterRetryAfter is the Retry-After of a wait refused past its bound:
// waits end every moment (their tasks are decided, their N seconds pass),
// and a refusal costs the server nothing.
const WaiterRetryAfter = time.Second

// WaiterLimiter bounds the requests that wait for a task at once, per API
// key and per account. WaiterCounts keeps the counts in the process;
// SlotWaiters keeps them in slots every process of a deployment shares.
type WaiterLimiter interface {
	// EnterWait counts one more waiting request of the key, of the
	// account, and returns the function that counts it out (call it once,
	// when the request is answered or its caller left, whatever became of
	// ctx). It returns ERATELIMIT, with RetryAfter, and counts nothing,
	// when the key or the account already has its most waiting; the
	// store's error (EUNAVAILABLE) when the counts cannot be read.
	EnterWait(ctx context.Context, accountID, keyID string) (leave func(), err error)
}

// WaiterCounts is the in-process WaiterLimiter: counts per key and per
// account, in memory. It is safe for concurrent use.
type WaiterCounts struct {
	perKey, perAccount int

	mu       sync.Mutex
	keys     map[string]int
	accounts map[string]int
}

// NewWaiterCounts returns a limiter admitting perKey waiting requests of
// a key and perAccount of an account at once.
func NewWaiterCounts(perKey, perAccount int) *WaiterCounts {
	return &WaiterCounts{perKey: perKey, perAccount: perAccount, keys: map[string]int{}, accounts: map[string]int{}}
}

// EnterWait implements WaiterLimiter; it never fails but to refuse.
func (w *WaiterCounts) EnterWait(_ context.Context, accountID, keyID string) (func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.keys[keyID] >= w.perKey:
		return nil, tooManyKeyWaiters(w.perKey)
	case w.accounts[accountID] >= w.perAccount:
		return nil, tooManyAccountWaiters(w.perAccount)
	}
	w.keys[keyID]++
	w.accounts[accountID]++
	var once sync.Once
	return func() { once.Do(func() { w.leave(accountID, keyID) }) }, nil
}

// leave counts a waiting request out.
func (w *WaiterCounts) leave(accountID, keyID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.keys[keyID]--; w.keys[keyID] <= 0 {
		delete(w.keys, keyID)
	}
	if w.accounts[accountID]--; w.accounts[accountID] <= 0 {
		delete(w.accounts, accountID)
	}
}

// Waiting returns how many requests of the key and of the account wait.
func (w *WaiterCounts) Waiting(accountID, keyID string) (key, account int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.keys[keyID], w.accounts[accountID]
}

// SlotWaiters is the WaiterLimiter of a deployment of several processes:
// a waiting request holds a slot of its key in Keys (PerKey slots a key)
// and one of its account in Accounts (PerAccount slots an account),
// limits that every process shares (internal/limits on Postgres), so the
// bounds are the deployment's, not each process's. A wait takes the
// key's slot, then the account's, and gives the key's back when the
// account has none: for that moment the key holds one slot more than
// its waits, which may refuse another of its waits, never admit one.
type SlotWaiters struct {
	Keys, Accounts     SlotLimit
	PerKey, PerAccount int
}

// EnterWait implements WaiterLimiter: two slots taken, two given back
// by leave.
func (w SlotWaiters) EnterWait(ctx context.Context, accountID, keyID string) (func(), error) {
	leaveKey, ok, err := w.Keys.Acquire(ctx, keyID)
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, tooManyKeyWaiters(w.PerKey)
	}
	leaveAccount, ok, err := w.Accounts.Acquire(ctx, accountID)
	switch {
	case err != nil:
		leaveKey()
		return nil, err
	case !ok:
		leaveKey()
		return nil, tooManyAccountWaiters(w.PerAccount)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			leaveAccount()
			leaveKey()
		})
	}, nil
}

// tooManyKeyWaiters refuses a wait of a key that has its most, max.
func tooManyKeyWaiters(max int) error {
	return tooManyWaiters(fmt.Sprintf("Too many requests with this API key are waiting for tasks at once (at most %d)", max))
}

// tooManyAccountWaiters refuses a wait of an account that has its most,
// max.
func tooManyAccountWaiters(max int) error {
	return tooManyWaiters(fmt.Sprintf("Too many requests of this account are waiting for tasks at once (at most %d)", max))
}

// tooManyWaiters is the ERATELIMIT of a wait refused past its bound.
func tooManyWaiters(what string) error {
	return &Error{Code: ERATELIMIT, RetryAfter: WaiterRetryAfter,
		Message: what + ": wait on fewer tasks at once (a webhook tells of every decision), or retry once one of the waits has ended."}
}

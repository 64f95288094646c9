package web

import (
	"context"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/limits"
)

// KeyCacheTTL is how long a key lookup is trusted. Revocation written by any
// process reaches this one within this time.
const KeyCacheTTL = time.Second

// maxCachedKeys bounds the cache; past it the cache starts over, keeping
// only the keys known to be active, so random keys sent by a stranger
// cannot grow memory without bound.
const maxCachedKeys = 100_000

// Failed key checks per client IP: FailedKeyChecksBurst at once, then one
// more every FailedKeyCheckEvery; past them, keys the checker does not know
// to be active are refused with 429 before any lookup.
const (
	FailedKeyChecksBurst = 100
	FailedKeyCheckEvery  = time.Second
)

// KeyChecker authenticates API keys without writing to the store on the
// request path: lookups are cached for KeyCacheTTL, and last-use times are
// coalesced in memory and written by Flush, which Run calls every second.
// Each client's failed checks are limited, so guessing keys cannot make a
// database query each.
type KeyChecker struct {
	keys     arbiter.APIKeyService
	now      arbiter.Clock
	failures arbiter.RateLimit // failed checks, by client

	// Observe, when set before the first check, is told of each check of
	// a well-formed key: answered from the cache (true) or looked up.
	Observe func(cached bool)

	mu    sync.Mutex
	cache map[string]cachedKey         // by key hash
	used  map[string]arbiter.Timestamp // by key id, not yet flushed
}

type cachedKey struct {
	id, accountID string
	known, active bool
	expires       time.Time
}

// NewKeyChecker returns a KeyChecker over the store's keys.
func NewKeyChecker(keys arbiter.APIKeyService, now arbiter.Clock) *KeyChecker {
	if now == nil {
		now = time.Now
	}
	return &KeyChecker{
		keys: keys, now: now,
		failures: arbiter.NewRateLimiter(FailedKeyChecksBurst, FailedKeyCheckEvery, now),
		cache:    map[string]cachedKey{}, used: map[string]arbiter.Timestamp{},
	}
}

// CountFailuresIn keeps the clients' failed checks in l, shared by every
// process of a Postgres deployment, instead of this process; call it
// before the first check.
func (c *KeyChecker) CountFailuresIn(l limits.Limits) {
	c.failures = l.Rate("failed-key-checks", FailedKeyChecksBurst, FailedKeyCheckEvery)
}

var (
	errKeyMissing   = arbiter.Errorf(arbiter.EUNAUTHORIZED, "Missing API key: send it as 'Authorization: Bearer svc_live_…'.")
	errKeyMalformed = arbiter.Errorf(arbiter.EUNAUTHORIZED, "The API key is malformed: it must be svc_live_ followed by 28 lowercase hex characters.")
	errKeyUnknown   = arbiter.Errorf(arbiter.EUNAUTHORIZED, "The API key is not valid.")
	errKeyRevoked   = arbiter.Errorf(arbiter.EUNAUTHORIZED, "The API key has been revoked.")
)

// Check returns the account and the id of an active key sent by client
// (an arbiter.Client's LimitKey) and records its use. A missing,
// malformed, unknown or revoked key is an EUNAUTHORIZED error; malformed
// keys are refused without a lookup. Each failed check of a well-formed
// key spends one of the client's FailedKeyChecksBurst; when none is left,
// a key not known to be active is refused with ERATELIMIT (and
// RetryAfter) without a lookup. A key this checker has seen active is
// never held back, so a client's valid keys keep working while its
// guesses are refused.
func (c *KeyChecker) Check(ctx context.Context, client, plaintext string) (accountID, keyID string, err error) {
	if plaintext == "" {
		return "", "", errKeyMissing
	} else if !arbiter.ValidAPIKey(plaintext) {
		return "", "", errKeyMalformed
	}
	return c.checkHash(ctx, client, arbiter.HashToken(plaintext))
}

// Recheck returns the function that checks again, as Check does, the key
// of a request that Check admitted (its plaintext's hash): a request that
// waits for its task outlives its check, and is answered 401 once its key
// is revoked (within KeyCacheTTL).
func (c *KeyChecker) Recheck(client, plaintext string) func(ctx context.Context) error {
	hash := arbiter.HashToken(plaintext)
	return func(ctx context.Context) error {
		_, _, err := c.checkHash(ctx, client, hash)
		return err
	}
}

// checkHash is Check of a well-formed key's hash.
func (c *KeyChecker) checkHash(ctx context.Context, client, hash string) (accountID, keyID string, err error) {
	now := c.now()
	c.mu.Lock()
	k, ok := c.cache[hash]
	c.mu.Unlock()
	cached := ok && !now.After(k.expires)
	if c.Observe != nil {
		c.Observe(cached)
	}
	if !cached {
		if k, err = c.lookupLimited(ctx, client, hash, now, ok && k.known && k.active); err != nil {
			return "", "", err
		}
	} else if !k.known || !k.active {
		if ok, wait, err := c.failures.Allow(ctx, client); err != nil {
			return "", "", err
		} else if !ok {
			return "", "", tooManyFailedChecks(wait)
		}
	}

	switch {
	case !k.known:
		return "", "", errKeyUnknown
	case !k.active:
		return "", "", errKeyRevoked
	}
	c.mu.Lock()
	c.used[k.id] = arbiter.TimestampOf(now)
	c.mu.Unlock()
	return k.accountID, k.id, nil
}

// lookupLimited looks a key up for client. A key last seen active is
// looked up freely; any other only while the client has failed checks left.
// A check is spent once the lookup finds the key unknown or revoked, never
// before: many requests with one valid key, sent at once before any of
// them was answered, all pass. (So guesses sent at once may be looked up
// a few past the client's budget, as many as it has requests in flight.)
func (c *KeyChecker) lookupLimited(ctx context.Context, client, hash string, now time.Time, wasActive bool) (cachedKey, error) {
	if !wasActive {
		if ok, wait, err := c.failures.Available(ctx, client); err != nil {
			return cachedKey{}, err
		} else if !ok {
			return cachedKey{}, tooManyFailedChecks(wait)
		}
	}
	k, err := c.lookup(ctx, hash, now)
	if err == nil && !k.active {
		_, _, err = c.failures.Allow(ctx, client)
	}
	return k, err
}

// tooManyFailedChecks is the answer to a client out of failed checks.
func tooManyFailedChecks(wait time.Duration) error {
	return &arbiter.Error{Code: arbiter.ERATELIMIT, RetryAfter: wait,
		Message: "Too many requests with API keys that are not valid came from your address. Wait, then try again with a valid key."}
}

func (c *KeyChecker) lookup(ctx context.Context, hash string, now time.Time) (cachedKey, error) {
	key, err := c.keys.FindAPIKeyByHash(ctx, hash)
	k := cachedKey{expires: now.Add(KeyCacheTTL)}
	switch arbiter.ErrorCode(err) {
	case "":
		k.known, k.active, k.id, k.accountID = true, key.Active(), key.ID, key.AccountID
	case arbiter.ENOTFOUND:
	default:
		return cachedKey{}, err
	}
	c.mu.Lock()
	if len(c.cache) >= maxCachedKeys {
		kept := map[string]cachedKey{}
		for h, ck := range c.cache {
			if ck.known && ck.active && len(kept) < maxCachedKeys/2 {
				kept[h] = ck
			}
		}
		c.cache = kept
	}
	c.cache[hash] = k
	c.mu.Unlock()
	return k, nil
}

// Flush writes the coalesced last-use times to the store. On failure they
// are kept for the next flush.
func (c *KeyChecker) Flush(ctx context.Context) error {
	c.mu.Lock()
	used := c.used
	if len(used) == 0 {
		c.mu.Unlock()
		return nil
	}
	c.used = map[string]arbiter.Timestamp{}
	c.mu.Unlock()

	err := c.keys.TouchAPIKeys(ctx, used)
	if err != nil {
		c.mu.Lock()
		for id, ts := range used {
			if ts > c.used[id] {
				c.used[id] = ts
			}
		}
		c.mu.Unlock()
	}
	return err
}

// Run flushes about once a second until ctx ends, then flushes once more.
func (c *KeyChecker) Run(ctx context.Context, onError func(error)) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if err := c.Flush(ctx); err != nil && onError != nil {
				onError(err)
			}
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := c.Flush(flushCtx); err != nil && onError != nil {
				onError(err)
			}
			return
		}
	}
}

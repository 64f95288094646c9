package web

import (
	"context"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/flight"
	"github.com/arbiterhq/arbiter/internal/limits"
)

// KeyCacheTTL is how long a key lookup is trusted, from the moment the
// statement that read it was sent. Revocation written by any process
// reaches this one within this time.
const KeyCacheTTL = time.Second

// keyRefreshEvery is how often Run renews the entries of the keys checked
// since the last renewal (Refresh): twice in a KeyCacheTTL, so that the
// entry of a key in use is renewed before it runs out even when the
// renewal's statement takes most of half a second.
const keyRefreshEvery = KeyCacheTTL / 2

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
// request path: lookups are cached for KeyCacheTTL, the entries of the
// keys in use are renewed together by Refresh before they run out, and
// last-use times are coalesced in memory and written by Flush; Run calls
// both. Each client's failed checks are limited, so guessing keys cannot
// make a database query each.
type KeyChecker struct {
	keys     arbiter.APIKeyService
	now      arbiter.Clock
	failures arbiter.RateLimit // failed checks, by client

	// Observe, when set before the first check, is told of each check of
	// a well-formed key: answered from the cache (true) or looked up.
	Observe func(cached bool)

	// lookups are the lookups in flight, by key hash: the checks of a key
	// that miss the cache while one is in flight share it.
	lookups flight.Group[string, cachedKey]

	mu      sync.Mutex
	cache   map[string]*cachedKey        // by key hash
	used    map[string]arbiter.Timestamp // by key id, not yet flushed
	maxKeys int                          // the cache's bound, maxCachedKeys
}

type cachedKey struct {
	id, accountID string
	known, active bool
	expires       time.Time
	// checked is whether an active key was checked since the last Refresh,
	// which renews the entries of those and only those.
	checked bool
}

// NewKeyChecker returns a KeyChecker over the store's keys.
func NewKeyChecker(keys arbiter.APIKeyService, now arbiter.Clock) *KeyChecker {
	if now == nil {
		now = time.Now
	}
	return &KeyChecker{
		keys: keys, now: now,
		failures: arbiter.NewRateLimiter(FailedKeyChecksBurst, FailedKeyCheckEvery, now),
		cache:    map[string]*cachedKey{}, used: map[string]arbiter.Timestamp{},
		maxKeys: maxCachedKeys,
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
	var k cachedKey
	c.mu.Lock()
	e, ok := c.cache[hash]
	if ok {
		k = *e
	}
	cached := ok && !now.After(k.expires)
	if cached && k.known && k.active {
		e.checked = true
		c.used[k.id] = arbiter.TimestampOf(now)
	}
	c.mu.Unlock()
	if c.Observe != nil {
		c.Observe(cached)
	}
	if cached && k.known && k.active {
		return k.accountID, k.id, nil
	}
	if !cached {
		if k, err = c.lookupLimited(ctx, client, hash, now, ok && k.known && k.active); err != nil {
			return "", "", err
		}
	} else if ok, wait, err := c.failures.Allow(ctx, client); err != nil {
		return "", "", err
	} else if !ok {
		return "", "", tooManyFailedChecks(wait)
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
// Checks of one key that miss while its lookup is in flight share it,
// unless it answers past KeyCacheTTL from its statement: then they read
// again, so a stalled lookup cannot outlive a revocation's bound.
func (c *KeyChecker) lookupLimited(ctx context.Context, client, hash string, now time.Time, wasActive bool) (cachedKey, error) {
	if !wasActive {
		if ok, wait, err := c.failures.Available(ctx, client); err != nil {
			return cachedKey{}, err
		} else if !ok {
			return cachedKey{}, tooManyFailedChecks(wait)
		}
	}
	k, err := c.lookups.Do(ctx, hash, func() (cachedKey, error) { return c.lookup(ctx, hash, now) })
	if after := c.now(); err == nil && after.After(k.expires) {
		// The lookup (its own or one it joined) stalled past the bound a
		// revocation is seen in: its answer may be older than this check.
		k, err = c.lookup(ctx, hash, after)
	}
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

// lookup reads the key of hash from the store and keeps it; now is the
// time before the statement was sent.
func (c *KeyChecker) lookup(ctx context.Context, hash string, now time.Time) (cachedKey, error) {
	key, err := c.keys.FindAPIKeyByHash(ctx, hash)
	var k cachedKey
	switch arbiter.ErrorCode(err) {
	case "":
		k = entryOf(key, now)
	case arbiter.ENOTFOUND:
		k = entryOf(nil, now)
	default:
		return cachedKey{}, err
	}
	k.checked = k.active
	c.mu.Lock()
	c.keep(hash, k, now)
	c.mu.Unlock()
	return k, nil
}

// entryOf is the cache's entry of key (nil: no key has the hash), read by
// a statement sent at now.
func entryOf(key *arbiter.APIKey, now time.Time) cachedKey {
	k := cachedKey{expires: now.Add(KeyCacheTTL)}
	if key != nil {
		k.known, k.active, k.id, k.accountID = true, key.Active(), key.ID, key.AccountID
	}
	return k
}

// keep caches k as the entry of hash unless the entry there was read
// later; c.mu is held. Past the cache's bound it starts over with the
// active keys' entries that have not run out, up to half the bound.
func (c *KeyChecker) keep(hash string, k cachedKey, now time.Time) {
	if e, ok := c.cache[hash]; ok {
		if k.expires.After(e.expires) {
			k.checked = (k.checked || e.checked) && k.active
			*e = k
		}
		return
	}
	if len(c.cache) >= c.maxKeys {
		kept := map[string]*cachedKey{}
		for h, e := range c.cache {
			if e.known && e.active && !now.After(e.expires) && len(kept) < c.maxKeys/2 {
				kept[h] = e
			}
		}
		c.cache = kept
	}
	c.cache[hash] = &k
}

// Refresh renews, in one statement (a few for thousands of keys), the
// entries of the active keys checked since the last Refresh, and drops
// the unknown and revoked keys' entries that ran out. Called more often
// than KeyCacheTTL (Run: every keyRefreshEvery), it keeps a key in use
// from being looked up by a request of its own, while a key revoked
// anywhere is still refused here within KeyCacheTTL (an entry is good
// for that long from the moment its statement was sent). Unknown and
// revoked keys' entries are never renewed, so guesses cost no share of
// the statement and leave the cache within a second; an active key's
// entry that ran out unchecked stays, as the knowledge that the key
// worked (a key seen working is never held back by its client's failed
// checks), and its next check looks it up. On failure the entries run
// out as before and checks look their keys up.
func (c *KeyChecker) Refresh(ctx context.Context) error {
	now := c.now()
	var hashes []string
	c.mu.Lock()
	for h, e := range c.cache {
		switch {
		case e.checked:
			hashes = append(hashes, h)
			e.checked = false
		case now.After(e.expires) && !(e.known && e.active):
			delete(c.cache, h)
		}
	}
	c.mu.Unlock()
	if len(hashes) == 0 {
		return nil
	}
	keys, err := c.keys.FindAPIKeysByHash(ctx, hashes)
	if err != nil {
		return err
	}
	found := make(map[string]*arbiter.APIKey, len(keys))
	for _, k := range keys {
		found[k.Hash] = k
	}
	c.mu.Lock()
	for _, h := range hashes {
		c.keep(h, entryOf(found[h], now), now)
	}
	c.mu.Unlock()
	return nil
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

// Run renews the entries of the keys in use every keyRefreshEvery
// (Refresh) and flushes last-use times about once a second, until ctx
// ends; then it flushes once more. The two run apart, so that a slow
// flush never delays a renewal past the entries' life.
func (c *KeyChecker) Run(ctx context.Context, onError func(error)) {
	report := func(err error) {
		if err != nil && onError != nil {
			onError(err)
		}
	}
	var renewals sync.WaitGroup
	defer renewals.Wait()
	renewals.Go(func() {
		tick := time.NewTicker(keyRefreshEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if err := c.Refresh(ctx); ctx.Err() == nil {
					report(err)
				}
			case <-ctx.Done():
				return
			}
		}
	})
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			report(c.Flush(ctx))
		case <-ctx.Done():
			flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			report(c.Flush(flushCtx))
			return
		}
	}
}

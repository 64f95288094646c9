package web_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/web"
)

// memKeys is an in-memory APIKeyService for the key checker's unit tests.
type memKeys struct {
	mu      sync.Mutex
	keys    map[string]*arbiter.APIKey // by hash
	lookups int
	touched map[string]arbiter.Timestamp
}

func newMemKeys(plaintext ...string) *memKeys {
	m := &memKeys{keys: map[string]*arbiter.APIKey{}, touched: map[string]arbiter.Timestamp{}}
	for i, p := range plaintext {
		m.keys[arbiter.HashToken(p)] = &arbiter.APIKey{ID: "key_" + string(rune('a'+i)), AccountID: "acct_1"}
	}
	return m
}

func (m *memKeys) CreateAPIKey(context.Context, string, string, arbiter.Actor) (*arbiter.APIKey, string, error) {
	panic("unused")
}
func (m *memKeys) ListAPIKeys(context.Context, string) ([]*arbiter.APIKey, error) { panic("unused") }
func (m *memKeys) RevokeAPIKey(context.Context, string, string, arbiter.Actor) (*arbiter.APIKey, error) {
	panic("unused")
}

func (m *memKeys) FindAPIKeyByHash(_ context.Context, hash string) (*arbiter.APIKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	k, ok := m.keys[hash]
	if !ok {
		return nil, arbiter.Errorf(arbiter.ENOTFOUND, "no key")
	}
	c := *k
	return &c, nil
}

func (m *memKeys) FindAPIKeysByHash(_ context.Context, hashes []string) ([]*arbiter.APIKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []*arbiter.APIKey
	for _, h := range hashes {
		if k, ok := m.keys[h]; ok {
			c := *k
			c.Hash = h
			keys = append(keys, &c)
		}
	}
	return keys, nil
}

func (m *memKeys) TouchAPIKeys(_ context.Context, used map[string]arbiter.Timestamp) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, ts := range used {
		m.touched[id] = ts
	}
	return nil
}

func TestKeyChecker_CacheLivesOneSecond(t *testing.T) {
	t.Parallel()
	key := arbiter.NewAPIKeyPlaintext()
	store := newMemKeys(key)
	now := time.Unix(1763805600, 0)
	kc := web.NewKeyChecker(store, func() time.Time { return now })

	for range 3 {
		if acct, _, err := kc.Check(ctx, "203.0.113.1", key); err != nil || acct != "acct_1" {
			t.Fatalf("Check = %q, %v", acct, err)
		}
	}
	if store.lookups != 1 {
		t.Fatalf("%d lookups for three checks within a second, want 1", store.lookups)
	}

	// Revoked in the store: still cached within the second, refused after it.
	revoked := arbiter.Timestamp(1)
	store.keys[arbiter.HashToken(key)].RevokedAt = &revoked
	now = now.Add(web.KeyCacheTTL)
	if _, _, err := kc.Check(ctx, "203.0.113.1", key); err != nil {
		t.Fatalf("refused within the cache lifetime: %v", err)
	}
	now = now.Add(time.Millisecond)
	if _, _, err := kc.Check(ctx, "203.0.113.1", key); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
		t.Fatalf("revoked key accepted after the cache lifetime: %v", err)
	}

	// Unknown keys are cached too, and malformed ones never reach the store.
	unknown := arbiter.NewAPIKeyPlaintext()
	before := store.lookups
	for range 3 {
		if _, _, err := kc.Check(ctx, "203.0.113.1", unknown); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
			t.Fatalf("unknown key: %v", err)
		}
		if _, _, err := kc.Check(ctx, "203.0.113.1", "svc_live_nope"); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
			t.Fatalf("malformed key: %v", err)
		}
	}
	if store.lookups != before+1 {
		t.Errorf("%d lookups for repeated unknown and malformed keys, want 1", store.lookups-before)
	}
}

func TestKeyChecker_FlushCoalesces(t *testing.T) {
	t.Parallel()
	key := arbiter.NewAPIKeyPlaintext()
	store := newMemKeys(key)
	now := time.UnixMilli(1763805600000)
	kc := web.NewKeyChecker(store, func() time.Time { return now })
	for range 5 {
		kc.Check(ctx, "203.0.113.1", key)
		now = now.Add(10 * time.Millisecond)
	}
	if len(store.touched) != 0 {
		t.Fatal("the check wrote last use synchronously")
	}
	if err := kc.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := store.touched["key_a"]; got != arbiter.Timestamp(1763805600040) {
		t.Errorf("flushed last use = %d, want the latest check 1763805600040", got)
	}
}

func BenchmarkKeyChecker_Check(b *testing.B) {
	key := arbiter.NewAPIKeyPlaintext()
	kc := web.NewKeyChecker(newMemKeys(key), nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := kc.Check(ctx, "203.0.113.1", key); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestKeyChecker_FailedChecksAreLimitedPerClient(t *testing.T) {
	t.Parallel()
	valid, revoked := arbiter.NewAPIKeyPlaintext(), arbiter.NewAPIKeyPlaintext()
	store := newMemKeys(valid, revoked)
	at := arbiter.Timestamp(1)
	store.keys[arbiter.HashToken(revoked)].RevokedAt = &at
	now := time.Unix(1763805600, 0)
	kc := web.NewKeyChecker(store, func() time.Time { return now })
	const guesser, other = "198.51.100.1", "203.0.113.9"

	// The guesser's valid key, seen once, keeps working throughout.
	if _, _, err := kc.Check(ctx, guesser, valid); err != nil {
		t.Fatal(err)
	}
	for i := range web.FailedKeyChecksBurst {
		key := arbiter.NewAPIKeyPlaintext()
		if i == 0 {
			key = revoked
		}
		if _, _, err := kc.Check(ctx, guesser, key); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
			t.Fatalf("guess %d: %v, want EUNAUTHORIZED within the burst", i, err)
		}
	}
	lookups := store.lookups
	_, _, err := kc.Check(ctx, guesser, arbiter.NewAPIKeyPlaintext())
	var e *arbiter.Error
	if !errors.As(err, &e) || e.Code != arbiter.ERATELIMIT || e.RetryAfter <= 0 || e.RetryAfter > web.FailedKeyCheckEvery {
		t.Fatalf("the guess after the burst: %v, want ERATELIMIT with a RetryAfter of at most %v", err, web.FailedKeyCheckEvery)
	}
	if _, _, err := kc.Check(ctx, guesser, revoked); arbiter.ErrorCode(err) != arbiter.ERATELIMIT {
		t.Fatalf("a cached revoked key after the burst: %v, want ERATELIMIT", err)
	}
	if store.lookups != lookups {
		t.Fatalf("%d lookups after the burst, want none", store.lookups-lookups)
	}

	// Valid keys are not held back: cached, and looked up again once the
	// cache entry expires.
	if acct, _, err := kc.Check(ctx, guesser, valid); err != nil || acct != "acct_1" {
		t.Fatalf("the guesser's valid key: %q, %v", acct, err)
	}
	now = now.Add(keyCacheTTLPlus())
	if acct, _, err := kc.Check(ctx, guesser, valid); err != nil || acct != "acct_1" {
		t.Fatalf("the guesser's valid key after the cache expired: %q, %v", acct, err)
	}
	// Another client is not affected.
	if _, _, err := kc.Check(ctx, other, arbiter.NewAPIKeyPlaintext()); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
		t.Fatalf("another client's guess: %v, want EUNAUTHORIZED", err)
	}
	// Time earns the guesser one check per FailedKeyCheckEvery: the clock
	// has moved just over one since the burst ran out, and moves one more.
	now = now.Add(web.FailedKeyCheckEvery)
	for i := range 2 {
		if _, _, err := kc.Check(ctx, guesser, arbiter.NewAPIKeyPlaintext()); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
			t.Fatalf("guess %d after the wait: %v, want EUNAUTHORIZED", i, err)
		}
	}
	if _, _, err := kc.Check(ctx, guesser, arbiter.NewAPIKeyPlaintext()); arbiter.ErrorCode(err) != arbiter.ERATELIMIT {
		t.Fatalf("a third guess after two refills: %v, want ERATELIMIT", err)
	}
	// Nor after a pause in which renewals dropped the entries that ran
	// out, with the guesser's budget spent again.
	for range 3 {
		now = now.Add(keyCacheTTLPlus())
		if err := kc.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; ; i++ {
		if _, _, err := kc.Check(ctx, guesser, arbiter.NewAPIKeyPlaintext()); arbiter.ErrorCode(err) == arbiter.ERATELIMIT {
			break
		} else if i > web.FailedKeyChecksBurst {
			t.Fatalf("guesses after the pause are never refused: %v", err)
		}
	}
	if acct, _, err := kc.Check(ctx, guesser, valid); err != nil || acct != "acct_1" {
		t.Fatalf("the guesser's valid key after a pause: %q, %v", acct, err)
	}
	// A valid key never spends the budget: checking it often costs nothing.
	fresh := web.NewKeyChecker(store, func() time.Time { return now })
	for range web.FailedKeyChecksBurst + 10 {
		now = now.Add(keyCacheTTLPlus())
		if _, _, err := fresh.Check(ctx, other, valid); err != nil {
			t.Fatalf("a valid key looked up again: %v", err)
		}
	}
	if _, _, err := fresh.Check(ctx, other, arbiter.NewAPIKeyPlaintext()); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
		t.Fatalf("a guess after many valid checks: %v, want EUNAUTHORIZED", err)
	}
}

// keyCacheTTLPlus is a step of the clock just past a cache entry's life.
func keyCacheTTLPlus() time.Duration { return web.KeyCacheTTL + time.Millisecond }

// gatedKeys is a memKeys whose lookups wait until released.
type gatedKeys struct {
	*memKeys
	arrived chan struct{}
	release chan struct{}
}

func (g *gatedKeys) FindAPIKeyByHash(ctx context.Context, hash string) (*arbiter.APIKey, error) {
	g.arrived <- struct{}{}
	<-g.release
	return g.memKeys.FindAPIKeyByHash(ctx, hash)
}

// TestKeyChecker_ManyChecksOfANewValidKeyAtOnceAllPass sends more checks of
// one valid key than a client has failed checks, all before the first
// lookup answers: none of them may be refused, since none of them failed.
func TestKeyChecker_ManyChecksOfANewValidKeyAtOnceAllPass(t *testing.T) {
	t.Parallel()
	valid := arbiter.NewAPIKeyPlaintext()
	const n = 3 * web.FailedKeyChecksBurst
	store := &gatedKeys{memKeys: newMemKeys(valid), arrived: make(chan struct{}, n), release: make(chan struct{})}
	kc := web.NewKeyChecker(store, nil)
	kc.OnJoinedLookup(func() { store.arrived <- struct{}{} })
	errs := make(chan error, n)
	for range n {
		go func() {
			_, _, err := kc.Check(ctx, "198.51.100.1", valid)
			errs <- err
		}()
	}
	// Every check either reaches the store, joins the lookup in flight or
	// is answered without it; only then are the lookups let through.
	answered := 0
	for reached := 0; reached+answered < n; {
		select {
		case <-store.arrived:
			reached++
		case err := <-errs:
			answered++
			if err != nil {
				t.Errorf("a check answered before any lookup: %v", err)
			}
		}
	}
	close(store.release)
	for range n - answered {
		if err := <-errs; err != nil {
			t.Errorf("check: %v", err)
		}
	}
}

package web_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/web"
)

// countedKeys counts what a key checker asks of its store: the lookups of
// one key and the renewals of many (with the hashes each asked for).
type countedKeys struct {
	arbiter.APIKeyService
	// before, when set, runs before each lookup of one key reads; after
	// after it read, before it answers.
	before, after func()
	// renewalsFail makes each renewal fail.
	renewalsFail bool

	mu       sync.Mutex
	lookups  int
	renewals [][]string
}

func (c *countedKeys) FindAPIKeyByHash(ctx context.Context, hash string) (*arbiter.APIKey, error) {
	c.mu.Lock()
	c.lookups++
	c.mu.Unlock()
	if c.before != nil {
		c.before()
	}
	key, err := c.APIKeyService.FindAPIKeyByHash(ctx, hash)
	if c.after != nil {
		c.after()
	}
	return key, err
}

func (c *countedKeys) FindAPIKeysByHash(ctx context.Context, hashes []string) ([]*arbiter.APIKey, error) {
	c.mu.Lock()
	c.renewals = append(c.renewals, slices.Clone(hashes))
	c.mu.Unlock()
	if c.renewalsFail {
		return nil, errors.New("the store is away")
	}
	return c.APIKeyService.FindAPIKeysByHash(ctx, hashes)
}

func (c *countedKeys) counts() (lookups, renewals int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookups, len(c.renewals)
}

// newStoreKey creates an account (if absent) and a key for it in d, and
// returns the key's id and plaintext.
func newStoreKey(t *testing.T, d *db.DB, email string) (id, plaintext string) {
	t.Helper()
	account, err := d.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		t.Fatal(err)
	}
	key, plaintext, err := d.CreateAPIKey(ctx, account.ID, "test", arbiter.Actor{Email: "test@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	return key.ID, plaintext
}

// Requests that miss the cache for one key at once (its entry ran out
// under 32 clients) ask the store once: the checks that come while the
// lookup is in flight share it, and each is answered by it.
func TestKeyChecker_ConcurrentMissesOfAKeyShareOneLookup(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		_, key := newStoreKey(t, d, "owner@example.com")
		const checks = 20
		arrived, release := make(chan struct{}, 2*checks), make(chan struct{})
		store := &countedKeys{APIKeyService: d, before: func() {
			arrived <- struct{}{}
			<-release // the lookup stays in flight until every check has come
		}}
		kc := web.NewKeyChecker(store, nil)
		var joined atomic.Int32
		kc.OnJoinedLookup(func() {
			joined.Add(1)
			arrived <- struct{}{}
		})
		errs := make(chan error, checks)
		for range checks {
			go func() {
				_, _, err := kc.Check(ctx, "203.0.113.1", key)
				errs <- err
			}()
		}
		for range checks {
			<-arrived
		}
		close(release)
		for range checks {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		if lookups, _ := store.counts(); lookups != 1 || joined.Load() != checks-1 {
			t.Errorf("%d checks made %d lookups and joined %d, want 1 lookup shared by all", checks, lookups, joined.Load())
		}
	})
}

// A check that joins a lookup in flight takes its answer only while that
// answer is within the bound a revocation is seen in (KeyCacheTTL from the
// moment its statement was sent): a lookup that read the key active and
// then stalled past the bound cannot let a check made after a revocation
// through; the check reads the key again.
func TestKeyChecker_AStalledLookupDoesNotOutliveTheRevocationBound(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		keyID, key := newStoreKey(t, d, "owner@example.com")
		read, release := make(chan struct{}), make(chan struct{})
		var stalled atomic.Bool
		store := &countedKeys{APIKeyService: d, after: func() {
			if stalled.CompareAndSwap(false, true) {
				close(read)
				<-release // the first lookup read the key active, then stalls
			}
		}}
		var now atomic.Int64
		now.Store(time.Unix(1763805600, 0).UnixNano())
		kc := web.NewKeyChecker(store, func() time.Time { return time.Unix(0, now.Load()) })
		joined := make(chan struct{}, 1)
		kc.OnJoinedLookup(func() { joined <- struct{}{} })
		first := make(chan error, 1)
		go func() {
			_, _, err := kc.Check(ctx, "203.0.113.1", key)
			first <- err
		}()
		<-read
		if _, err := d.RevokeAPIKey(ctx, "", keyID, arbiter.Actor{Email: "test@example.com"}); err != nil {
			t.Fatal(err)
		}
		now.Add(int64(web.KeyCacheTTL + time.Millisecond))
		late := make(chan error, 1)
		go func() {
			_, _, err := kc.Check(ctx, "203.0.113.2", key)
			late <- err
		}()
		<-joined
		close(release)
		<-first // sent before the revocation: either answer is right
		if err := <-late; arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
			t.Fatalf("a check made %v after the revocation, joining a stalled lookup, answered %v; want it refused", web.KeyCacheTTL, err)
		}
	})
}

// A key used without a pause is renewed with the others in use, a
// statement each KeyRefreshEvery, and never looked up by a request of its
// own after its first; revoked in the store, it is refused within
// KeyCacheTTL. When the renewals fail, entries run out and checks look
// their keys up as before: the bound holds all the same.
func TestKeyChecker_AKeyInUseIsRenewedAndItsRevocationSeenInTheBound(t *testing.T) {
	t.Parallel()
	for _, renewalsFail := range []bool{false, true} {
		t.Run(fmt.Sprintf("renewalsFail=%v", renewalsFail), func(t *testing.T) {
			dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
				keyID, key := newStoreKey(t, d, "owner@example.com")
				store := &countedKeys{APIKeyService: d, renewalsFail: renewalsFail}
				now := time.Unix(1763805600, 0)
				kc := web.NewKeyChecker(store, func() time.Time { return now })
				const step = 50 * time.Millisecond
				nextRefresh := now.Add(web.KeyRefreshEvery)
				// advance moves the clock a step, renewing as Run does.
				advance := func() {
					now = now.Add(step)
					if !now.Before(nextRefresh) {
						if err := kc.Refresh(ctx); err != nil && !renewalsFail {
							t.Fatal(err)
						}
						nextRefresh = nextRefresh.Add(web.KeyRefreshEvery)
					}
				}
				if _, _, err := kc.Check(ctx, "203.0.113.1", key); err != nil {
					t.Fatal(err)
				}
				for range 10 * time.Second / step {
					advance()
					if _, _, err := kc.Check(ctx, "203.0.113.1", key); err != nil {
						t.Fatal(err)
					}
				}
				lookups, renewals := store.counts()
				if want := int(10 * time.Second / web.KeyRefreshEvery); renewals != want {
					t.Errorf("%d renewals in 10 s, want %d", renewals, want)
				}
				if !renewalsFail {
					if lookups != 1 {
						t.Errorf("%d lookups of a key in use for 10 s, want only its first", lookups)
					}
					for i, hashes := range store.renewals {
						if !slices.Equal(hashes, []string{arbiter.HashToken(key)}) {
							t.Fatalf("renewal %d asked for %d hashes, want the one key in use", i, len(hashes))
						}
					}
				}

				if _, err := d.RevokeAPIKey(ctx, "", keyID, arbiter.Actor{Email: "test@example.com"}); err != nil {
					t.Fatal(err)
				}
				revokedAt := now
				for {
					advance()
					_, _, err := kc.Check(ctx, "203.0.113.1", key)
					if arbiter.ErrorCode(err) == arbiter.EUNAUTHORIZED {
						break
					} else if err != nil {
						t.Fatal(err)
					}
					if now.Sub(revokedAt) >= web.KeyCacheTTL {
						t.Fatalf("the revoked key was accepted %v after its revocation, past the bound of %v", now.Sub(revokedAt), web.KeyCacheTTL)
					}
				}
				for range 2 * web.KeyCacheTTL / step {
					advance()
					if _, _, err := kc.Check(ctx, "203.0.113.1", key); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
						t.Fatalf("the revoked key, once refused: %v, want EUNAUTHORIZED", err)
					}
				}
			})
		})
	}
}

// Random keys from many addresses are each looked up once (a client's
// failed checks bound its lookups) and never grow the cache past its
// bound, never push out the keys in use, are never renewed, and leave the
// cache once they run out.
func TestKeyChecker_AFloodOfUnknownKeysStaysWithinTheBound(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		_, key := newStoreKey(t, d, "owner@example.com")
		store := &countedKeys{APIKeyService: d}
		now := time.Unix(1763805600, 0)
		kc := web.NewKeyChecker(store, func() time.Time { return now })
		const bound = 64
		kc.SetMaxCachedKeys(bound)
		if _, _, err := kc.Check(ctx, "203.0.113.1", key); err != nil {
			t.Fatal(err)
		}
		const guesses = 500
		for i := range guesses {
			client := fmt.Sprintf("198.51.100.%d", i%50)
			if _, _, err := kc.Check(ctx, client, arbiter.NewAPIKeyPlaintext()); arbiter.ErrorCode(err) != arbiter.EUNAUTHORIZED {
				t.Fatalf("guess %d: %v, want EUNAUTHORIZED", i, err)
			}
			if n := kc.CachedKeys(); n > bound {
				t.Fatalf("%d entries cached after %d guesses, past the bound of %d", n, i+1, bound)
			}
			if i%10 == 0 {
				if _, _, err := kc.Check(ctx, "203.0.113.1", key); err != nil {
					t.Fatalf("the key in use during the flood: %v", err)
				}
			}
		}
		if lookups, _ := store.counts(); lookups != 1+guesses {
			t.Errorf("%d lookups for the key in use and %d guesses, want %d: the key in use was looked up again", lookups, guesses, 1+guesses)
		}
		// One address guessing alone is looked up only within its failed checks.
		before, _ := store.counts()
		for range 3 * web.FailedKeyChecksBurst {
			kc.Check(ctx, "192.0.2.7", arbiter.NewAPIKeyPlaintext())
		}
		if lookups, _ := store.counts(); lookups-before != web.FailedKeyChecksBurst {
			t.Errorf("one address's %d guesses made %d lookups, want %d", 3*web.FailedKeyChecksBurst, lookups-before, web.FailedKeyChecksBurst)
		}

		// Past their life, the guesses leave the cache; the key in use is
		// renewed alone.
		now = now.Add(web.KeyCacheTTL + time.Millisecond)
		if _, _, err := kc.Check(ctx, "203.0.113.1", key); err != nil {
			t.Fatal(err)
		}
		if err := kc.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		if n := kc.CachedKeys(); n != 1 {
			t.Errorf("%d entries cached after the guesses ran out, want the key in use alone", n)
		}
		if last := store.renewals[len(store.renewals)-1]; !slices.Equal(last, []string{arbiter.HashToken(key)}) {
			t.Errorf("the renewal asked for %d hashes, want the key in use alone", len(last))
		}
	})
}

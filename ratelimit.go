package arbiter

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// RateLimit bounds how often each key may act: a token bucket per key,
// which holds a burst of requests at once and earns one more every
// interval. RateLimiter keeps the buckets in one process's memory;
// internal/limits keeps them in Postgres, where every process of a
// deployment spends from the same bucket. Its errors are the store's
// (EUNAVAILABLE when it does not answer).
type RateLimit interface {
	// Allow spends one request of key's bucket and reports whether there
	// was one to spend. When there was not, nothing is spent and
	// retryAfter is how long until there will be.
	Allow(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error)
	// Available reports whether key's bucket has a request to spend,
	// without spending it; when it has not, retryAfter is how long until
	// it will. A caller that learns only afterwards whether a request
	// counts (a failed check, say) asks this first and spends with Allow
	// once it knows.
	Available(ctx context.Context, key string) (ok bool, retryAfter time.Duration, err error)
	// Return gives back one request that Allow spent, for a request that
	// turned out not to count. The bucket never exceeds its burst.
	Return(ctx context.Context, key string) error
}

// RateLimiter is the in-process RateLimit, a rate.Limiter per key: each
// key may spend Burst requests at once, and earns one more every Every.
// It is per process: behind several servers the limit would be per server,
// so a deployment of several processes shares internal/limits' instead.
type RateLimiter struct {
	burst int
	every time.Duration
	now   Clock

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
}

// maxBuckets bounds a limiter's memory; past it, full buckets are dropped.
const maxBuckets = 100_000

// NewRateLimiter returns a limiter allowing burst requests per key at once
// and one more per every; now is its clock (nil: time.Now).
func NewRateLimiter(burst int, every time.Duration, now Clock) *RateLimiter {
	if now == nil {
		now = time.Now
	}
	return &RateLimiter{burst: burst, every: every, now: now, buckets: map[string]*rate.Limiter{}}
}

// Allow implements RateLimit; it never fails.
func (l *RateLimiter) Allow(_ context.Context, key string) (ok bool, retryAfter time.Duration, err error) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(key, now)
	if wait := l.wait(b, now); wait > 0 {
		return false, wait, nil
	}
	b.AllowN(now, 1)
	return true, 0, nil
}

// Available implements RateLimit; it never fails.
func (l *RateLimiter) Available(_ context.Context, key string) (ok bool, retryAfter time.Duration, err error) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if wait := l.wait(l.bucket(key, now), now); wait > 0 {
		return false, wait, nil
	}
	return true, 0, nil
}

// Return implements RateLimit; it never fails.
func (l *RateLimiter) Return(_ context.Context, key string) error {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	// Spending -1 adds a token; the limiter caps its tokens at the burst
	// whenever it next reads them. A Reservation's Cancel would not do:
	// it gives nothing back once its time has passed.
	l.bucket(key, now).AllowN(now, -1)
	return nil
}

// wait returns how long until b has a request to spend at now: 0 when it
// has one. It is computed from the tokens, as (1 - tokens) × every, so a
// whole number of intervals reads back exactly.
func (l *RateLimiter) wait(b *rate.Limiter, now time.Time) time.Duration {
	tokens := b.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) * float64(l.every))
}

// bucket returns key's limiter, making a full one for a new key. The
// caller holds l.mu.
func (l *RateLimiter) bucket(key string, now time.Time) *rate.Limiter {
	if b, ok := l.buckets[key]; ok {
		return b
	}
	if len(l.buckets) >= maxBuckets {
		l.prune(now)
	}
	b := rate.NewLimiter(rate.Every(l.every), l.burst)
	l.buckets[key] = b
	return b
}

// prune drops the buckets that have refilled, which are the same as absent.
func (l *RateLimiter) prune(now time.Time) {
	for k, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= maxBuckets {
		l.buckets = map[string]*rate.Limiter{}
	}
}

// LimitKey is the client's address as per-client rate limits count it: an
// IPv4 address whole, and an IPv6 address by its /64 network, which one
// subscriber usually holds entirely, so hopping between its addresses does
// not earn fresh limits. Anything that is not an IP address is used as is.
func (c Client) LimitKey() string {
	ip, err := netip.ParseAddr(c.IP)
	if err != nil {
		return c.IP
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return ip.String()
	}
	p, _ := ip.WithZone("").Prefix(64)
	return p.String()
}

package arbiter

import (
	"net/netip"
	"sync"
	"time"
)

// RateLimiter is an in-memory token bucket per key: each key may spend
// Burst requests at once, and earns one more every Every. It is per process:
// behind several servers the limit is per server.
type RateLimiter struct {
	burst float64
	every time.Duration
	now   Clock

	mu      sync.Mutex
	buckets map[string]bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

// maxBuckets bounds a limiter's memory; past it, full buckets are dropped.
const maxBuckets = 100_000

// NewRateLimiter returns a limiter allowing burst requests per key at once
// and one more per every; now is its clock (nil: time.Now).
func NewRateLimiter(burst int, every time.Duration, now Clock) *RateLimiter {
	if now == nil {
		now = time.Now
	}
	return &RateLimiter{burst: float64(burst), every: every, now: now, buckets: map[string]bucket{}}
}

// Allow spends one request of key's bucket and reports whether there was
// one to spend. When there was not, nothing is spent and retryAfter is how
// long until there will be.
func (l *RateLimiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refilled(key, now)
	if b.tokens < 1 {
		l.buckets[key] = b
		return false, time.Duration((1 - b.tokens) * float64(l.every))
	}
	b.tokens--
	l.buckets[key] = b
	return true, 0
}

// Available reports whether key's bucket has a request to spend, without
// spending it; when it has not, retryAfter is how long until it will. A
// caller that learns only afterwards whether a request counts (a failed
// check, say) asks this first and spends with Allow once it knows.
func (l *RateLimiter) Available(key string) (ok bool, retryAfter time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refilled(key, now)
	if b.tokens < 1 {
		return false, time.Duration((1 - b.tokens) * float64(l.every))
	}
	return true, 0
}

// Return gives back one request that Allow spent, for a request that turned
// out not to count (a valid API key, say). The bucket never exceeds its
// burst.
func (l *RateLimiter) Return(key string) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.refilled(key, now)
	b.tokens = min(l.burst, b.tokens+1)
	l.buckets[key] = b
}

// refilled returns key's bucket as of now. The caller holds l.mu.
func (l *RateLimiter) refilled(key string, now time.Time) bucket {
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			l.prune(now)
		}
		return bucket{tokens: l.burst, at: now}
	}
	if now.After(b.at) {
		b.tokens = min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.every))
		b.at = now
	}
	return b
}

// prune drops the buckets that have refilled, which are the same as absent.
func (l *RateLimiter) prune(now time.Time) {
	for k, b := range l.buckets {
		if b.tokens+float64(now.Sub(b.at))/float64(l.every) >= l.burst {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) >= maxBuckets {
		l.buckets = map[string]bucket{}
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

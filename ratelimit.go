package arbiter

import (
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
// one to spend.
func (l *RateLimiter) Allow(key string) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			l.prune(now)
		}
		b = bucket{tokens: l.burst, at: now}
	}
	b.tokens = min(l.burst, b.tokens+float64(now.Sub(b.at))/float64(l.every))
	b.at = now
	allowed := b.tokens >= 1
	if allowed {
		b.tokens--
	}
	l.buckets[key] = b
	return allowed
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

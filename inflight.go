package arbiter

import (
	"context"
	"sync"
)

// SlotLimit bounds how many requests of each key run at once: a key may
// hold so many slots, and a request takes one for as long as it runs.
// InFlightLimiter keeps the counts in one process's memory;
// internal/limits keeps them in Postgres, where every process of a
// deployment counts against the same bound.
type SlotLimit interface {
	// Acquire takes one of key's slots and reports whether there was one
	// to take. When there was, release gives it back (whether or not ctx
	// has ended by then); call it once. Its errors are the store's.
	Acquire(ctx context.Context, key string) (release func(), ok bool, err error)
}

// InFlightLimiter is the in-process SlotLimit: a key may hold Max places,
// and a request takes one for as long as it runs. It is per process:
// behind several servers the bound would be per server, so a deployment of
// several processes shares internal/limits' instead. Its memory is that of
// the keys with requests running.
type InFlightLimiter struct {
	max int

	mu      sync.Mutex
	running map[string]int
}

// NewInFlightLimiter returns a limiter allowing max requests of each key
// at once.
func NewInFlightLimiter(max int) *InFlightLimiter {
	return &InFlightLimiter{max: max, running: map[string]int{}}
}

// Acquire implements SlotLimit; it never fails, and a second call of its
// release gives nothing back.
func (l *InFlightLimiter) Acquire(_ context.Context, key string) (release func(), ok bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[key] >= l.max {
		return nil, false, nil
	}
	l.running[key]++
	var once sync.Once
	return func() { once.Do(func() { l.release(key) }) }, true, nil
}

func (l *InFlightLimiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[key]--; l.running[key] <= 0 {
		delete(l.running, key)
	}
}

// Running reports how many requests of key hold a place.
func (l *InFlightLimiter) Running(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.running[key]
}

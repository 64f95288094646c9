package arbiter

import "sync"

// InFlightLimiter bounds how many requests of each key run at once: a key
// may hold Max places, and a request takes one for as long as it runs. It is
// per process: behind several servers the bound is per server. Its memory
// is that of the keys with requests running.
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

// Acquire takes one of key's places and reports whether there was one to
// take. When there was, release gives it back; call it once.
func (l *InFlightLimiter) Acquire(key string) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running[key] >= l.max {
		return nil, false
	}
	l.running[key]++
	var once sync.Once
	return func() { once.Do(func() { l.release(key) }) }, true
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

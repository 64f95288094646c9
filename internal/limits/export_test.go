package limits

import (
	"time"

	"github.com/arbiterhq/arbiter"
)

// ProcessID is the name s's slots are held under, for tests that end a
// process's lease.
func (s *Shared) ProcessID() string { return s.process }

// BlockStatements counts the statements s's limits reserved in blocks
// made: reservations and give-backs of slots, and spends of requests.
func (s *Shared) BlockStatements() int64 { return s.blockStatements.Load() }

// RequestsHeld returns how many requests of key the shared rate limit r
// holds reserved in its process's block and has not handed out, 0 once
// the block lapsed.
func RequestsHeld(r arbiter.RateLimit, key string) int64 {
	sr := r.(*sharedRate)
	sr.mu.Lock()
	defer sr.mu.Unlock()
	t := sr.keys[sr.name+":"+key]
	if t == nil || !time.Now().Before(t.lapses) {
		return 0
	}
	return t.left
}

package limits

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"
)

// sharedRate is a rate limit kept in limit_buckets: burst requests at once
// and one more every every microseconds. A key's row holds its
// theoretical arrival time tat: the bucket is full when tat ≤ now, and n
// requests pass at once when max(tat, now) + n × every ≤ now + burst ×
// every.
//
// A process reserves its requests in blocks, as it does slots
// (blockSlots): a request that finds one of its key reserved in the
// process's block passes without a statement; one that finds none makes
// one, which reserves a block for it and for the requests of the key
// that come while it runs. A block is one request while a key's requests
// come one at a time, and doubles (up to an eighth of the burst, from a
// burst of 16: one request a statement below) while its requests use a
// block up before it lapses, or wait for a statement.
//
// Every request a block hands out was charged to the bucket when the
// block was reserved, and a block lapses every after its statement was
// sent: what it holds then is dropped, never handed out. So the requests
// that pass in any window of time were charged in that window or in the
// every before it, and the deployment passes at most one request more
// than the bucket states in any window (burst + window / every + 1), where
// requests charged one at a time pass at most burst + window / every. The
// requests a block drops were charged and never used: the price is that
// a key whose requests stop for good spends up to a block it did not
// use. A limit whose every is shorter than minBlockEvery, where a block
// could lapse before its statement returns, takes a request a statement.
type sharedRate struct {
	s            *Shared
	name         string
	burst, every int64
	// maxBlock is the most requests one statement reserves.
	maxBlock int64

	mu   sync.Mutex
	keys map[string]*tokens
}

// tokens is what one process holds of a key's bucket.
type tokens struct {
	// left is how many requests the process reserved and has not handed
	// out, until lapses; handedOut how many of its last reservation it
	// handed out and Return has not given back.
	left, handedOut int64
	lapses          time.Time
	// size is how many requests the next reservation asks for, short of
	// the requests that wait; until shortUntil, when a reservation found
	// the bucket short of a block, it asks for one.
	size       int64
	shortUntil time.Time
	// waiting counts the requests of the key in Allow.
	waiting int64
	// busy is the reservation of the key running, nil when none.
	busy *tokenStatement
	// changed is closed, and replaced, when a reservation ends.
	changed chan struct{}
}

// tokenStatement is a reservation of a key's requests: when it ended
// refused, until when the bucket has none (refusedUntil), or err that the
// database did not answer.
type tokenStatement struct {
	done         chan struct{}
	refusedUntil time.Time
	err          error
}

// minBlockEvery is the shortest every whose requests are reserved in
// blocks; pruneKeysAt is how many keys a rate limit remembers before it
// forgets those whose blocks lapsed.
const (
	minBlockEvery = 10 * time.Millisecond
	pruneKeysAt   = 4096
)

// The bucket statements. reserveTokensSQL spends $2 / every requests at
// once and returns the row only when they passed; a first reservation
// inserts the bucket with them spent. $1 key, $2 the requests × every,
// $3 (burst − the requests) × every, all microseconds.
const (
	reserveTokensSQL = `INSERT INTO limit_buckets AS b (key, tat) VALUES ($1, ` + nowMicros + ` + $2)
ON CONFLICT (key) DO UPDATE SET tat = greatest(b.tat, excluded.tat - $2) + $2
WHERE greatest(b.tat, excluded.tat - $2) + $2 <= excluded.tat + $3
RETURNING tat`
	bucketSQL = `SELECT tat, ` + nowMicros + ` FROM limit_buckets WHERE key = $1`
	returnSQL = `UPDATE limit_buckets SET tat = tat - $2 WHERE key = $1`
)

// Allow implements arbiter.RateLimit.
func (r *sharedRate) Allow(ctx context.Context, key string) (bool, time.Duration, error) {
	k := r.name + ":" + key
	if wait := r.s.refused.left(k); wait > 0 {
		return false, wait, nil
	}
	if r.maxBlock == 1 {
		// Blocks of one request: each request makes its statement.
		taken, wait, err := r.take(ctx, k, 1)
		if err == nil && taken == 0 {
			r.s.refused.set(k, wait)
		}
		return taken > 0, wait, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.keys[k]
	if t == nil {
		r.prune()
		t = &tokens{size: 1, changed: make(chan struct{})}
		r.keys[k] = t
	}
	t.waiting++
	defer func() { t.waiting-- }()
	// seen is the reservation this request waited for: when it ended
	// leaving nothing for this request, the request is refused with its
	// outcome.
	var seen *tokenStatement
	for {
		if t.left > 0 && time.Now().Before(t.lapses) {
			t.left--
			t.handedOut++
			return true, 0, nil
		}
		if seen != nil {
			select {
			case <-seen.done:
				if seen.err != nil {
					return false, 0, seen.err
				}
				if wait := time.Until(seen.refusedUntil); wait > 0 {
					return false, wait, nil
				}
				seen = nil // others took the block: reserve another
			default:
			}
		}
		if wait := r.s.refused.left(k); wait > 0 {
			return false, wait, nil
		}
		if t.busy == nil {
			var passed bool
			passed, seen = r.reserve(ctx, k, t)
			if passed {
				return true, 0, nil
			}
			continue
		}
		if seen == nil {
			seen = t.busy
		}
		if err := r.s.waitForChange(ctx, &r.mu, t.changed, r.name); err != nil {
			return false, 0, err
		}
	}
}

// reserve reserves a block of k's requests for t, with r.mu held (and
// let go while the statements run), and reports whether one of them
// passed, for the request that made it, with the finished statement.
func (r *sharedRate) reserve(ctx context.Context, k string, t *tokens) (bool, *tokenStatement) {
	st := &tokenStatement{done: make(chan struct{})}
	t.busy = st
	// A block used up before it lapsed doubles; one that lapsed, or
	// never was, is one request again; and it is at least what waits,
	// unless the bucket was found short of a block lately.
	now := time.Now()
	if now.Before(t.lapses) {
		t.size = min(2*t.size, r.maxBlock)
	} else {
		t.size = 1
	}
	n := min(max(t.size, t.waiting), r.maxBlock)
	if now.Before(t.shortUntil) {
		n = 1
	}
	r.mu.Unlock()
	sent := time.Now()
	asks := []int64{n}
	if n > 1 {
		// What is left of a bucket short of a block is spent one request
		// at a time.
		asks = append(asks, 1)
	}
	// A reservation serves every request that waits for it: the one that
	// made it leaving does not cancel it.
	taken, wait, err := r.take(context.WithoutCancel(ctx), k, asks...)
	r.mu.Lock()
	if taken < n {
		// The bucket had fewer than n: it regains them within n × every.
		t.size, t.shortUntil = 1, time.Now().Add(time.Duration(n*r.every)*time.Microsecond)
	}
	switch {
	case err != nil:
		st.err = err
	case taken == 0:
		st.refusedUntil = time.Now().Add(wait)
		r.s.refused.set(k, wait)
	default:
		// The request that made the reservation takes the first.
		t.left, t.handedOut, t.lapses = taken-1, 1, sent.Add(time.Duration(r.every)*time.Microsecond)
	}
	t.busy = nil
	close(st.done)
	close(t.changed)
	t.changed = make(chan struct{})
	return taken > 0, st
}

// take spends the first of asks, a number of requests, that k's bucket
// has, and returns how many it spent; when none, how long until the
// bucket has a request.
func (r *sharedRate) take(ctx context.Context, k string, asks ...int64) (taken int64, wait time.Duration, err error) {
	err = r.s.call(ctx, func(ctx context.Context) error {
		for _, n := range asks {
			spent, err := r.spend(ctx, k, n)
			if err != nil {
				return fmt.Errorf("limit %s: %w", r.name, err)
			}
			if spent > 0 {
				taken = spent
				return nil
			}
		}
		_, left, err := r.read(ctx, k)
		// The bucket was empty a moment ago; it may have gained a request
		// since, in the microseconds between the statements.
		wait = max(left, time.Millisecond)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return taken, wait, nil
}

// spend charges n requests to k's bucket and returns n when they passed,
// 0 when the bucket had fewer.
func (r *sharedRate) spend(ctx context.Context, k string, n int64) (int64, error) {
	r.s.blockStatements.Add(1)
	var tat int64
	switch err := r.s.db.QueryRowContext(ctx, reserveTokensSQL, k, n*r.every, (r.burst-n)*r.every).Scan(&tat); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return n, nil
}

// prune forgets, with r.mu held, up to pruneKeysAt/64 keys idle whose
// blocks lapsed, once it remembers pruneKeysAt: a few at each new key,
// so that the keys it remembers stay about those of the last every.
func (r *sharedRate) prune() {
	if len(r.keys) < pruneKeysAt {
		return
	}
	now := time.Now()
	seen := 0
	for k, t := range r.keys {
		if seen++; seen > pruneKeysAt/64 {
			return
		}
		if t.busy == nil && t.waiting == 0 && !now.Before(t.lapses) {
			delete(r.keys, k)
		}
	}
}

// Available implements arbiter.RateLimit.
func (r *sharedRate) Available(ctx context.Context, key string) (bool, time.Duration, error) {
	k := r.name + ":" + key
	if wait := r.s.refused.left(k); wait > 0 {
		return false, wait, nil
	}
	r.mu.Lock()
	t := r.keys[k]
	held := t != nil && t.left > 0 && time.Now().Before(t.lapses)
	r.mu.Unlock()
	if held {
		return true, 0, nil
	}
	var ok bool
	var wait time.Duration
	err := r.s.call(ctx, func(ctx context.Context) error {
		var err error
		ok, wait, err = r.read(ctx, k)
		return err
	})
	if err != nil {
		return false, 0, err
	}
	if !ok {
		r.s.refused.set(k, wait)
	}
	return ok, wait, nil
}

// read returns whether the bucket of k has a request to spend and, when
// not, how long until it will.
func (r *sharedRate) read(ctx context.Context, k string) (bool, time.Duration, error) {
	var tat, now int64
	switch err := r.s.db.QueryRowContext(ctx, bucketSQL, k).Scan(&tat, &now); {
	case errors.Is(err, sql.ErrNoRows):
		return true, 0, nil
	case err != nil:
		return false, 0, fmt.Errorf("limit %s: %w", r.name, err)
	}
	wait := max(tat, now) + r.every - (now + r.burst*r.every)
	if wait <= 0 {
		return true, 0, nil
	}
	return false, time.Duration(wait) * time.Microsecond, nil
}

// Return implements arbiter.RateLimit. While the key's block has not
// lapsed, a request it handed out goes back to it, without a statement,
// to be handed out again before the block lapses; past what the block
// handed out, a Return then gives nothing (the others came from a block
// before, whose requests the bucket may no longer count). Without a
// block, the request goes back to the bucket.
func (r *sharedRate) Return(ctx context.Context, key string) error {
	k := r.name + ":" + key
	r.s.refused.clear(k)
	r.mu.Lock()
	t := r.keys[k]
	inBlock := t != nil && time.Now().Before(t.lapses)
	if inBlock && t.handedOut > 0 {
		t.handedOut--
		t.left++
	}
	r.mu.Unlock()
	if inBlock {
		return nil
	}
	return r.s.call(ctx, func(ctx context.Context) error {
		if _, err := r.s.db.ExecContext(ctx, returnSQL, k, r.every); err != nil {
			return fmt.Errorf("limit %s: %w", r.name, err)
		}
		return nil
	})
}

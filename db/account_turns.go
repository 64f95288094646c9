package db

import (
	"context"
	"sync"
)

// chainTurnsPerAccount is how many of one account's human decisions a
// process runs at once: they take turns on the account's receipt chain,
// locked from a decision's signing to its commit, and three keep it busy
// (a decision's statements before the chain are about twice those on it).
// More would only wait on the chain's lock, each holding a connection of
// the pool that the requests around them (a Slack click's ack, a page of
// the desk) then wait for: at 200 clicks/s on a loaded machine, the ack's
// p99 was 1.9 s with them all running, 0.1 s with three (two: 0.09 s,
// with a fifth fewer decided).
const chainTurnsPerAccount = 3

// accountTurns bounds, per key (an account), the calls of this process
// that run at once: most (zero: one); the others wait in memory, holding
// nothing. The zero value is ready to use.
type accountTurns struct {
	most int

	mu   sync.Mutex
	keys map[string]*accountTurnsOf
}

// accountTurnsOf are a key's turns: a place in held for each call
// running, and users counts the calls running or waiting, so that the key
// is forgotten when none is left.
type accountTurnsOf struct {
	held  chan struct{}
	users int
}

// take waits for a turn of key and returns the function that ends it,
// or ctx's error when ctx ends first.
func (t *accountTurns) take(ctx context.Context, key string) (func(), error) {
	t.mu.Lock()
	if t.keys == nil {
		t.keys = map[string]*accountTurnsOf{}
	}
	k := t.keys[key]
	if k == nil {
		k = &accountTurnsOf{held: make(chan struct{}, max(t.most, 1))}
		t.keys[key] = k
	}
	k.users++
	t.mu.Unlock()
	select {
	case k.held <- struct{}{}:
	case <-ctx.Done():
		t.leave(key, k)
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-k.held
			t.leave(key, k)
		})
	}, nil
}

// leave counts a call of key gone, forgetting the key when it was the
// last.
func (t *accountTurns) leave(key string, k *accountTurnsOf) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if k.users--; k.users == 0 {
		delete(t.keys, key)
	}
}

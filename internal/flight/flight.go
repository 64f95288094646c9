// Package flight lets the callers that miss a cache at once share one read
// of what they missed: the first starts the read, the others that come
// while it is in flight wait for its answer instead of reading too.
package flight

import (
	"context"
	"errors"
	"sync"
)

// errNoAnswer is a shared read's answer until it returns: the waiters of
// one that panicked read on their own.
var errNoAnswer = errors.New("flight: the shared read did not answer")

// Group is the reads in flight, by key. The zero value is ready to use.
type Group[K comparable, V any] struct {
	// Joined, when set, is called when a caller joins a read in flight,
	// before it waits; tests use it to see the sharing.
	Joined func(key K)

	mu    sync.Mutex
	reads map[K]*call[V]
}

// call is one read in flight.
type call[V any] struct {
	done  chan struct{} // closed when the read ended
	value V
	err   error
}

// Do returns what read returns for key. When a read of key is already in
// flight, Do waits for it instead (or for ctx's end) and returns its
// answer; a waiter whose shared read failed (its caller may have given up)
// reads on its own. read runs on the caller's goroutine with the caller's
// context.
func (g *Group[K, V]) Do(ctx context.Context, key K, read func() (V, error)) (V, error) {
	g.mu.Lock()
	if r, ok := g.reads[key]; ok {
		g.mu.Unlock()
		if g.Joined != nil {
			g.Joined(key)
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
		if r.err == nil {
			return r.value, nil
		}
		return read()
	}
	r := &call[V]{done: make(chan struct{}), err: errNoAnswer}
	if g.reads == nil {
		g.reads = map[K]*call[V]{}
	}
	g.reads[key] = r
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.reads, key)
		g.mu.Unlock()
		close(r.done)
	}()
	r.value, r.err = read()
	return r.value, r.err
}

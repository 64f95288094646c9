package flight_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/arbiterhq/arbiter/internal/flight"
)

// Callers that come while a read of their key is in flight share it; a
// read of another key is not shared; a waiter whose shared read failed
// reads on its own; a waiter whose context ends stops waiting.
func TestGroup_SharesAReadInFlight(t *testing.T) {
	const waiters = 10
	var g flight.Group[string, int]
	joined := make(chan string, 2*waiters)
	g.Joined = func(key string) { joined <- key }
	var reads atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	type answer struct {
		value int
		err   error
	}
	first := make(chan answer, 1)
	go func() {
		v, err := g.Do(context.Background(), "a", func() (int, error) {
			reads.Add(1)
			close(started)
			<-release
			return 7, nil
		})
		first <- answer{v, err}
	}()
	<-started
	answers := make(chan answer, waiters)
	for range waiters {
		go func() {
			v, err := g.Do(context.Background(), "a", func() (int, error) { return 0, errors.New("read again") })
			answers <- answer{v, err}
		}()
	}
	// The read stays in flight until every waiter has joined it.
	for range waiters {
		<-joined
	}
	close(release)
	if a := <-first; a.value != 7 || a.err != nil {
		t.Errorf("the read's caller got %v, %v", a.value, a.err)
	}
	for range waiters {
		if a := <-answers; a.value != 7 || a.err != nil {
			t.Errorf("a waiter got %v, %v, want the shared read's 7", a.value, a.err)
		}
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads, want 1", n)
	}

	// A failed shared read: the waiter reads on its own.
	fail, failing := make(chan struct{}), make(chan struct{})
	go g.Do(context.Background(), "b", func() (int, error) {
		close(failing)
		<-fail
		return 0, errors.New("the store is away")
	})
	<-failing
	own := make(chan answer, 1)
	go func() {
		v, err := g.Do(context.Background(), "b", func() (int, error) { return 9, nil })
		own <- answer{v, err}
	}()
	<-joined
	close(fail)
	if a := <-own; a.value != 9 || a.err != nil {
		t.Errorf("the waiter of a failed read got %v, %v, want its own read's 9", a.value, a.err)
	}

	// A waiter whose context ends stops waiting.
	stuck, reading := make(chan struct{}), make(chan struct{})
	defer close(stuck)
	go g.Do(context.Background(), "c", func() (int, error) {
		close(reading)
		<-stuck
		return 0, nil
	})
	<-reading
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := g.Do(ctx, "c", func() (int, error) { return 0, nil })
		gaveUp <- err
	}()
	<-joined
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose context ended: %v", err)
	}
}

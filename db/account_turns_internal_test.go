package db

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestAccountTurns_BoundAKeyAndLetOthersBy: a key's calls beyond most wait
// for a turn, in memory, until one ends; another key's calls do not wait
// for them; a wait that gives up leaves no trace, and a key is forgotten
// when its last call ends.
func TestAccountTurns_BoundAKeyAndLetOthersBy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	turns := &accountTurns{most: 2}
	var ends []func()
	for range 2 {
		end, err := turns.take(ctx, "acct_a")
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
	}

	// A third of the key waits: cancelled, it says so, having had no turn.
	cancelled, cancel := context.WithCancel(ctx)
	third := make(chan error, 1)
	go func() {
		end, err := turns.take(cancelled, "acct_a")
		if end != nil {
			end()
		}
		third <- err
	}()
	// Another key takes its turns meanwhile.
	other, err := turns.take(ctx, "acct_b")
	if err != nil {
		t.Fatal(err)
	}
	other()
	waitUsers(t, turns, "acct_a", 3)
	cancel()
	if err := <-third; !errors.Is(err, context.Canceled) {
		t.Fatalf("a third call of a key with two running got a turn (error %v), want it to wait", err)
	}

	// A fourth waits for a turn, and has it once one ends.
	fourth := make(chan func(), 1)
	go func() {
		end, err := turns.take(ctx, "acct_a")
		if err != nil {
			t.Error(err)
		}
		fourth <- end
	}()
	waitUsers(t, turns, "acct_a", 3)
	select {
	case <-fourth:
		t.Fatal("a call got a turn of a key whose two turns were taken")
	default:
	}
	ends[0]()
	ends[0]() // ending twice gives back one turn
	end := <-fourth
	end()
	ends[1]()
	turns.mu.Lock()
	defer turns.mu.Unlock()
	if len(turns.keys) != 0 {
		t.Errorf("keys kept after their calls ended: %v", turns.keys)
	}
}

// waitUsers waits until key has n calls running or waiting.
func waitUsers(t *testing.T, turns *accountTurns, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		turns.mu.Lock()
		got := 0
		if k := turns.keys[key]; k != nil {
			got = k.users
		}
		turns.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("key %s has %d calls, want %d", key, got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

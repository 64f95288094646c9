package arbiter_test

import (
	"context"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestInFlightLimiter(t *testing.T) {
	l := arbiter.NewInFlightLimiter(2)
	r1, ok1, _ := l.Acquire(context.Background(), "a")
	r2, ok2, _ := l.Acquire(context.Background(), "a")
	if _, ok, _ := l.Acquire(context.Background(), "a"); !ok1 || !ok2 || ok {
		t.Fatalf("three acquires of 2 places = %v %v %v, want true true false", ok1, ok2, ok)
	}
	rb, okb, _ := l.Acquire(context.Background(), "b")
	if !okb {
		t.Fatal("another key's place was taken by a's")
	}
	r1()
	r1() // a second release gives nothing back
	if got := l.Running("a"); got != 1 {
		t.Errorf("after one release (twice), a runs %d, want 1", got)
	}
	if r, ok, _ := l.Acquire(context.Background(), "a"); !ok {
		t.Error("a released place was not given back")
	} else {
		r()
	}
	r2()
	rb()
	if l.Running("a") != 0 || l.Running("b") != 0 {
		t.Errorf("after every release a runs %d and b %d", l.Running("a"), l.Running("b"))
	}
}

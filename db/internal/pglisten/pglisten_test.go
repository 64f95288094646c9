package pglisten_test

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/db/internal/pglisten"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// within waits for c, at most 30 s.
func within[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("gave up waiting: %s", what)
		panic("unreachable")
	}
}

// TestListener_HearsItsChannel: LISTEN takes effect (lost is called), a
// notification on the channel reaches notify with its payload, and one on
// another channel does not.
func TestListener_HearsItsChannel(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, db.Postgres)
	heard, lost := make(chan string, 10), make(chan struct{}, 10)
	l := pglisten.New(url, "pglisten_test", "test listener", slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(p string) { heard <- p }, func() { lost <- struct{}{} })
	defer l.Close()
	l.Start()
	l.Start() // one connection however often it starts
	within(t, "LISTEN in force", lost)

	conn, err := sql.Open("postgres", url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, n := range [][2]string{{"pglisten_other", "not this"}, {"pglisten_test", "tsk_1"}} {
		if _, err := conn.Exec(`SELECT pg_notify($1, $2)`, n[0], n[1]); err != nil {
			t.Fatal(err)
		}
	}
	if got := within(t, "the notification", heard); got != "tsk_1" {
		t.Fatalf("heard %q, want tsk_1", got)
	}
	l.Close()
	if len(lost) != 0 {
		t.Fatalf("lost was called %d more times without a reconnect", len(lost))
	}
}

// TestSender_KicksShareASend: kicks while a send runs, or within the gap
// after it, make one more send between them; a failed send is reported;
// Close stops the sender and a later Kick neither blocks nor sends.
func TestSender_KicksShareASend(t *testing.T) {
	t.Parallel()
	var sends atomic.Int64
	started, finish := make(chan struct{}, 10), make(chan struct{})
	var failed []error
	var mu sync.Mutex
	boom := errors.New("boom")
	s := pglisten.NewSender(time.Millisecond, func(context.Context) error {
		n := sends.Add(1)
		started <- struct{}{}
		if n == 1 {
			<-finish
			return boom
		}
		return nil
	}, func(err error) {
		mu.Lock()
		failed = append(failed, err)
		mu.Unlock()
	})
	s.Kick()
	within(t, "the first send", started)
	for range 100 {
		s.Kick() // while the first send runs: they share the next
	}
	close(finish)
	within(t, "the second send", started)
	s.Close()
	if n := sends.Load(); n != 2 {
		t.Fatalf("%d sends for 101 kicks, want 2", n)
	}
	mu.Lock()
	if len(failed) != 1 || !errors.Is(failed[0], boom) {
		t.Fatalf("failed sends reported: %v, want [boom]", failed)
	}
	mu.Unlock()
	s.Kick()
	s.Close()
	if n := sends.Load(); n != 2 {
		t.Fatalf("a kick after Close sent (%d sends)", n)
	}
}

// TestSender_CloseBeforeAnyKick: a sender never kicked closes at once, and
// then never starts.
func TestSender_CloseBeforeAnyKick(t *testing.T) {
	t.Parallel()
	var sends atomic.Int64
	s := pglisten.NewSender(time.Millisecond, func(context.Context) error { sends.Add(1); return nil }, func(error) {})
	s.Close()
	s.Kick()
	if sends.Load() != 0 {
		t.Fatal("a sender closed before its first kick sent")
	}
}

// TestListener_ReplacesAConnectionThatGoesSilent: a connection on which
// nothing comes any more (a primary whose machine vanished, a network
// that drops everything: here a proxy that stops passing bytes, the
// connection open) is noticed by the pings within ReadTimeout and a ping,
// and replaced once the database answers again: LISTEN is in force again
// (lost is called) and a notification is heard. It used to wait for the
// operating system to give up on the connection (minutes; the 30 s ping
// waited with it).
func TestListener_ReplacesAConnectionThatGoesSilent(t *testing.T) {
	t.Parallel()
	direct := dbtest.URL(t, db.Postgres)
	proxy, url := dbtest.ThroughProxy(t, direct)
	logs := &testutil.SyncBuffer{}
	heard, lost := make(chan string, 10), make(chan struct{}, 10)
	l := pglisten.New(url, "pglisten_silent", "test listener", slog.New(slog.NewTextHandler(logs, nil)),
		func(p string) { heard <- p }, func() { lost <- struct{}{} })
	// A connection frozen mid-ping holds the close until it answers.
	t.Cleanup(func() { proxy.Thaw(); l.Close() })
	l.Start()
	within(t, "LISTEN in force", lost)

	proxy.Freeze()
	frozen := time.Now()
	for deadline := frozen.Add(time.Minute); !strings.Contains(logs.String(), "test listener lost its connection"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the listener did not notice in a minute that its connection went silent; it logged:\n%s", logs.String())
		}
	}
	t.Logf("noticed %v after the connection went silent (ReadTimeout %v, a ping every %v)",
		time.Since(frozen).Round(10*time.Millisecond), pglisten.ReadTimeout, pglisten.Ping)
	proxy.Thaw()
	within(t, "LISTEN in force again", lost)

	conn, err := sql.Open("postgres", direct)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(`SELECT pg_notify('pglisten_silent', 'tsk_2')`); err != nil {
		t.Fatal(err)
	}
	if got := within(t, "the notification after the reconnect", heard); got != "tsk_2" {
		t.Fatalf("heard %q, want tsk_2", got)
	}
}

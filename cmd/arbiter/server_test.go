package main

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// rawRequest writes a GET with the extra header lines on conn, in the
// background; the server may hang up before all of it is written.
func rawRequest(conn net.Conn, extra string) {
	go fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: arbiter\r\n%s\r\n", extra)
}

// readStatus reads one answer from conn and returns its status code.
func readStatus(t *testing.T, conn net.Conn, r *bufio.Reader) int {
	t.Helper()
	// A safety net so a broken server fails the test instead of hanging
	// it; the test never waits for it to pass.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func TestRun_AHugeHeaderIs431(t *testing.T) {
	getenv := env(map[string]string{"ARBITER_DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "a.db")})
	base := serve(t, getenv)
	for _, tc := range []struct {
		name     string
		header   int
		tooLarge bool
	}{
		{"1MB", 1 << 20, true},
		{"JustOverTheLimit", MaxHeaderBytes + 8<<10, true},
		{"WithinTheLimit", MaxHeaderBytes - 1<<10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			rawRequest(conn, "X-Big: "+strings.Repeat("a", tc.header)+"\r\n")
			got := readStatus(t, conn, bufio.NewReader(conn))
			if (got == http.StatusRequestHeaderFieldsTooLarge) != tc.tooLarge {
				t.Fatalf("a header of %d bytes = %d; want 431: %v", tc.header, got, tc.tooLarge)
			}
		})
	}
}

func TestListen_TheConnectionPastTheCapWaitsUntilOneCloses(t *testing.T) {
	const max = 2
	ln, err := listen("127.0.0.1:0", max)
	if err != nil {
		t.Fatal(err)
	}
	srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}), slog.New(slog.DiscardHandler))
	var (
		mu       sync.Mutex
		accepted int
	)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			accepted++
			mu.Unlock()
		}
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	acceptedSoFar := func() int {
		mu.Lock()
		defer mu.Unlock()
		return accepted
	}

	type client struct {
		conn net.Conn
		r    *bufio.Reader
	}
	dial := func() client {
		t.Helper()
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return client{conn, bufio.NewReader(conn)}
	}
	// Fill the cap with keep-alive connections, each served once.
	var open []client
	for range max {
		c := dial()
		rawRequest(c.conn, "")
		if s := readStatus(t, c.conn, c.r); s != http.StatusOK {
			t.Fatalf("status = %d", s)
		}
		open = append(open, c)
	}
	// One more connects (the kernel queues it) and asks.
	extra := dial()
	rawRequest(extra.conn, "")
	// The server keeps serving the connections it has…
	rawRequest(open[0].conn, "")
	if s := readStatus(t, open[0].conn, open[0].r); s != http.StatusOK {
		t.Fatalf("status = %d", s)
	}
	// …and has not taken the extra one.
	if n := acceptedSoFar(); n != max {
		t.Fatalf("the server accepted %d connections with a cap of %d", n, max)
	}
	// Once one closes, the extra one is served.
	open[1].conn.Close()
	if s := readStatus(t, extra.conn, extra.r); s != http.StatusOK {
		t.Fatalf("the waiting connection's status = %d", s)
	}
	if n := acceptedSoFar(); n != max+1 {
		t.Fatalf("accepted %d connections in all, want %d", n, max+1)
	}
}

func TestRaiseOpenFileLimit(t *testing.T) {
	var before syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &before); err != nil {
		t.Skipf("no RLIMIT_NOFILE here: %v", err)
	}
	if before.Max < 2 {
		t.Skip("the hard limit leaves no room to lower the soft one")
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &before) })
	lowered := before
	lowered.Cur = before.Max - 1
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatal(err)
	}
	got, err := raiseOpenFileLimit()
	if err != nil {
		t.Fatal(err)
	}
	var after syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &after); err != nil {
		t.Fatal(err)
	}
	if after.Cur != before.Max || got != before.Max {
		t.Fatalf("soft limit = %d (reported %d), want the hard limit %d", after.Cur, got, before.Max)
	}
}

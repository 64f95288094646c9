package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/internal/testutil"
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
	conn.SetReadDeadline(testutil.Patience(t))
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func TestRun_AHugeHeaderIs431(t *testing.T) {
	t.Parallel()
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

// dialFrom connects to the server at base from the loopback address from
// (127.0.0.x), or skips the test where that address cannot be used.
func dialFrom(t *testing.T, base, from string) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("cannot dial from %s here: %v", from, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

// askOpenAPI asks for the OpenAPI document on conn, an answer that needs
// nothing but the server, and returns the status, or the error of a
// connection that was closed or timed out.
func askOpenAPI(conn net.Conn, r *bufio.Reader) (int, error) {
	if _, err := fmt.Fprint(conn, "GET /v1/openapi.json HTTP/1.1\r\nHost: arbiter\r\n\r\n"); err != nil {
		return 0, err
	}
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return 0, err
	}
	return res.StatusCode, nil
}

// answeredWithinASecond asks base on a new connection from the address
// and fails unless it is answered 200 within a second.
func answeredWithinASecond(t *testing.T, base, from string) {
	t.Helper()
	start := time.Now()
	conn, r := dialFrom(t, base, from)
	conn.SetDeadline(start.Add(time.Second))
	status, err := askOpenAPI(conn, r)
	if err != nil {
		t.Fatalf("%s was not answered within a second: %v", from, err)
	}
	if status != http.StatusOK {
		t.Fatalf("%s was answered %d", from, status)
	}
	t.Logf("%s was answered in %s", from, time.Since(start))
}

// TestRun_OneAddressCannotHoldEveryConnection: with room for 4
// connections and 2 per address, an address that tries to take every
// slot, or two that fill the server with connections idle in keep-alive,
// cannot keep a third address from being answered within a second.
func TestRun_OneAddressCannotHoldEveryConnection(t *testing.T) {
	// Not parallel: the third address must be answered within a second.
	const max, perIP = 4, 2
	getenv := func(dir string) func(string) string {
		return env(map[string]string{
			"ARBITER_DATABASE_URL":           "sqlite:" + filepath.Join(dir, "a.db"),
			"ARBITER_MAX_CONNECTIONS":        strconv.Itoa(max),
			"ARBITER_MAX_CONNECTIONS_PER_IP": strconv.Itoa(perIP),
		})
	}

	t.Run("BusyPastItsShare", func(t *testing.T) {
		base := serve(t, getenv(t.TempDir()))
		// 127.0.0.2 opens as many connections as the server holds and
		// keeps each busy in a request whose header never ends: past its
		// share, each is answered 429 and closed at once.
		for i := range max {
			conn, r := dialFrom(t, base, "127.0.0.2")
			fmt.Fprint(conn, "GET /v1/openapi.json HTTP/1.1\r\nHost: arbiter\r\n")
			if i < perIP {
				continue
			}
			conn.SetReadDeadline(testutil.Patience(t))
			res, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("connection %d of one address: %v, want a 429", i+1, err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" {
				t.Fatalf("connection %d of one address = %d (Retry-After %q), want 429 with Retry-After",
					i+1, res.StatusCode, res.Header.Get("Retry-After"))
			}
			if _, err := r.ReadByte(); err != io.EOF {
				t.Fatalf("after the 429: %v, want the connection closed", err)
			}
		}
		answeredWithinASecond(t, base, "127.0.0.3")
	})

	t.Run("IdleAtTheCap", func(t *testing.T) {
		base := serve(t, getenv(t.TempDir()))
		// Two addresses each hold their share, idle in keep-alive after
		// one request: the server is full.
		type held struct {
			conn net.Conn
			r    *bufio.Reader
		}
		var idle []held
		for _, from := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.4", "127.0.0.4"} {
			conn, r := dialFrom(t, base, from)
			conn.SetDeadline(testutil.Patience(t))
			if status, err := askOpenAPI(conn, r); err != nil || status != http.StatusOK {
				t.Fatalf("status = %d, %v", status, err)
			}
			idle = append(idle, held{conn, r})
		}
		answeredWithinASecond(t, base, "127.0.0.3")
		// One idle connection was closed to make room; the others still
		// serve.
		var closed int
		for _, h := range idle {
			h.conn.SetDeadline(testutil.Patience(t))
			status, err := askOpenAPI(h.conn, h.r)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("an idle connection was neither served nor closed")
			}
			if err != nil {
				closed++
			} else if status != http.StatusOK {
				t.Fatalf("status = %d", status)
			}
		}
		if closed != 1 {
			t.Fatalf("%d idle connections were closed, want 1", closed)
		}
	})
}

func TestRaiseOpenFileLimit(t *testing.T) {
	// Not parallel: it lowers the process's open file limit.
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

// TestRun_SideListenersBeyondLoopbackAreWarnedOf: the metrics and the
// profiler answer anyone who reaches them, so listening on every interface
// draws a warning at start, and listening on loopback does not.
func TestRun_SideListenersBeyondLoopbackAreWarnedOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr   string
		warned bool
	}{
		{"0.0.0.0:0", true},
		{"127.0.0.1:0", false},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			getenv := env(map[string]string{"ARBITER_DATABASE_URL": "sqlite:" + filepath.Join(t.TempDir(), "a.db")})
			_, logs := serveWithLogs(t, getenv, "--metrics-addr", tc.addr, "--pprof-addr", tc.addr)
			for _, name := range []string{"metrics", "profiler"} {
				warning := regexp.MustCompile(`level=WARN msg="` + name + ` listening beyond loopback[^"]*" addr=\S+`)
				if warning.MatchString(logs.String()) != tc.warned {
					t.Errorf("%s on %s: warned %v, want %v\n%s", name, tc.addr, !tc.warned, tc.warned, logs)
				}
				if !strings.Contains(logs.String(), `msg="`+name+` listening`) {
					t.Errorf("%s on %s: no line says where it listens\n%s", name, tc.addr, logs)
				}
			}
		})
	}
}

func TestBeyondLoopback(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"0.0.0.0:9464":           true,
		"[::]:9464":              true,
		"192.168.1.5:9464":       true,
		"[2001:db8::1]:9464":     true,
		"127.0.0.1:9464":         false,
		"127.0.0.2:9464":         false,
		"[::1]:9464":             false,
		"[::ffff:127.0.0.1]:946": false,
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := beyondLoopback(tcp); got != want {
			t.Errorf("beyondLoopback(%s) = %v, want %v", addr, got, want)
		}
	}
}

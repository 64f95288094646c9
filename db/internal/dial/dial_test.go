package dial_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/db/internal/dial"
)

// wrapped is the connection the test's dialer returns.
type wrapped struct{ net.Conn }

// TestDialer_WrapsEveryConnection dials a loopback listener with each of
// the three methods: each returns the wrapper's connection, around one
// that reached the listener.
func TestDialer_WrapsEveryConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	d := dial.Dialer{Wrap: func(c net.Conn) net.Conn { return wrapped{c} }}
	addr := ln.Addr().String()
	for name, dialFn := range map[string]func() (net.Conn, error){
		"Dial":        func() (net.Conn, error) { return d.Dial("tcp", addr) },
		"DialTimeout": func() (net.Conn, error) { return d.DialTimeout("tcp", addr, time.Minute) },
		"DialContext": func() (net.Conn, error) { return d.DialContext(context.Background(), "tcp", addr) },
	} {
		t.Run(name, func(t *testing.T) {
			c, err := dialFn()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			w, ok := c.(wrapped)
			if !ok {
				t.Fatalf("%s returned a %T, not the wrapper's connection", name, c)
			}
			server := <-accepted
			defer server.Close()
			if got, want := server.RemoteAddr().String(), w.Conn.LocalAddr().String(); got != want {
				t.Errorf("the listener accepted %s, the wrapped connection is from %s", got, want)
			}
		})
	}
}

// TestDialer_FailsWithoutWrapping dials an address nobody listens on:
// each method returns the dial's error and no connection, and the wrapper
// is never called.
func TestDialer_FailsWithoutWrapping(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d := dial.Dialer{Wrap: func(c net.Conn) net.Conn {
		t.Error("the wrapper was called without a connection")
		return c
	}}
	for name, dialFn := range map[string]func() (net.Conn, error){
		"Dial":        func() (net.Conn, error) { return d.Dial("tcp", addr) },
		"DialTimeout": func() (net.Conn, error) { return d.DialTimeout("tcp", addr, time.Minute) },
		"DialContext": func() (net.Conn, error) { return d.DialContext(context.Background(), "tcp", addr) },
	} {
		t.Run(name, func(t *testing.T) {
			if c, err := dialFn(); err == nil || c != nil {
				t.Errorf("%s to a closed port = %v, %v; want an error and no connection", name, c, err)
			}
		})
	}
}

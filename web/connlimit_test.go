package web

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/config"
)

// limiterUnderTest is a ConnLimiter on a loopback port whose accepted
// connections arrive on accepted.
type limiterUnderTest struct {
	*ConnLimiter
	accepted chan net.Conn
}

func startLimiter(t *testing.T, max, perClient int, trusted []netip.Prefix) *limiterUnderTest {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &limiterUnderTest{LimitConnections(ln, max, perClient, trusted), make(chan net.Conn, 16)}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			l.accepted <- c
		}
	}()
	return l
}

// dial connects to l from the loopback address from (127.0.0.x).
func (l *limiterUnderTest) dial(t *testing.T, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", l.Addr().String())
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("cannot dial from %s here: %v", from, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// next returns the next connection the limiter let through.
func (l *limiterUnderTest) next(t *testing.T) net.Conn {
	t.Helper()
	select {
	case c := <-l.accepted:
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("no connection was accepted within 30s")
		return nil
	}
}

// admit dials from the address and returns the server's side of the
// connection, which must be let through.
func (l *limiterUnderTest) admit(t *testing.T, from string) (client, server net.Conn) {
	t.Helper()
	client = l.dial(t, from)
	server = l.next(t)
	if got, want := server.RemoteAddr().String(), client.LocalAddr().String(); got != want {
		t.Fatalf("accepted %s, want %s", got, want)
	}
	return client, server
}

// counts returns the connections counted in all and the clients counted.
func (l *limiterUnderTest) counts() (open, clients int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open, len(l.clients)
}

// released reports whether the limiter no longer counts c.
func (l *limiterUnderTest) released(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return c.(*limitedConn).released
}

// waitClosed waits until the server has closed the client's connection.
func waitClosed(t *testing.T, client net.Conn) {
	t.Helper()
	client.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := client.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("read %d bytes, %v; want the connection closed", n, err)
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the connection was not closed within 30s")
	}
}

func TestConnLimiter_AClientPastItsShareIsAnswered429AtOnce(t *testing.T) {
	t.Parallel()
	l := startLimiter(t, 4, 2, nil)
	l.admit(t, "127.0.0.2")
	l.admit(t, "127.0.0.2")

	excess := l.dial(t, "127.0.0.2")
	excess.SetReadDeadline(time.Now().Add(30 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(excess), nil)
	if err != nil {
		t.Fatalf("read the refusal: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" || !res.Close {
		t.Fatalf("refusal = %d, Retry-After %q, close %v; want 429, 1, true", res.StatusCode, res.Header.Get("Retry-After"), res.Close)
	}
	if res.Header.Get("Content-Type") != "application/json" || len(body) == 0 {
		t.Fatalf("refusal body = %q (%s)", body, res.Header.Get("Content-Type"))
	}
	// Every answer carries a request id (the API's contract).
	if id := res.Header.Get(RequestIDHeader); !strings.HasPrefix(id, "req_") || len(id) != len("req_")+24 {
		t.Fatalf("refusal %s = %q, want a request id of its own", RequestIDHeader, id)
	}
	waitClosed(t, excess)

	// Another address is let through, and the refused one took no slot.
	l.admit(t, "127.0.0.3")
	if open, clients := l.counts(); open != 3 || clients != 2 {
		t.Fatalf("counted %d connections of %d clients, want 3 of 2", open, clients)
	}
}

func TestConnLimiter_AClientPastItsShareReplacesItsLongestIdleConnection(t *testing.T) {
	t.Parallel()
	l := startLimiter(t, 4, 2, nil)
	_, other := l.admit(t, "127.0.0.3")
	firstClient, first := l.admit(t, "127.0.0.2")
	_, second := l.admit(t, "127.0.0.2")
	// Another client's connection has been idle longest; among the
	// client's own, the first.
	l.ConnState(other, http.StateIdle)
	l.ConnState(first, http.StateIdle)
	l.ConnState(second, http.StateIdle)

	l.admit(t, "127.0.0.2")
	waitClosed(t, firstClient)
	if !l.released(first) || l.released(second) || l.released(other) {
		t.Fatalf("released: first %v, second %v, other %v; want the first alone",
			l.released(first), l.released(second), l.released(other))
	}
	if open, _ := l.counts(); open != 3 {
		t.Fatalf("counted %d connections, want 3", open)
	}
}

func TestConnLimiter_AtTheCapTheLongestIdleConnectionClosesFirst(t *testing.T) {
	t.Parallel()
	l := startLimiter(t, 3, 2, nil)
	_, busy := l.admit(t, "127.0.0.2")
	idleClient, idle := l.admit(t, "127.0.0.3")
	_, idleLater := l.admit(t, "127.0.0.4")
	l.ConnState(busy, http.StateIdle)
	l.ConnState(idle, http.StateIdle)
	l.ConnState(idleLater, http.StateIdle)
	// The first goes back to work: a connection in a request is not idle.
	l.ConnState(busy, http.StateActive)

	l.admit(t, "127.0.0.5")
	waitClosed(t, idleClient)
	if !l.released(idle) || l.released(busy) || l.released(idleLater) {
		t.Fatalf("released: idle %v, busy %v, idle later %v; want the longest idle alone",
			l.released(idle), l.released(busy), l.released(idleLater))
	}
	if open, clients := l.counts(); open != 3 || clients != 3 {
		t.Fatalf("counted %d connections of %d clients, want 3 of 3", open, clients)
	}
}

// readFullRefusal reads the answer of a connection refused at the cap: a
// 429 that says why, after which the connection is closed.
func readFullRefusal(t *testing.T, refused net.Conn) {
	t.Helper()
	refused.SetReadDeadline(time.Now().Add(30 * time.Second))
	r := bufio.NewReader(refused)
	res, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("read the refusal: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), "server holds as many connections") {
		t.Fatalf("refusal = %d, Retry-After %q, %s; want 429, 1 and why", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	if n, err := r.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("after the refusal: read %d bytes, %v; want the connection closed", n, err)
	}
}

// TestConnLimiter_AtTheCapWithEveryConnectionBusyANewOneIsRefused: with
// nothing idle and nothing waiting for a task to end, a connection past
// the cap is answered 429 and closed at once, taking no slot; the accept
// loop goes on (it used to wait for room, holding every connection after
// it in the kernel's queue).
func TestConnLimiter_AtTheCapWithEveryConnectionBusyANewOneIsRefused(t *testing.T) {
	t.Parallel()
	l := startLimiter(t, 2, 2, nil)
	_, first := l.admit(t, "127.0.0.2")
	l.admit(t, "127.0.0.3")

	refused := l.dial(t, "127.0.0.4")
	readFullRefusal(t, refused)
	if open, _ := l.counts(); open != 2 {
		t.Fatalf("counted %d connections, want 2", open)
	}
	// Room made, the next is let through.
	first.Close()
	l.admit(t, "127.0.0.5")
}

// TestConnLimiter_AtTheCapTheLongestWaiterOfTheHeaviestKeyIsEvicted: with
// nothing idle, a connection past the cap ends the wait of the request
// waiting longest of the API key with the most requests waiting, and takes
// its slot at once; its wait is told (evicted closes), and it counts no
// more.
func TestConnLimiter_AtTheCapTheLongestWaiterOfTheHeaviestKeyIsEvicted(t *testing.T) {
	t.Parallel()
	l := startLimiter(t, 4, 4, nil)
	_, light := l.admit(t, "127.0.0.2")
	_, heavyOldest := l.admit(t, "127.0.0.3")
	_, heavyNewer := l.admit(t, "127.0.0.4")
	_, busy := l.admit(t, "127.0.0.5")
	lightEvicted, _ := l.waiting(light.(*limitedConn), "key_light")
	oldestEvicted, _ := l.waiting(heavyOldest.(*limitedConn), "key_heavy")
	newerEvicted, newerDone := l.waiting(heavyNewer.(*limitedConn), "key_heavy")

	l.admit(t, "127.0.0.6")
	select {
	case <-oldestEvicted:
	default:
		t.Fatal("the heaviest key's longest waiter was not evicted")
	}
	for name, evicted := range map[string]<-chan struct{}{"the lighter key's": lightEvicted, "the heaviest key's newer": newerEvicted} {
		select {
		case <-evicted:
			t.Errorf("%s waiter was evicted", name)
		default:
		}
	}
	if !l.released(heavyOldest) || l.released(heavyNewer) || l.released(light) || l.released(busy) {
		t.Fatal("released other than the evicted waiter")
	}
	// Now the keys weigh the same; a waiter that is answered stops
	// counting as one, and with none left, the cap refuses.
	newerDone()
	l.admit(t, "127.0.0.7")
	select {
	case <-lightEvicted:
	default:
		t.Fatal("the last waiter was not evicted")
	}
	readFullRefusal(t, l.dial(t, "127.0.0.8"))
	if open, _ := l.counts(); open != 4 {
		t.Fatalf("counted %d connections, want 4", open)
	}
}

func TestConnLimiter_ClosedConnectionsAreNoLongerCounted(t *testing.T) {
	t.Parallel()
	l := startLimiter(t, 4, 2, nil)
	var servers []net.Conn
	for _, from := range []string{"127.0.0.2", "127.0.0.2", "127.0.0.3"} {
		_, s := l.admit(t, from)
		servers = append(servers, s)
	}
	l.ConnState(servers[0], http.StateIdle)
	for _, s := range servers {
		s.Close()
		// The server reports the close as well; it is counted once.
		l.ConnState(s, http.StateClosed)
	}
	if open, clients := l.counts(); open != 0 || clients != 0 || l.idle.Len() != 0 {
		t.Fatalf("counted %d connections of %d clients, %d idle; want none", open, clients, l.idle.Len())
	}
	// The share is whole again.
	l.admit(t, "127.0.0.2")
	l.admit(t, "127.0.0.2")
}

func TestConnLimiter_ATrustedProxyHasNoShareOfItsOwn(t *testing.T) {
	t.Parallel()
	trusted, err := config.ParseTrustedProxies("127.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	l := startLimiter(t, 3, 1, trusted)
	for range 3 {
		l.admit(t, "127.0.0.2")
	}
	if open, clients := l.counts(); open != 3 || clients != 0 {
		t.Fatalf("counted %d connections of %d clients, want 3 of none", open, clients)
	}
}

func TestConnLimiter_clientKey(t *testing.T) {
	t.Parallel()
	trusted, err := config.ParseTrustedProxies("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	l := LimitConnections(nil, 10, 5, trusted)
	for _, tc := range []struct {
		addr, want string
		exempt     bool
	}{
		{"203.0.113.9:4000", "203.0.113.9", false},
		{"[::ffff:203.0.113.9]:4000", "203.0.113.9", false},
		// One IPv6 client is its /64, as every per-client limit counts it.
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64", false},
		{"[2001:db8:1:2:ffff::1]:443", "2001:db8:1:2::/64", false},
		{"10.1.2.3:5000", "", true},
	} {
		key, exempt := l.clientKey(&net.TCPAddr{IP: net.ParseIP(parseIP(tc.addr).String()), Port: 1})
		if key != tc.want || exempt != tc.exempt {
			t.Errorf("clientKey(%s) = %q, %v; want %q, %v", tc.addr, key, exempt, tc.want, tc.exempt)
		}
	}
}

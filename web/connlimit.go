package web

import (
	"container/list"
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter"
)

// ConnLimiter is the HTTP server's listener: it holds at most max
// connections open at once, and at most perClient of them from one client
// address, so that one client cannot take every connection and leave
// everyone else waiting unanswered.
//
//   - A connection from a client that already holds its share replaces
//     that client's connection idle in keep-alive the longest; when none
//     of them is idle, it is answered 429 with Retry-After and closed at
//     once, taking no slot.
//   - A connection that arrives when max are open closes the connection
//     idle in keep-alive the longest, whoever holds it; when none is idle,
//     it ends the wait of the oldest request waiting for a task of the API
//     key with the most waiting (see Waiters): that request is answered
//     at once with its task as it is, as if its time were up, and its
//     connection closed. When every open connection is busy with anything
//     else, the new one is answered 429 with Retry-After and closed.
//     Accept never waits for room: the accept loop is never held.
//
// An evicted waiter's connection stops counting at once and closes as soon
// as its answer is written (within the server's write timeout), so the
// process may hold a few more connections than max for that moment.
//
// The client is the connection's peer, counted as per-client rate limits
// count it (arbiter.Client.LimitKey: an IPv6 client by its /64). A peer in
// the trusted proxies has no share of its own: its connections carry many
// clients, which X-Forwarded-For names only request by request, so they
// count against max alone. The server must report its connections' states
// to ConnState, which is how the limiter knows which are idle.
type ConnLimiter struct {
	net.Listener
	max, perClient int
	trusted        []netip.Prefix

	mu     sync.Mutex
	open   int
	closed bool
	// idle holds the connections idle in keep-alive, longest idle first;
	// each client's own idle list likewise.
	idle    list.List
	clients map[string]*clientConns
	// waiters holds, by API key, the connections whose request waits for a
	// task, longest waiting first.
	waiters map[string]*list.List
	// refusing bounds the refusals being written at once; past it, a
	// connection over its share is closed without an answer.
	refusing chan struct{}
}

// clientConns is one client's connections.
type clientConns struct {
	open int
	idle list.List
}

// limitedConn is a connection the limiter counts until it closes.
type limitedConn struct {
	net.Conn
	l *ConnLimiter
	// client is nil for a trusted proxy's connection.
	client *clientConns
	key    string
	// idleAt and clientIdleAt are its elements in the idle lists while it
	// is idle; released is set once it no longer counts. While its request
	// waits for a task, waitAt is its element in the list of its key's
	// waiters (waitKey), and evict ends the wait. All are guarded by l.mu.
	idleAt, clientIdleAt *list.Element
	released             bool
	waitKey              string
	waitAt               *list.Element
	evict                chan struct{}
}

// Connection limits that are not settings.
const (
	// refuseAtOnce bounds the refusals answered at once.
	refuseAtOnce = 64
	// refuseWithin bounds how long a refusal may take: writing the answer,
	// then reading what the client sent until it hangs up, so that closing
	// does not reset the connection before the client reads the answer.
	refuseWithin = time.Second
	// refuseRetryAfter is the Retry-After of a refusal, in seconds.
	refuseRetryAfter = 1
)

// Refusals' messages: a connection past its client's share, or one that
// finds the server full and nothing to make room.
const (
	refusedPastShare = "too many connections from your address: reuse one you have open, or retry later"
	refusedFull      = "the server holds as many connections as it may, every one busy: retry later"
)

// refusal returns the whole answer written on a connection refused with
// message, with a request id of its own, as every answer has.
func refusal(message string) []byte {
	body := `{"error": "` + message + `", "code": "rate_limited"}` + "\n"
	return []byte("HTTP/1.1 429 Too Many Requests\r\n" +
		"Content-Type: application/json\r\n" +
		"Retry-After: " + strconv.Itoa(refuseRetryAfter) + "\r\n" +
		RequestIDHeader + ": " + arbiter.NewID("req_", 12) + "\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n" +
		"\r\n" + body)
}

// LimitConnections returns ln holding at most max connections open at once
// and at most perClient from one client address (a trusted proxy
// excepted); see ConnLimiter. A perClient above max is max.
func LimitConnections(ln net.Listener, max, perClient int, trusted []netip.Prefix) *ConnLimiter {
	return &ConnLimiter{
		Listener: ln, max: max, perClient: min(perClient, max), trusted: trusted,
		clients:  map[string]*clientConns{},
		waiters:  map[string]*list.List{},
		refusing: make(chan struct{}, refuseAtOnce),
	}
}

// Accept waits for a connection that may be served and returns it. A
// connection past its client's share is refused or replaces one of the
// client's idle ones, and one past the cap closes the longest-idle
// connection, evicts a waiting request or is refused; see ConnLimiter.
func (l *ConnLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit counts c in and returns it, or refuses it and returns nil. It never
// waits.
func (l *ConnLimiter) admit(c net.Conn) net.Conn {
	key, exempt := l.clientKey(c.RemoteAddr())
	l.mu.Lock()
	var idle, waiter *limitedConn
	client := l.clients[key]
	switch {
	case l.closed:
		l.mu.Unlock()
		c.Close()
		return nil
	case !exempt && client != nil && client.open >= l.perClient:
		if client.idle.Len() == 0 {
			l.mu.Unlock()
			l.refuse(c, refusedPastShare)
			return nil
		}
		idle = client.idle.Front().Value.(*limitedConn)
	case l.open >= l.max:
		switch {
		case l.idle.Len() > 0:
			idle = l.idle.Front().Value.(*limitedConn)
		case len(l.waiters) > 0:
			waiter = l.longestWaiterOfTheHeaviestKeyLocked()
		default:
			l.mu.Unlock()
			l.refuse(c, refusedFull)
			return nil
		}
	}
	if idle != nil {
		l.releaseLocked(idle)
	}
	if waiter != nil {
		// Its answer closes the connection; it no longer counts.
		close(waiter.evict)
		waiter.stopWaitingLocked()
		l.releaseLocked(waiter)
	}
	lc := &limitedConn{Conn: c, l: l, key: key}
	if !exempt {
		if client == nil {
			client = &clientConns{}
			l.clients[key] = client
		}
		client.open++
		lc.client = client
	}
	l.open++
	l.mu.Unlock()
	if idle != nil {
		idle.Conn.Close()
	}
	return lc
}

// longestWaiterOfTheHeaviestKeyLocked returns the connection waiting
// longest of the API key with the most waiting.
func (l *ConnLimiter) longestWaiterOfTheHeaviestKeyLocked() *limitedConn {
	var heaviest *list.List
	for _, waiting := range l.waiters {
		if heaviest == nil || waiting.Len() > heaviest.Len() {
			heaviest = waiting
		}
	}
	return heaviest.Front().Value.(*limitedConn)
}

// waiting counts c's request as one waiting for a task with the API key
// keyID, evictable at the cap; evicted is closed when the limiter needs
// the connection. done ends the count; call it once the request is
// answered.
func (l *ConnLimiter) waiting(c *limitedConn, keyID string) (evicted <-chan struct{}, done func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	evict := make(chan struct{})
	if c.released || l.closed {
		return evict, func() {}
	}
	waiting := l.waiters[keyID]
	if waiting == nil {
		waiting = list.New()
		l.waiters[keyID] = waiting
	}
	c.waitKey, c.evict = keyID, evict
	c.waitAt = waiting.PushBack(c)
	return evict, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if c.evict == evict {
			c.stopWaitingLocked()
		}
	}
}

// stopWaitingLocked takes c off its key's list of waiters.
func (c *limitedConn) stopWaitingLocked() {
	if c.waitAt == nil {
		return
	}
	waiting := c.l.waiters[c.waitKey]
	waiting.Remove(c.waitAt)
	if waiting.Len() == 0 {
		delete(c.l.waiters, c.waitKey)
	}
	c.waitAt, c.waitKey, c.evict = nil, "", nil
}

// clientKey returns the key of the client that addr's connection counts
// for, or exempt when addr is a trusted proxy.
func (l *ConnLimiter) clientKey(addr net.Addr) (key string, exempt bool) {
	s := addr.String()
	ip := parseIP(s)
	if !ip.IsValid() {
		return s, false
	}
	if isTrusted(ip, l.trusted) {
		return "", true
	}
	return arbiter.Client{IP: ip.String()}.LimitKey(), false
}

// refuse answers c 429 with message and closes it, in the background and
// within refuseWithin; when refuseAtOnce refusals are already under way,
// it closes c without an answer.
func (l *ConnLimiter) refuse(c net.Conn, message string) {
	select {
	case l.refusing <- struct{}{}:
	default:
		c.Close()
		return
	}
	go func() {
		defer func() { <-l.refusing }()
		defer c.Close()
		c.SetDeadline(time.Now().Add(refuseWithin))
		if _, err := c.Write(refusal(message)); err != nil {
			return
		}
		if cw, ok := c.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}

// ConnState is the http.Server's ConnState hook: it keeps the limiter's
// list of connections idle in keep-alive.
func (l *ConnLimiter) ConnState(c net.Conn, state http.ConnState) {
	// While parked (hijacked), a connection counts as open and busy. It
	// comes back from the ParkingLot wrapped, new to the server, and idle
	// until its next request.
	if rc, ok := c.(*resumedConn); ok {
		c = rc.Conn
		if state == http.StateNew {
			state = http.StateIdle
		}
	}
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateIdle:
		if lc.released || lc.idleAt != nil {
			return
		}
		lc.idleAt = l.idle.PushBack(lc)
		if lc.client != nil {
			lc.clientIdleAt = lc.client.idle.PushBack(lc)
		}
	case http.StateActive, http.StateHijacked:
		lc.notIdleLocked()
	case http.StateClosed:
		l.releaseLocked(lc)
	}
}

// Close closes the listener.
func (l *ConnLimiter) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return l.Listener.Close()
}

// limitedConnKey is the context key of a request's connection.
type limitedConnKey struct{}

// ConnContext is the http.Server's ConnContext hook: it tells the requests
// of a connection the limiter counts which one they came on, so that a
// waiting request can be evicted (see Waiters).
func (l *ConnLimiter) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if rc, ok := c.(*resumedConn); ok {
		c = rc.Conn
	}
	if lc, ok := c.(*limitedConn); ok && lc.l == l {
		return context.WithValue(ctx, limitedConnKey{}, lc)
	}
	return ctx
}

// limitedConnOf returns the connection of ctx's request, or nil when no
// ConnLimiter counts it.
func limitedConnOf(ctx context.Context) *limitedConn {
	lc, _ := ctx.Value(limitedConnKey{}).(*limitedConn)
	return lc
}

// releaseLocked stops counting c, once.
func (l *ConnLimiter) releaseLocked(c *limitedConn) {
	if c.released {
		return
	}
	c.released = true
	c.notIdleLocked()
	c.stopWaitingLocked()
	l.open--
	if c.client != nil {
		c.client.open--
		if c.client.open == 0 {
			delete(l.clients, c.key)
		}
	}
}

// notIdleLocked takes c off the idle lists.
func (c *limitedConn) notIdleLocked() {
	if c.idleAt != nil {
		c.l.idle.Remove(c.idleAt)
		c.idleAt = nil
	}
	if c.clientIdleAt != nil {
		c.client.idle.Remove(c.clientIdleAt)
		c.clientIdleAt = nil
	}
}

// Close closes the connection and frees its slot.
func (c *limitedConn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// CloseWrite shuts down the writing side when the connection can, so the
// server's last answer on a connection it closes reaches the client
// before a reset.
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

package web_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/config"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/web"
)

// attackAddresses and waitsPerAddress are the attack on the parked
// waiters as it was tried: every one of the server's default connections
// (16 × 256 = 4,096) waiting for a task, from as many loopback addresses as
// it takes to pass the per-address share.
const (
	attackAddresses = 16
	waitsPerAddress = config.DefaultMaxConnectionsPerIP
)

// attackFrom is the i-th attacking address: 127.0.0.2 to 127.0.0.17.
func attackFrom(i int) string { return fmt.Sprintf("127.0.0.%d", 2+i) }

// TestWaiters_TheAttackLocksNoOneOut replays the attack on the parked
// waiters with the server's default limits (4,096 connections, 256 an
// address, 256 waiters a key and 1,024 an account), and checks after each
// round that another account's create is answered, from an address of its
// own:
//
//   - one key waits on every connection, 16 addresses × 256: past its 256
//     waiters it is answered 429 (Retry-After) and its connections stay
//     open, idle; then it closes half its sockets, parked ones among them,
//     and their slots are free at once (parked ones were held until their
//     wait ended);
//   - sixteen keys of four accounts wait on every connection, each within
//     its bounds, asking again whenever a wait ends, so that every
//     connection holds a waiting request and none is idle: the create's
//     connection ends a wait to be served (the wait evicted is answered
//     with its task as it is and its connection closed:
//     TestTaskGet_EvictedWaiterIsAnsweredAsTimedOut).
//
// Before the fix every slot was held by a parked waiter and the create's
// connection waited in the accept queue until the waits ended, or its
// client gave up (30 s). Not parallel: it holds 8,192 descriptors.
func TestWaiters_TheAttackLocksNoOneOut(t *testing.T) {
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		addr, lot, limiter := limitedServer(t, a, config.DefaultMaxConnections, config.DefaultMaxConnectionsPerIP,
			arbiter.NewWaiterCounts(arbiter.DefaultMaxWaitersPerKey, arbiter.DefaultMaxWaitersPerAccount), nil)
		victim := a.newKey("victim@example.com")
		createAnswers := func(t *testing.T, round string) {
			t.Helper()
			c := dialRawFrom(t, addr, attackFrom(attackAddresses))
			body := `{"prompt":"Still served?","allowed_verdicts":["approve","reject"]}`
			start := time.Now()
			c.send("POST /v1/tasks HTTP/1.1\r\nHost: example.com\r\nAuthorization: Bearer " + victim +
				"\r\nContent-Type: application/json\r\nContent-Length: " + fmt.Sprint(len(body)) + "\r\n\r\n" + body)
			c.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(c.r, nil)
			if err != nil {
				t.Fatalf("%s: another account's create was not answered: %v", round, err)
			}
			answer, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("%s: another account's create answered %d %s", round, res.StatusCode, answer)
			}
			t.Logf("%s: another account's create answered in %s", round, time.Since(start).Round(time.Millisecond))
			c.conn.Close()
		}

		t.Run("OneKey", func(t *testing.T) {
			key := a.newKey("attacker@example.com")
			path := "/v1/tasks/" + createTask(t, a, key, goodTask)["id"].(string) + "?wait=60"
			conns := attack(t, addr, func(int) string { return getRequest(path, key) })
			// Every request answered (refused, or a wait whose time is
			// up) or waiting.
			waitForCounts(t, limiter, "every connection open, idle or waiting", func(open, idle, waiting int) bool {
				return open == len(conns) && idle+waiting == len(conns)
			})
			if _, _, waiting := limiter.Counts(); waiting > arbiter.DefaultMaxWaitersPerKey || lot.Parked() > arbiter.DefaultMaxWaitersPerKey {
				t.Fatalf("%d waits and %d parked of one key, want at most %d", waiting, lot.Parked(), arbiter.DefaultMaxWaitersPerKey)
			}
			parked := map[*rawConn]bool{}
			refused := 0
			for _, c := range conns {
				if !answered(t, c) {
					parked[c] = true
					continue
				}
				res, body, _ := c.readAnswer(path, false)
				switch {
				case res.StatusCode == http.StatusTooManyRequests && res.Header.Get("Retry-After") != "" && strings.Contains(string(body), "this API key"):
					refused++
				case res.StatusCode == http.StatusOK && taskStatusOf(t, body) == "pending":
					// A wait whose 60 seconds passed on a slow machine.
				default:
					t.Fatalf("a wait of the key: %d %s", res.StatusCode, body)
				}
			}
			if refused < len(conns)-arbiter.DefaultMaxWaitersPerKey {
				t.Fatalf("%d waits refused, want all but the key's %d", refused, arbiter.DefaultMaxWaitersPerKey)
			}
			createAnswers(t, "one key, sockets kept")

			// Half the sockets closed, every other one, parked or not.
			closed, closedParked := 0, 0
			for i, c := range conns {
				if i%2 == 0 {
					c.conn.Close()
					closed++
					if parked[c] {
						closedParked++
					}
				}
			}
			waitForCounts(t, limiter, "the closed connections' slots free", func(open, _, waiting int) bool {
				// The create's connection closed one idle in their place.
				return open <= len(conns)-closed && waiting <= len(parked)-closedParked
			})
			createAnswers(t, "one key, half the sockets closed")
			for _, c := range conns {
				c.conn.Close()
			}
			waitForParked(t, lot, 0)
		})

		t.Run("SixteenKeysOfFourAccounts", func(t *testing.T) {
			keys := make([]string, 16)
			paths := make([]string, len(keys))
			for i := range keys {
				keys[i] = a.newKey(fmt.Sprintf("attacker%d@example.com", i%4))
				paths[i] = "/v1/tasks/" + createTask(t, a, keys[i], goodTask)["id"].(string) + "?wait=60"
			}
			waitForCounts(t, limiter, "none", func(open, idle, waiting int) bool { return open+idle+waiting == 0 })
			wait := func(i int) string { return getRequest(paths[i%len(keys)], keys[i%len(keys)]) }
			conns := attack(t, addr, wait)
			// Every connection waiting: a wait whose time is up is asked
			// again, as the attacker's long-poll loop asks.
			for deadline := time.Now().Add(5 * time.Minute); ; {
				if open, idle, waiting := limiter.Counts(); open == len(conns) && idle == 0 && waiting == len(conns) {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("the limiter counts %d open, %d idle, %d waiting; want every connection waiting", open, idle, waiting)
				}
				for i, c := range conns {
					if answered(t, c) {
						if res, body, _ := c.readAnswer(paths[i%len(keys)], false); res.StatusCode != http.StatusOK {
							t.Fatalf("a wait within its key's bound: %d %s", res.StatusCode, body)
						}
						c.send(wait(i))
					}
				}
				time.Sleep(time.Millisecond)
			}
			createAnswers(t, "every connection a waiting request")
			for _, c := range conns {
				c.conn.Close()
			}
			waitForParked(t, lot, 0)
		})
	})
}

// attack opens the attack's connections to addr, waitsPerAddress from each
// of attackAddresses addresses, each sending request(i), and returns them.
// The addresses dial at once.
func attack(t *testing.T, addr string, request func(i int) string) []*rawConn {
	t.Helper()
	conns := make([]*rawConn, attackAddresses*waitsPerAddress)
	errs := make([]error, attackAddresses)
	var wg sync.WaitGroup
	for a := range attackAddresses {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(attackFrom(a))}}
			for i := a * waitsPerAddress; i < (a+1)*waitsPerAddress; i++ {
				conn, err := d.Dial("tcp", addr)
				if err != nil {
					errs[a] = err
					return
				}
				c := &rawConn{t: t, conn: conn}
				c.r = bufio.NewReader(io.TeeReader(conn, &c.raw))
				conns[i] = c
				if _, err := conn.Write([]byte(request(i))); err != nil {
					errs[a] = err
					return
				}
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.conn.Close()
			}
		}
	})
	for _, err := range errs {
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			t.Skipf("cannot dial from the attack's addresses here: %v", err)
		} else if err != nil {
			t.Fatal(err)
		}
	}
	return conns
}

// answered reports whether an answer has come on c, without waiting for
// one: the server has written it, or not.
func answered(t *testing.T, c *rawConn) bool {
	t.Helper()
	if c.r.Buffered() > 0 {
		return true
	}
	raw, err := c.conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var recvErr error
	if err := raw.Read(func(fd uintptr) bool {
		n, _, recvErr = syscall.Recvfrom(int(fd), make([]byte, 1), syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if recvErr != nil && !errors.Is(recvErr, syscall.EAGAIN) {
		t.Fatal(recvErr)
	}
	return n > 0
}

// waitForCounts waits until the limiter's counts of open connections,
// idle ones and waiting ones are what want says.
func waitForCounts(t *testing.T, l *web.ConnLimiter, what string, want func(open, idle, waiting int) bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(time.Millisecond) {
		open, idle, waiting := l.Counts()
		if want(open, idle, waiting) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the limiter counts %d open, %d idle, %d waiting; want %s", open, idle, waiting, what)
		}
	}
}

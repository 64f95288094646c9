package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/internal/limits"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/web"
)

// limitedServer serves the API as arbiter serve does: behind a
// ConnLimiter of max connections and perClient per address, which tells
// requests their connection, with waiting requests parked, bounded by
// waiters. It returns the server's address, its parking lot and the
// limiter.
func limitedServer(t *testing.T, a *api, max, perClient int, waiters arbiter.WaiterLimiter, logger *slog.Logger) (string, *web.ParkingLot, *web.ConnLimiter) {
	t.Helper()
	var limiter *web.ConnLimiter
	srv, lot := serveRouter(t, a.store, a.keys, serverOptions{park: true, waiters: waiters, logger: logger,
		listen: func(ln net.Listener) net.Listener {
			limiter = web.LimitConnections(ln, max, perClient, nil)
			return limiter
		},
		connState:   func(c net.Conn, s http.ConnState) { limiter.ConnState(c, s) },
		connContext: func(c context.Context, conn net.Conn) context.Context { return limiter.ConnContext(c, conn) }})
	return srv.Listener.Addr().String(), lot, limiter
}

// dialRawFrom is dialRaw from the loopback address from (127.0.0.x).
func dialRawFrom(t *testing.T, addr, from string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.Dial("tcp", addr)
	if errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Skipf("cannot dial from %s here: %v", from, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &rawConn{t: t, conn: conn}
	c.r = bufio.NewReader(io.TeeReader(conn, &c.raw))
	return c
}

// newKeyWithID creates an account (if absent) and a key for it, and
// returns the key's id and plaintext.
func newKeyWithID(t *testing.T, a *api, email string) (id, plaintext string) {
	t.Helper()
	return newStoreKey(t, a.store, email)
}

// taskStatusOf decodes an answer's task and returns its status.
func taskStatusOf(t *testing.T, body []byte) string {
	t.Helper()
	var task struct{ Status string }
	if err := json.Unmarshal(body, &task); err != nil {
		t.Fatalf("not a task: %s", body)
	}
	return task.Status
}

// TestTaskGet_WaitersPerKeyAndPerAccount waits with two keys of one
// account and a key of another, under bounds of two waiters a key and
// three an account: a wait past either bound is answered 429 with
// Retry-After at once, a read of a final task is never held back, another
// account waits, and a caller who closes a waiting connection gives its
// place back at once. The bounds are the store's limits.Waiters: the
// process's counts on SQLite, Postgres's slots on Postgres.
func TestTaskGet_WaitersPerKeyAndPerAccount(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		addr, lot, _ := limitedServer(t, a, 100, 100, limits.Waiters(a.store.Limits(), 2, 3), nil)
		_, first := newKeyWithID(t, a, "a@example.com")
		_, second := newKeyWithID(t, a, "a@example.com")
		_, other := newKeyWithID(t, a, "b@example.com")
		pending := "/v1/tasks/" + createTask(t, a, first, goodTask)["id"].(string) + "?wait=60"
		otherPending := "/v1/tasks/" + createTask(t, a, other, goodTask)["id"].(string) + "?wait=60"

		wait := func(key, path string) *rawConn {
			t.Helper()
			c := dialRaw(t, addr)
			c.send(getRequest(path, key))
			return c
		}
		refused := func(key, path, says string) {
			t.Helper()
			c := wait(key, path)
			res, body, _ := c.read(path)
			if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), says) {
				t.Fatalf("a wait past the bound: %d, Retry-After %q, %s; want 429, 1, %q", res.StatusCode, res.Header.Get("Retry-After"), body, says)
			}
		}
		firstWaiter := wait(first, pending)
		wait(first, pending)
		waitForParked(t, lot, 2)
		refused(first, pending, "this API key")
		wait(second, pending)
		waitForParked(t, lot, 3)
		refused(second, pending, "this account")
		// A read that does not wait is not held back.
		if status, _, body := a.do("GET", strings.TrimSuffix(pending, "?wait=60"), first, ""); status != http.StatusOK {
			t.Fatalf("a plain read at the bound: %d %s", status, body)
		}
		wait(other, otherPending)
		waitForParked(t, lot, 4)

		firstWaiter.conn.Close()
		waitForParked(t, lot, 3)
		wait(first, pending)
		waitForParked(t, lot, 4)
	})
}

// TestTaskGet_EvictedWaiterIsAnsweredAsTimedOut fills a server of three
// connections with waiting requests, two of one key (one parked, one
// asking Connection: close, which is not parked) and one of another: a
// fourth caller's connection ends the longest wait of the key with the
// most, which is answered at once with its task as it is and its
// connection closed, and the fourth caller is served.
func TestTaskGet_EvictedWaiterIsAnsweredAsTimedOut(t *testing.T) {
	t.Parallel()
	for _, closing := range []bool{false, true} {
		t.Run(map[bool]string{false: "Parked", true: "ConnectionClose"}[closing], func(t *testing.T) {
			eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
				addr, _, limiter := limitedServer(t, a, 3, 3, nil, nil)
				heavy := a.newKey("heavy@example.com")
				light := a.newKey("light@example.com")
				path := "/v1/tasks/" + createTask(t, a, heavy, goodTask)["id"].(string) + "?wait=60"
				lightPath := "/v1/tasks/" + createTask(t, a, light, goodTask)["id"].(string) + "?wait=60"

				request := getRequest(path, heavy)
				if closing {
					request = strings.Replace(request, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
				}
				oldest := dialRawFrom(t, addr, "127.0.0.2")
				oldest.send(request)
				waitForWaiters(t, limiter, 1)
				dialRawFrom(t, addr, "127.0.0.3").send(getRequest(lightPath, light))
				newer := dialRawFrom(t, addr, "127.0.0.4")
				newer.send(getRequest(path, heavy))
				waitForWaiters(t, limiter, 3)

				fourth := dialRawFrom(t, addr, "127.0.0.5")
				fourth.send(getRequest("/v1/tasks", light))
				res, body, _ := oldest.read(path)
				if res.StatusCode != http.StatusOK || taskStatusOf(t, body) != "pending" || !res.Close {
					t.Fatalf("evicted (Connection: close %v): %d close %v %s; want its pending task, closing", closing, res.StatusCode, res.Close, body)
				}
				if n, err := oldest.r.Read(make([]byte, 1)); err != io.EOF {
					t.Fatalf("after the evicted answer: read %d, %v; want EOF", n, err)
				}
				if res, body, _ := fourth.read("/v1/tasks"); res.StatusCode != http.StatusOK {
					t.Fatalf("the fourth caller: %d %s", res.StatusCode, body)
				}
				newer.conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				if n, err := newer.r.Read(make([]byte, 1)); n != 0 || !isTimeout(err) {
					t.Fatalf("the newer waiter of the key was answered too: %d, %v", n, err)
				}
			})
		})
	}
}

// waitForWaiters waits until n requests wait on the limiter's
// connections.
func waitForWaiters(t *testing.T, l *web.ConnLimiter, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, _, waiting := l.Counts(); waiting == n {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%d requests wait, want %d", waiting, n)
		}
	}
}

// isTimeout reports whether err is a read's deadline passing.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestTaskGet_WaitWithARevokedKeyAnswers401 revokes the key of a waiting
// request, parked or not (Connection: close), and decides its task: the
// request is answered 401, not with the task, once the revocation has
// reached the key checker (KeyCacheTTL).
func TestTaskGet_WaitWithARevokedKeyAnswers401(t *testing.T) {
	t.Parallel()
	for _, closing := range []bool{false, true} {
		t.Run(map[bool]string{false: "Parked", true: "ConnectionClose"}[closing], func(t *testing.T) {
			eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
				var clock atomic.Int64
				clock.Store(time.Now().UnixNano())
				keys := web.NewKeyChecker(a.store, func() time.Time { return time.Unix(0, clock.Load()) })
				counts := arbiter.NewWaiterCounts(10, 10)
				srv, lot := serveRouter(t, a.store, keys, serverOptions{park: true, waiters: counts})
				account, _ := a.store.FindOrCreateAccountByEmail(ctx, "a@example.com")
				other := decider(t, a)
				keyID, key := newKeyWithID(t, a, "a@example.com")
				id := createTask(t, a, key, goodTask)["id"].(string)
				sendToHuman(t, other)
				path := "/v1/tasks/" + id + "?wait=60"
				request := getRequest(path, key)
				if closing {
					request = strings.Replace(request, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1)
				}
				c := dialRaw(t, srv.Listener.Addr().String())
				c.send(request)
				// It waits once its first read found the task not final.
				for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
					if n, _ := counts.Waiting(account.ID, keyID); n == 1 {
						break
					} else if time.Now().After(deadline) {
						t.Fatal("the request does not wait")
					}
				}
				if _, err := a.store.RevokeAPIKey(ctx, account.ID, keyID, arbiter.Actor{Email: "a@example.com"}); err != nil {
					t.Fatal(err)
				}
				clock.Add(int64(2 * web.KeyCacheTTL))
				if _, err := other.DecideTask(ctx, account.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
					t.Fatal(err)
				}
				res, body, _ := c.read(path)
				if res.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), id) || res.Header.Get("WWW-Authenticate") == "" {
					t.Fatalf("a revoked key's wait (Connection: close %v): %d %v %s; want 401 without the task", closing, res.StatusCode, res.Header, body)
				}
				waitForParked(t, lot, 0)
			})
		})
	}
}

// TestTaskGet_ParkedCallerPipeliningIsServed sends a request on a parked
// connection while it waits: it is kept, and answered after the wait's
// answer.
func TestTaskGet_ParkedCallerPipeliningIsServed(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		account, _ := a.store.FindAccountByEmail(ctx, "a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		other := decider(t, a)
		sendToHuman(t, other)
		c := dialRaw(t, a.srv.Listener.Addr().String())
		waiting, plain := "/v1/tasks/"+id+"?wait=60", "/v1/tasks/"+id
		c.send(getRequest(waiting, key))
		waitForParked(t, a.lot, 1)
		c.send(getRequest(plain, key))
		if _, err := other.DecideTask(ctx, account.ID, id, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
		for _, path := range []string{waiting, plain} {
			res, body, _ := c.read(path)
			if res.StatusCode != http.StatusOK || taskStatusOf(t, body) != "completed" {
				t.Fatalf("%s: %d %s", path, res.StatusCode, body)
			}
		}
	})
}

// TestTaskGet_ParkedCallerWhoLeftIsLogged499: a caller who closes its
// waiting connection is logged at once, as 499 (nothing answered), at
// INFO.
func TestTaskGet_ParkedCallerWhoLeftIsLogged499(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		var log testutil.SyncBuffer
		srv, lot := serveRouter(t, a.store, a.keys, serverOptions{park: true, logger: slog.New(slog.NewTextHandler(&log, nil))})
		key := a.newKey("a@example.com")
		path := "/v1/tasks/" + createTask(t, a, key, goodTask)["id"].(string) + "?wait=60"
		c := dialRaw(t, srv.Listener.Addr().String())
		c.send(getRequest(path, key))
		waitForParked(t, lot, 1)
		c.conn.Close()
		waitForParked(t, lot, 0)
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(log.String(), "status=499"); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no request line with status 499:\n%s", log.String())
			}
		}
		if !strings.Contains(log.String(), "level=INFO msg=request") {
			t.Errorf("the caller who left is not logged at INFO:\n%s", log.String())
		}
	})
}

package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/openapi/openapitest"
	"github.com/arbiterhq/arbiter/web"
)

// rawConn is a client connection that sends requests as bytes and keeps
// each answer's bytes.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	raw  bytes.Buffer
	r    *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &rawConn{t: t, conn: conn}
	c.r = bufio.NewReader(io.TeeReader(conn, &c.raw))
	return c
}

// getRequest is the bytes of a GET of path with key.
func getRequest(path, key string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: example.com\r\nAuthorization: Bearer " + key + "\r\n\r\n"
}

// send writes requests, all at once.
func (c *rawConn) send(requests ...string) {
	c.t.Helper()
	if _, err := c.conn.Write([]byte(strings.Join(requests, ""))); err != nil {
		c.t.Fatal(err)
	}
}

// read reads the next answer, for a GET of path, validated against the
// OpenAPI document, and returns it with its bytes.
func (c *rawConn) read(path string) (*http.Response, []byte, []byte) {
	c.t.Helper()
	return c.readAnswer(path, true)
}

// readAnswer is read, validating the answer against the OpenAPI document
// when validate is set.
func (c *rawConn) readAnswer(path string, validate bool) (*http.Response, []byte, []byte) {
	c.t.Helper()
	_ = c.conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	req, _ := http.NewRequest("GET", "http://example.com"+path, nil)
	res, err := http.ReadResponse(c.r, req)
	if err != nil {
		c.t.Fatalf("reading the answer to %s: %v", path, err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if validate {
		openapitest.ValidateResponse(c.t, req, res.StatusCode, res.Header, body)
	}
	// The bufio.Reader reads no further than the answer: nothing follows
	// it until the next request.
	raw := bytes.Clone(c.raw.Bytes()[:c.raw.Len()-c.r.Buffered()])
	c.raw.Next(len(raw))
	return res, body, raw
}

// waitForParked waits until lot holds n parked requests.
func waitForParked(t *testing.T, lot *web.ParkingLot, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for lot.Parked() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests parked, want %d", lot.Parked(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// varying are the parts of an answer that differ from one answer to the
// next: its date and its request id.
var varying = regexp.MustCompile(`(?m)^(Date|X-Request-Id): .*\r$`)

// TestTaskGet_ParkedAnswerIsTodaysAnswer waits on a server that parks
// waiting requests and on one that does not, for a small task (answered
// with Content-Length) and a large one (chunked): the answers' bytes are
// the same but for their date and request id, and the parked request is
// logged with its status and size once answered.
func TestTaskGet_ParkedAnswerIsTodaysAnswer(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		var log testutil.SyncBuffer
		parked, lot := serveRouter(t, a.store, a.keys, serverOptions{park: true,
			logger: slog.New(slog.NewJSONHandler(&log, nil))})
		unparked, _ := serveRouter(t, a.store, a.keys, serverOptions{})
		large := `{"prompt":"` + strings.Repeat("Approve this refund? ", 200) + `","allowed_verdicts":["approve","reject"]}`
		for _, body := range []string{goodTask, large} {
			id := createTask(t, a, key, body)["id"].(string)
			path := "/v1/tasks/" + id + "?wait=1"

			today := dialRaw(t, unparked.Listener.Addr().String())
			today.send(getRequest(path, key))
			_, wantBody, want := today.read(path)

			c := dialRaw(t, parked.Listener.Addr().String())
			c.send(getRequest(path, key))
			waitForParked(t, lot, 1)
			res, gotBody, got := c.read(path)
			if res.StatusCode != http.StatusOK || !bytes.Equal(gotBody, wantBody) {
				t.Fatalf("parked: %d %s, want %s", res.StatusCode, gotBody, wantBody)
			}
			if g, w := varying.ReplaceAll(got, nil), varying.ReplaceAll(want, nil); !bytes.Equal(g, w) {
				t.Errorf("parked answer:\n%s\nwant (as today):\n%s", g, w)
			}
			chunked := len(res.TransferEncoding) > 0
			if chunked != (len(gotBody) > 2048) {
				t.Errorf("a body of %d bytes answered chunked=%v", len(gotBody), chunked)
			}
			line := fmt.Sprintf(`"request_id":%q,"method":"GET","path":"/v1/tasks/%s","status":200,"bytes":%d,`,
				res.Header.Get(web.RequestIDHeader), id, len(gotBody))
			deadline := time.Now().Add(30 * time.Second)
			for !strings.Contains(log.String(), line) {
				if time.Now().After(deadline) {
					t.Fatalf("no request line %s in the log:\n%s", line, log.String())
				}
				time.Sleep(time.Millisecond)
			}
		}
	})
}

// TestTaskGet_ParkedConnectionKeepsAlive sends a waiting request and,
// pipelined behind it in the same write, a plain read; after the parked
// answer, the server answers the pipelined request and a third one on the
// same connection.
func TestTaskGet_ParkedConnectionKeepsAlive(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		c := dialRaw(t, a.srv.Listener.Addr().String())
		waiting, plain := "/v1/tasks/"+id+"?wait=1", "/v1/tasks/"+id
		c.send(getRequest(waiting, key), getRequest(plain, key))
		waitForParked(t, a.lot, 1)
		for i, path := range []string{waiting, plain, plain, waiting} {
			if i >= 2 {
				c.send(getRequest(path, key))
			}
			res, body, _ := c.read(path)
			var task map[string]any
			if res.StatusCode != http.StatusOK || json.Unmarshal(body, &task) != nil || task["id"] != id {
				t.Fatalf("request %d (%s) on the connection: %d %s", i+1, path, res.StatusCode, body)
			}
		}
		// A request leaves the lot once its answer is written, which its
		// caller may read before the write returns.
		waitForParked(t, a.lot, 0)
	})
}

// TestTaskGet_ParkedWokenByADecision parks a waiting request and decides
// its task: the request is answered with the decided task at once.
func TestTaskGet_ParkedWokenByADecision(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		account, _ := a.store.FindAccountByEmail(ctx, "a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		other := decider(t, a)
		sendToHuman(t, other)
		c := dialRaw(t, a.srv.Listener.Addr().String())
		path := "/v1/tasks/" + id + "?wait=60"
		c.send(getRequest(path, key))
		waitForParked(t, a.lot, 1)
		if _, err := other.DecideTask(ctx, account.ID, id, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
		res, body, _ := c.read(path)
		var task map[string]any
		if res.StatusCode != http.StatusOK || json.Unmarshal(body, &task) != nil || task["status"] != "completed" {
			t.Fatalf("woken: %d %s", res.StatusCode, body)
		}
		waitForWatchers(t, a.store, 0)
	})
}

// TestTaskGet_ParkedAnsweredAtShutdown shuts the server down while a
// request is parked: it is answered at once with the task as it is, as
// net/http answers the waiters it serves while it shuts down (Connection:
// close), and its connection is closed.
func TestTaskGet_ParkedAnsweredAtShutdown(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		c := dialRaw(t, a.srv.Listener.Addr().String())
		path := "/v1/tasks/" + id + "?wait=60"
		c.send(getRequest(path, key))
		waitForParked(t, a.lot, 1)
		start := time.Now()
		shutdownCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := a.srv.Config.Shutdown(shutdownCtx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		a.lot.Wait(shutdownCtx)
		res, body, _ := c.read(path)
		var task map[string]any
		if res.StatusCode != http.StatusOK || json.Unmarshal(body, &task) != nil || task["status"] != "pending" || !res.Close {
			t.Fatalf("at shutdown: %d %v %s", res.StatusCode, res.Header, body)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("answered %s after shutdown began", d)
		}
		if n, err := c.r.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("after the answer at shutdown: read %d, %v; want EOF", n, err)
		}
	})
}

// TestTaskGet_ParkedCallerWhoLeft closes the connection of a parked
// request waiting a minute: its record, and its watch, are freed at once
// (the parked connection is read, and its end noticed), not when its wait
// ends.
func TestTaskGet_ParkedCallerWhoLeft(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		c := dialRaw(t, a.srv.Listener.Addr().String())
		c.send(getRequest("/v1/tasks/"+id+"?wait=60", key))
		waitForParked(t, a.lot, 1)
		c.conn.Close()
		waitForParked(t, a.lot, 0)
		waitForWatchers(t, a.store, 0)
		// The server goes on serving.
		if status, _, b := a.do("GET", "/v1/tasks/"+id, key, ""); status != http.StatusOK {
			t.Fatalf("after a caller left: %d %s", status, b)
		}
	})
}

// TestTaskGet_ParkedConnectionsCount serves behind a ConnLimiter of two
// connections per client: a client whose two connections are parked is
// refused a third (429); once their answers leave them idle, a third
// replaces one of them.
func TestTaskGet_ParkedConnectionsCount(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		var limiter *web.ConnLimiter
		srv, lot := serveRouter(t, a.store, a.keys, serverOptions{park: true,
			listen: func(ln net.Listener) net.Listener {
				limiter = web.LimitConnections(ln, 100, 2, nil)
				return limiter
			},
			connState: func(c net.Conn, s http.ConnState) { limiter.ConnState(c, s) }})
		addr := srv.Listener.Addr().String()
		path := "/v1/tasks/" + id + "?wait=2"
		var parked []*rawConn
		for range 2 {
			c := dialRaw(t, addr)
			c.send(getRequest(path, key))
			parked = append(parked, c)
		}
		waitForParked(t, lot, 2)
		third := dialRaw(t, addr)
		third.send(getRequest("/v1/tasks/"+id, key))
		if res, body, _ := third.read("/v1/tasks/" + id); res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("a third connection while two are parked: %d %s", res.StatusCode, body)
		}
		for _, c := range parked {
			if res, body, _ := c.read(path); res.StatusCode != http.StatusOK {
				t.Fatalf("parked: %d %s", res.StatusCode, body)
			}
		}
		// Handed back, idle: a third connection takes one's place.
		deadline := time.Now().Add(30 * time.Second)
		for {
			c := dialRaw(t, addr)
			c.send(getRequest("/v1/tasks/"+id, key))
			res, body, _ := c.readAnswer("/v1/tasks/"+id, false)
			if res.StatusCode == http.StatusOK {
				break
			}
			// The answered connections may not be idle yet.
			if res.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
				t.Fatalf("a third connection once the two were answered: %d %s", res.StatusCode, body)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// smallSendBuffers is a listener whose connections have a send buffer of
// 4 KB, without the kernel's growing it: a caller who reads nothing soon
// keeps a large answer's writing waiting.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestTaskGet_ParkedSlowReadersKeepNoOneWaiting parks more callers than
// the lot answers at once, each waiting on a task of ~45 KB (the longest
// prompt and verdicts) and reading nothing of its answer (small buffers
// on both sides, so that the answer's writing waits): another caller's
// wait still ends with its answer, as a parked answer is written after
// its answering slot is given back.
func TestTaskGet_ParkedSlowReadersKeepNoOneWaiting(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		srv, lot := serveRouter(t, a.store, a.keys, serverOptions{park: true,
			listen: func(ln net.Listener) net.Listener { return smallSendBuffers{ln} }})
		lot.SetAnswerTime(time.Hour) // a slow reader's answer is not cut short
		addr := srv.Listener.Addr().String()
		verdicts := make([]string, 64)
		for i := range verdicts {
			verdicts[i] = fmt.Sprintf("%q", fmt.Sprintf("%03d", i)+strings.Repeat("v", 190))
		}
		big := `{"prompt":"` + strings.Repeat("Refund? ", 4000) + `","allowed_verdicts":[` + strings.Join(verdicts, ",") + `]}`
		dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			var err error
			if cerr := c.Control(func(fd uintptr) {
				err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
			}); cerr != nil {
				return cerr
			}
			return err
		}}
		const slow = 40 // more than the lot's answering slots (32)
		for range slow {
			id := createTask(t, a, key, big)["id"].(string)
			conn, err := dialer.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			if _, err := conn.Write([]byte(getRequest("/v1/tasks/"+id+"?wait=1", key))); err != nil {
				t.Fatal(err)
			}
		}
		waitForParked(t, lot, slow)
		id := createTask(t, a, key, goodTask)["id"].(string)
		c := dialRaw(t, addr)
		path := "/v1/tasks/" + id + "?wait=2"
		c.send(getRequest(path, key))
		if res, body, _ := c.read(path); res.StatusCode != http.StatusOK || !strings.Contains(string(body), id) {
			t.Fatalf("behind %d slow readers: %d %s", slow, res.StatusCode, body)
		}
		// The slow readers' answers are still being written.
		if n := lot.Parked(); n == 0 {
			t.Errorf("no slow reader's answer is still being written: the test did not hold the writes")
		}
	})
}

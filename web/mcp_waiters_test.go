package web_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/web"
)

// mcpWaitRequest is the bytes of a POST /v1/mcp with key calling get_task
// on the task id, waiting up to 60 seconds for its verdict.
func mcpWaitRequest(id, key string) string {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_task","arguments":{"task_id":%q,"wait_seconds":60}}}`, id)
	return "POST /v1/mcp HTTP/1.1\r\nHost: example.com\r\nAuthorization: Bearer " + key +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
}

// toolAnswer is a tools/call answer's result: whether the tool failed, its
// text, and its structured task.
type toolAnswer struct {
	IsError bool `json:"isError"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	Task struct {
		Status  string  `json:"status"`
		Verdict *string `json:"verdict"`
	} `json:"structuredContent"`
}

// readToolAnswer reads the answer to an MCP call on c: a 200 with a
// JSON-RPC result.
func readToolAnswer(t *testing.T, c *rawConn) (*http.Response, toolAnswer) {
	t.Helper()
	res, body, _ := c.readAnswer("/v1/mcp", false)
	var rpc struct {
		Result *toolAnswer `json:"result"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &rpc) != nil || rpc.Result == nil {
		t.Fatalf("an MCP call answered %d %s; want 200 with a result", res.StatusCode, body)
	}
	return res, *rpc.Result
}

// waitForWaiting waits until counts holds keyWaits waits of the key and
// accountWaits of the account.
func waitForWaiting(t *testing.T, counts *arbiter.WaiterCounts, accountID, keyID string, keyWaits, accountWaits int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		key, account := counts.Waiting(accountID, keyID)
		if key == keyWaits && account == accountWaits {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("%d waits of the key and %d of the account; want %d and %d", key, account, keyWaits, accountWaits)
		}
	}
}

// TestMCP_WaitsCountWithTheAPIsWaiters waits for a task through MCP's
// get_task as GET /v1/tasks/{id}?wait=N does, under bounds of two waits a
// key and three an account: both ways count together, an MCP wait past
// either bound fails at once with the API's sentence and when to try
// again, and a caller who leaves gives its place back.
func TestMCP_WaitsCountWithTheAPIsWaiters(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		counts := arbiter.NewWaiterCounts(2, 3)
		addr, lot, _ := limitedServer(t, a, 100, 100, counts, nil)
		firstID, first := newKeyWithID(t, a, "a@example.com")
		secondID, second := newKeyWithID(t, a, "a@example.com")
		account, _ := a.store.FindAccountByEmail(ctx, "a@example.com")
		id := createTask(t, a, first, goodTask)["id"].(string)

		c := dialRaw(t, addr)
		c.send(getRequest("/v1/tasks/"+id+"?wait=60", first))
		waitForParked(t, lot, 1)
		mcpWaiter := dialRaw(t, addr)
		mcpWaiter.send(mcpWaitRequest(id, first))
		waitForWaiting(t, counts, account.ID, firstID, 2, 2)

		refused := func(key, says string) {
			t.Helper()
			c := dialRaw(t, addr)
			c.send(mcpWaitRequest(id, key))
			_, answer := readToolAnswer(t, c)
			if !answer.IsError || len(answer.Content) == 0 || !strings.Contains(answer.Content[0].Text, says) ||
				!strings.Contains(answer.Content[0].Text, "Try again in 1 second") {
				t.Fatalf("an MCP wait past the bound answered %+v; want an error naming %q and when to try again", answer, says)
			}
		}
		refused(first, "this API key")
		dialRaw(t, addr).send(mcpWaitRequest(id, second))
		waitForWaiting(t, counts, account.ID, secondID, 1, 3)
		refused(second, "this account")

		// The MCP caller who leaves gives its place back.
		mcpWaiter.conn.Close()
		waitForWaiting(t, counts, account.ID, firstID, 1, 2)
	})
}

// TestMCP_EvictedWaitIsAnsweredAsTimedOut fills a server of three
// connections with waits, the oldest an MCP get_task of the key with the
// most: a fourth caller's connection ends that wait, which answers the
// task as it is (not decided yet, no error) and closes its connection,
// and the fourth caller is served.
func TestMCP_EvictedWaitIsAnsweredAsTimedOut(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		addr, _, limiter := limitedServer(t, a, 3, 3, nil, nil)
		heavy := a.newKey("heavy@example.com")
		light := a.newKey("light@example.com")
		id := createTask(t, a, heavy, goodTask)["id"].(string)
		lightPath := "/v1/tasks/" + createTask(t, a, light, goodTask)["id"].(string) + "?wait=60"

		oldest := dialRawFrom(t, addr, "127.0.0.2")
		oldest.send(mcpWaitRequest(id, heavy))
		waitForWaiters(t, limiter, 1)
		dialRawFrom(t, addr, "127.0.0.3").send(getRequest(lightPath, light))
		newer := dialRawFrom(t, addr, "127.0.0.4")
		newer.send(mcpWaitRequest(id, heavy))
		waitForWaiters(t, limiter, 3)

		fourth := dialRawFrom(t, addr, "127.0.0.5")
		fourth.send(getRequest("/v1/tasks", light))
		res, answer := readToolAnswer(t, oldest)
		if answer.IsError || answer.Task.Status != "pending" || !res.Close {
			t.Fatalf("evicted: %+v, closing %v; want its pending task, closing", answer, res.Close)
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
}

// TestMCP_WaitWithARevokedKeyEndsWithAnError revokes the key of an MCP
// get_task waiting for its task, and decides the task: the call fails
// with the API's 401 sentence, without the verdict, once the revocation
// has reached the key checker (KeyCacheTTL).
func TestMCP_WaitWithARevokedKeyEndsWithAnError(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		var clock atomic.Int64
		clock.Store(time.Now().UnixNano())
		keys := web.NewKeyChecker(a.store, func() time.Time { return time.Unix(0, clock.Load()) })
		counts := arbiter.NewWaiterCounts(10, 10)
		srv, _ := serveRouter(t, a.store, keys, serverOptions{park: true, waiters: counts})
		account, _ := a.store.FindOrCreateAccountByEmail(ctx, "a@example.com")
		other := decider(t, a)
		keyID, key := newKeyWithID(t, a, "a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		sendToHuman(t, other)
		c := dialRaw(t, srv.Listener.Addr().String())
		c.send(mcpWaitRequest(id, key))
		waitForWaiting(t, counts, account.ID, keyID, 1, 1)
		if _, err := a.store.RevokeAPIKey(ctx, account.ID, keyID, arbiter.Actor{Email: "a@example.com"}); err != nil {
			t.Fatal(err)
		}
		clock.Add(int64(2 * web.KeyCacheTTL))
		if _, err := other.DecideTask(ctx, account.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
		_, answer := readToolAnswer(t, c)
		if !answer.IsError || answer.Task.Verdict != nil || len(answer.Content) == 0 ||
			!strings.Contains(strings.ToLower(answer.Content[0].Text), "key") || strings.Contains(answer.Content[0].Text, "approve") {
			t.Fatalf("a revoked key's MCP wait answered %+v; want an error about the key, without the verdict", answer)
		}
		waitForWaiting(t, counts, account.ID, keyID, 0, 0)
	})
}

package web_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/openapi/openapitest"
	"github.com/arbiterhq/arbiter/web"
)

var ctx = context.Background()

// api is a real router over a real store, served by httptest.
type api struct {
	t     *testing.T
	url   string // the store's address, for a second connection
	store *db.DB
	keys  *web.KeyChecker
	srv   *httptest.Server
	lot   *web.ParkingLot
}

// eachAPI runs fn once per store dialect against a fresh server.
func eachAPI(t *testing.T, opts db.Options, fn func(t *testing.T, a *api)) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			fn(t, serveAPI(t, dbtest.URL(t, dialect), opts))
		})
	}
}

// serveAPI serves the API over the store at url until the test ends.
func serveAPI(t *testing.T, url string, opts db.Options) *api {
	store := dbtest.OpenURL(t, url, opts)
	keys := web.NewKeyChecker(store, nil)
	srv, lot := serveRouter(t, store, keys, serverOptions{park: true})
	return &api{t: t, url: url, store: store, keys: keys, srv: srv, lot: lot}
}

// serverOptions are serveRouter's.
type serverOptions struct {
	// park parks waiting requests (web.ParkingLot), as arbiter serve does.
	park bool
	// logger receives the request log (default: nowhere).
	logger *slog.Logger
	// listen, when set, wraps the server's listener (a ConnLimiter, say),
	// connState receives the server's connection states and connContext
	// makes its connections' contexts.
	listen      func(net.Listener) net.Listener
	connState   func(net.Conn, http.ConnState)
	connContext func(context.Context, net.Conn) context.Context
	// waiters bounds the requests waiting for tasks (default: far more
	// than any test waits at once; TestWaiters_* test the defaults).
	waiters arbiter.WaiterLimiter
}

// serveRouter serves the API over store, wired as arbiter serve wires it,
// until the test ends: shutting the server down answers the requests
// waiting for tasks. It returns the server and its parking lot (nil
// unless o.park).
func serveRouter(t *testing.T, store *db.DB, keys *web.KeyChecker, o serverOptions) (*httptest.Server, *web.ParkingLot) {
	shuttingDown := make(chan struct{})
	var shutdownOnce sync.Once
	shutdown := func() { shutdownOnce.Do(func() { close(shuttingDown) }) }
	if o.logger == nil {
		o.logger = discardLogger()
	}
	router := &web.Router{
		Services: web.Services{Tasks: store, Keys: store, Demo: store, Health: store, Watcher: store, Calibration: store, Policies: store, Agreement: store,
			Receipts: store, AuditExport: store, Executions: store},
		KeyChecker:   keys,
		Logger:       o.logger,
		ShuttingDown: shuttingDown,
		// The tests send many demo verdicts from one address;
		// TestDemoLimit_* test the default limit.
		DemoLimit: arbiter.NewRateLimiter(1000, time.Millisecond, nil),
		Waiters:   o.waiters,
	}
	if router.Waiters == nil {
		router.Waiters = arbiter.NewWaiterCounts(100_000, 100_000)
	}
	if o.park {
		router.Parking = web.NewParkingLot(shuttingDown, o.logger)
	}
	srv := httptest.NewUnstartedServer(router.Routes())
	if o.listen != nil {
		srv.Listener = o.listen(srv.Listener)
	}
	srv.Config.ConnState, srv.Config.ConnContext = o.connState, o.connContext
	srv.Config.RegisterOnShutdown(shutdown)
	srv.Start()
	lot := router.Parking
	if lot != nil {
		go func() { _ = srv.Config.Serve(lot.Listener()) }()
	}
	t.Cleanup(func() {
		if lot != nil {
			// Parked waiters are answered and closed, as at shutdown.
			shutdown()
			waitCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			lot.Wait(waitCtx)
			if n := lot.Parked(); n > 0 {
				t.Errorf("%d requests still parked after the test", n)
			}
			lot.Listener().Close()
		}
		srv.Close()
	})
	return srv, lot
}

// newKey creates an account (if absent) and a key for it.
func (a *api) newKey(email string) string {
	a.t.Helper()
	account, err := a.store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		a.t.Fatal(err)
	}
	_, plaintext, err := a.store.CreateAPIKey(ctx, account.ID, "test", arbiter.Actor{Email: "test@example.com"})
	if err != nil {
		a.t.Fatal(err)
	}
	return plaintext
}

// do sends a request and returns the status, headers and body.
func (a *api) do(method, path, key, body string) (int, http.Header, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := a.srv.Client().Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		a.t.Fatal(err)
	}
	openapitest.ValidateResponse(a.t, req, res.StatusCode, res.Header, b)
	return res.StatusCode, res.Header, b
}

// wantError checks an error answer: the status, a JSON content type, an
// X-Request-Id and a body that is exactly {"error": "<non-empty sentence>",
// "code": "<code>"} and perhaps "field".
func wantError(t *testing.T, status int, header http.Header, body []byte, wantStatus int) string {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status = %d, want %d; body %s", status, wantStatus, body)
	}
	if ct := header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var e map[string]any
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not JSON: %s", body)
	}
	msg, ok := e["error"].(string)
	code, _ := e["code"].(string)
	_, hasField := e["field"]
	if n := len(e) - 2; n < 0 || n > 1 || n == 1 && !hasField || !ok || msg == "" || code == "" {
		t.Fatalf("error body = %s, want {\"error\": \"…\", \"code\": \"…\"}", body)
	}
	if header.Get("X-Request-Id") == "" {
		t.Error("the answer has no X-Request-Id")
	}
	return msg
}

const goodTask = `{"prompt":"Approve this refund?","allowed_verdicts":["approve","reject"],"context":{"amount":12}}`

func createTask(t *testing.T, a *api, key, body string) map[string]any {
	t.Helper()
	status, _, b := a.do("POST", "/v1/tasks", key, body)
	if status != http.StatusOK {
		t.Fatalf("create: %d %s", status, b)
	}
	var task map[string]any
	if err := json.Unmarshal(b, &task); err != nil {
		t.Fatal(err)
	}
	return task
}

func TestTaskCreate(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		task := createTask(t, a, key, goodTask)

		id, _ := task["id"].(string)
		if !arbiter.ValidTaskID(id) || !strings.HasPrefix(id, "tsk_") || len(id) != 20 {
			t.Errorf("id = %q, want tsk_ and 16 hex digits", id)
		}
		want := map[string]any{
			"status": "pending", "task_type": "decide", "touchpoint": "chat", "source": "",
			"prompt": "Approve this refund?", "confidence_threshold": 0.8,
			"final_verdict": nil, "final_tier": nil, "final_confidence": nil, "completed_at": nil,
		}
		for k, v := range want {
			if task[k] != v {
				t.Errorf("%s = %#v, want %#v", k, task[k], v)
			}
		}
		if _, ok := task["context"]; ok {
			t.Error("the task object carries context; the spec leaves it out")
		}
		if attempts, ok := task["attempts"].([]any); !ok || len(attempts) != 0 {
			t.Errorf("attempts = %#v, want []", task["attempts"])
		}
		created, _ := task["created_at"].(float64)
		if d := time.Since(time.UnixMilli(int64(created * 1000))); d < -time.Minute || d > time.Minute {
			t.Errorf("created_at = %v, not epoch seconds of now", created)
		}

		// Any key of the same account reads it back, identical.
		status, _, b := a.do("GET", "/v1/tasks/"+id, a.newKey("a@example.com"), "")
		var got map[string]any
		if status != http.StatusOK || json.Unmarshal(b, &got) != nil || fmt.Sprint(got) != fmt.Sprint(task) {
			t.Errorf("get = %d %s, want the created task", status, b)
		}
	})
}

func TestTaskCreate_Errors(t *testing.T) {
	t.Parallel()
	big := `{"prompt":"` + strings.Repeat("a", arbiter.MaxBodyBytes) + `","allowed_verdicts":["a"]}`
	cases := []struct {
		name, body string
		status     int
		mention    string // a word the error sentence must contain
	}{
		{"MissingPrompt", `{"allowed_verdicts":["a"]}`, 400, "prompt"},
		{"EmptyPrompt", `{"prompt":"","allowed_verdicts":["a"]}`, 400, "prompt"},
		{"PromptNotString", `{"prompt":5,"allowed_verdicts":["a"]}`, 400, "prompt"},
		{"MissingVerdicts", `{"prompt":"p"}`, 400, "allowed_verdicts"},
		{"EmptyVerdicts", `{"prompt":"p","allowed_verdicts":[]}`, 400, "allowed_verdicts"},
		{"VerdictNotString", `{"prompt":"p","allowed_verdicts":["a",1]}`, 400, "allowed_verdicts"},
		{"VerdictEmptyString", `{"prompt":"p","allowed_verdicts":["a",""]}`, 400, "allowed_verdicts"},
		{"VerdictDuplicate", `{"prompt":"p","allowed_verdicts":["a","a"]}`, 400, "allowed_verdicts"},
		{"VerdictsNotArray", `{"prompt":"p","allowed_verdicts":"a"}`, 400, "allowed_verdicts"},
		{"ThresholdAboveOne", `{"prompt":"p","allowed_verdicts":["a"],"confidence_threshold":1.01}`, 400, "confidence_threshold"},
		{"ThresholdNegative", `{"prompt":"p","allowed_verdicts":["a"],"confidence_threshold":-0.1}`, 400, "confidence_threshold"},
		{"ThresholdString", `{"prompt":"p","allowed_verdicts":["a"],"confidence_threshold":"0.5"}`, 400, "confidence_threshold"},
		{"MalformedJSON", `{"prompt":"p",`, 400, "JSON"},
		{"TrailingGarbage", goodTask + `{}`, 400, "JSON"},
		{"NotAnObject", `[1,2]`, 400, "JSON"},
		{"EmptyBody", ``, 400, "JSON"},
		{"UnknownField", `{"prompt":"p","allowed_verdicts":["a"],"priority":1}`, 400, "priority"},
		{"ContextTooDeep", `{"prompt":"p","allowed_verdicts":["a"],"context":` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `}`, 400, "64 levels"},
		{"ContextNested9999", `{"prompt":"p","allowed_verdicts":["a"],"context":` + strings.Repeat(`{"a":`, 9999) + "1" + strings.Repeat("}", 9999) + `}`, 400, "64 levels"},
		{"ContextInvalidUTF8", "{\"prompt\":\"p\",\"allowed_verdicts\":[\"a\"],\"context\":\"\xff\"}", 400, "UTF-8"},
		{"TooLarge", big, 413, "bytes"},
	}
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		account, _ := a.store.FindAccountByEmail(ctx, "a@example.com")
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				status, h, b := a.do("POST", "/v1/tasks", key, tc.body)
				msg := wantError(t, status, h, b, tc.status)
				if !strings.Contains(msg, tc.mention) {
					t.Errorf("error %q does not mention %q", msg, tc.mention)
				}
			})
		}
		// Nothing was half-written: no task was counted or stored.
		if used, _, err := a.store.UsageToday(ctx, account.ID); err != nil || used != 0 {
			t.Errorf("usage after bad requests = %d (%v), want 0", used, err)
		}
	})
}

func TestAuth(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		unknown := arbiter.NewAPIKeyPlaintext()
		cases := []struct{ name, header string }{
			{"Missing", ""},
			{"WrongScheme", "Basic " + key},
			{"Malformed", "Bearer svc_live_XYZ"},
			{"TooLong", "Bearer " + key + "0"},
			{"Unknown", "Bearer " + unknown},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				for _, r := range []struct{ method, path, body string }{
					{"POST", "/v1/tasks", goodTask}, {"GET", "/v1/tasks/tsk_0123456789abcdef", ""},
				} {
					req, _ := http.NewRequest(r.method, a.srv.URL+r.path, strings.NewReader(r.body))
					if tc.header != "" {
						req.Header.Set("Authorization", tc.header)
					}
					res, err := a.srv.Client().Do(req)
					if err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(res.Body)
					res.Body.Close()
					openapitest.ValidateResponse(t, req, res.StatusCode, res.Header, b)
					wantError(t, res.StatusCode, res.Header, b, http.StatusUnauthorized)
				}
			})
		}
	})
}

func TestTaskGet_NotFound(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		alice := a.newKey("alice@example.com")
		bob := a.newKey("bob@example.com")
		id := createTask(t, a, alice, goodTask)["id"].(string)

		_, _, unknownBody := a.do("GET", "/v1/tasks/tsk_0123456789abcdef", bob, "")
		for _, path := range []string{
			"/v1/tasks/" + id,                         // another account's task
			"/v1/tasks/tsk_0123456789abcdef",          // unknown
			"/v1/tasks/tsk_demo_refund_late_delivery", // the demo account's
			"/v1/tasks/nope",                          // malformed
			"/v1/tasks/TSK_0123456789ABCDEF",          // malformed
			"/v1/tasks/%27%20OR%201=1",                // hostile
		} {
			status, h, b := a.do("GET", path, bob, "")
			wantError(t, status, h, b, http.StatusNotFound)
			if string(b) != string(unknownBody) {
				t.Errorf("%s: body %s differs from an unknown id's %s", path, b, unknownBody)
			}
		}
		if status, _, b := a.do("GET", "/v1/tasks/"+id, alice, ""); status != http.StatusOK {
			t.Errorf("owner get = %d %s", status, b)
		}
	})
}

func TestOpenAPIDocument_ServedWithoutKey(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		status, h, b := a.do("GET", "/v1/openapi.json", "", "")
		var doc struct {
			OpenAPI string         `json:"openapi"`
			Paths   map[string]any `json:"paths"`
		}
		if status != 200 || h.Get("Content-Type") != "application/json" || json.Unmarshal(b, &doc) != nil ||
			doc.OpenAPI != "3.1.0" || doc.Paths["/v1/tasks"] == nil {
			t.Fatalf("openapi.json = %d %.100s", status, b)
		}
	})
}

func TestRouting_JSONErrors(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		status, h, b := a.do("GET", "/v2/nothing", "", "")
		wantError(t, status, h, b, http.StatusNotFound)
		status, h, b = a.do("DELETE", "/demo/tasks", "", "")
		wantError(t, status, h, b, http.StatusMethodNotAllowed)
	})
}

func TestDailyCap_Concurrent(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{DailyTaskCap: 10}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		var wg sync.WaitGroup
		var mu sync.Mutex
		counts := map[int]int{}
		var retryAfter []string
		for range 50 {
			wg.Go(func() {
				req, _ := http.NewRequest("POST", a.srv.URL+"/v1/tasks", strings.NewReader(goodTask))
				req.Header.Set("Authorization", "Bearer "+key)
				res, err := a.srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				openapitest.ValidateResponse(t, req, res.StatusCode, res.Header, b)
				mu.Lock()
				counts[res.StatusCode]++
				if res.StatusCode == http.StatusTooManyRequests {
					retryAfter = append(retryAfter, res.Header.Get("Retry-After"))
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if counts[200] != 10 || counts[429] != 40 {
			t.Fatalf("statuses = %v, want 10×200 and 40×429", counts)
		}
		for _, ra := range retryAfter {
			var secs int
			if _, err := fmt.Sscan(ra, &secs); err != nil || secs < 1 || secs > 86400 {
				t.Fatalf("Retry-After = %q, want seconds until the next UTC day", ra)
			}
		}
		status, h, b := a.do("POST", "/v1/tasks", key, goodTask)
		wantError(t, status, h, b, http.StatusTooManyRequests)

		// The operator raises the cap; the account may create again.
		account, _ := a.store.FindAccountByEmail(ctx, "a@example.com")
		n := 11
		if err := a.store.SetDailyCap(ctx, account.ID, &n); err != nil {
			t.Fatal(err)
		}
		if status, _, b := a.do("POST", "/v1/tasks", key, goodTask); status != http.StatusOK {
			t.Fatalf("after raising the cap: %d %s", status, b)
		}
	})
}

// TestRevocation_SeenWithinTheKeyCacheTTL: a key revoked by another
// process (the CLI, a second server) is refused by this one within
// web.KeyCacheTTL (docs/api.md: within a second). The test asks with the
// key until it is refused, and fails if a request sent past the bound was
// accepted. The bound counts from when the revocation returned, and a
// request counts from when it was sent: neither a slow commit nor a slow
// answer on a loaded machine moves it.
func TestRevocation_SeenWithinTheKeyCacheTTL(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		other := dbtest.OpenURL(t, a.url, db.Options{})
		k, err := other.FindAPIKeyByHash(ctx, arbiter.HashToken(key))
		if err != nil {
			t.Fatal(err)
		}
		// The server checks the key, and caches it, just before the
		// revocation.
		if status, _, b := a.do("POST", "/v1/tasks", key, goodTask); status != http.StatusOK {
			t.Fatalf("before revocation: %d %s", status, b)
		}
		if _, err := other.RevokeAPIKey(ctx, "", k.ID, arbiter.Actor{Email: "test@example.com"}); err != nil {
			t.Fatal(err)
		}
		revoked := time.Now() // the revocation has committed
		for ; ; time.Sleep(10 * time.Millisecond) {
			sent := time.Now()
			status, h, b := a.do("GET", "/v1/tasks/tsk_0123456789abcdef", key, "")
			switch {
			case status == http.StatusUnauthorized:
				if msg := wantError(t, status, h, b, http.StatusUnauthorized); !strings.Contains(msg, "revoked") {
					t.Errorf("error %q does not say the key was revoked", msg)
				}
				return
			case status != http.StatusNotFound:
				t.Fatalf("a request with the key being revoked: %d %s, want 404 (the key accepted) or 401", status, b)
			case sent.Sub(revoked) > web.KeyCacheTTL:
				t.Fatalf("the revoked key was accepted by a request sent %v after the revocation, past the %v bound",
					sent.Sub(revoked).Round(time.Millisecond), web.KeyCacheTTL)
			}
		}
	})
}

func TestLastUsed_Flushed(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		hash := arbiter.HashToken(key)
		k, _ := a.store.FindAPIKeyByHash(ctx, hash)
		if k.LastUsedAt != nil {
			t.Fatal("a new key has a last_used_at")
		}
		before := arbiter.TimestampOf(time.Now())
		a.do("POST", "/v1/tasks", key, goodTask)
		a.do("GET", "/v1/tasks/tsk_0123456789abcdef", key, "") // 404 is still a successful key use

		// Nothing is written on the request path ...
		if k, _ = a.store.FindAPIKeyByHash(ctx, hash); k.LastUsedAt != nil {
			t.Fatal("last_used_at was written on the request path")
		}
		// ... until the flush.
		if err := a.keys.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		k, _ = a.store.FindAPIKeyByHash(ctx, hash)
		if k.LastUsedAt == nil || *k.LastUsedAt < before {
			t.Fatalf("last_used_at = %v after flush, want ≥ %v", k.LastUsedAt, before)
		}
	})
}

func TestDemo(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		status, _, before := a.do("GET", "/demo/tasks", "", "")
		var list struct {
			Tasks []struct {
				ID              string   `json:"id"`
				AllowedVerdicts []string `json:"allowed_verdicts"`
			} `json:"tasks"`
		}
		if status != 200 || json.Unmarshal(before, &list) != nil || len(list.Tasks) < 8 {
			t.Fatalf("demo tasks = %d %s, want at least 8", status, before)
		}
		demo := list.Tasks[0]
		for _, task := range list.Tasks {
			if !strings.HasPrefix(task.ID, "tsk_demo_") {
				t.Errorf("demo task id %q", task.ID)
			}
		}

		body := fmt.Sprintf(`{"task_id":%q,"verdict":%q,"rationale":"looks fine","anon_session_id":"anon_1"}`,
			demo.ID, demo.AllowedVerdicts[0])
		status, _, b := a.do("POST", "/demo/verdicts", "", body)
		var v map[string]any
		if status != 200 || json.Unmarshal(b, &v) != nil {
			t.Fatalf("demo verdict = %d %s", status, b)
		}
		if id, _ := v["id"].(string); id == "" || v["task_id"] != demo.ID || v["verdict"] != demo.AllowedVerdicts[0] ||
			v["rationale"] != "looks fine" || v["anon_session_id"] != "anon_1" || v["created_at"] == nil {
			t.Errorf("stored record = %s", b)
		}

		real := createTask(t, a, a.newKey("a@example.com"), goodTask)["id"].(string)
		cases := []struct {
			name, body string
			status     int
		}{
			{"MissingTaskID", `{"verdict":"approve"}`, 400},
			{"MissingVerdict", fmt.Sprintf(`{"task_id":%q}`, demo.ID), 400},
			{"VerdictOutsideSet", fmt.Sprintf(`{"task_id":%q,"verdict":"maybe-not-allowed"}`, demo.ID), 400},
			{"MalformedJSON", `{"task_id":`, 400},
			{"UnknownTask", `{"task_id":"tsk_demo_nothing_here","verdict":"approve"}`, 404},
			{"RealTaskOfAnotherAccount", fmt.Sprintf(`{"task_id":%q,"verdict":"approve"}`, real), 404},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				status, h, b := a.do("POST", "/demo/verdicts", "", tc.body)
				wantError(t, status, h, b, tc.status)
			})
		}

		// Demo tasks never change.
		if _, _, after := a.do("GET", "/demo/tasks", "", ""); string(after) != string(before) {
			t.Error("the demo queue changed after verdicts")
		}
	})
}

// POST /demo/verdicts matches field names exactly, as POST /v1/tasks and
// each task of a batch do (TestTaskCreate_FieldNamesAreExact,
// TestTaskBatchCreate): a field in another case or given twice is 400 and
// stores nothing.
func TestDemoVerdictCreate_FieldNamesAreExact(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		const task, session = `"task_id":"tsk_demo_refund_late_delivery"`, `"anon_session_id":"anon_exact"`
		for body, mention := range map[string]string{
			`{"TASK_ID":"tsk_demo_refund_late_delivery","verdict":"approve",` + session + `}`:    `"TASK_ID"`,
			`{` + task + `,"VERDICT":"approve",` + session + `}`:                                 `"VERDICT"`,
			`{` + task + `,"verdict":"approve","verdict":"reject",` + session + `}`:              "twice",
			`{` + task + `,` + task + `,"verdict":"approve",` + session + `}`:                    "twice",
			`{` + task + `,"verdict":"approve","rationale":"a","rationale":"b",` + session + `}`: "twice",
		} {
			status, h, b := a.do("POST", "/demo/verdicts", "", body)
			if msg := wantError(t, status, h, b, 400); !strings.Contains(msg, mention) {
				t.Errorf("%s: error %q does not mention %s", body, msg, mention)
			}
		}
		if n, err := a.store.CountDemoVerdicts(ctx, "anon_exact"); err != nil || n != 0 {
			t.Fatalf("%d demo verdicts stored after refused bodies (%v), want 0", n, err)
		}
	})
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		status, _, b := a.do("GET", "/healthz", "", "")
		if status != http.StatusServiceUnavailable || !strings.Contains(string(b), `"ok":false`) {
			t.Fatalf("healthz without a worker = %d %s, want 503", status, b)
		}
		if err := a.store.Heartbeat(ctx, "wrk_test"); err != nil {
			t.Fatal(err)
		}
		status, _, b = a.do("GET", "/healthz", "", "")
		if status != http.StatusOK || strings.TrimSpace(string(b)) != `{"ok":true}` {
			t.Fatalf("healthz with a fresh heartbeat = %d %s", status, b)
		}
	})
}

// TestLivezReadyz: /livez answers whatever the store does, and /readyz
// asks of this process and its store, not whether some worker runs: both
// are 200 where /healthz, without a worker anywhere, is 503.
func TestLivezReadyz(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		for _, path := range []string{"/livez", "/readyz"} {
			status, h, b := a.do("GET", path, "", "")
			if status != http.StatusOK || strings.TrimSpace(string(b)) != `{"ok":true}` || h.Get("Cache-Control") != "no-store" {
				t.Errorf("%s without a worker = %d %s %v, want 200", path, status, b, h)
			}
		}
		a.store.Close()
		if status, _, b := a.do("GET", "/livez", "", ""); status != http.StatusOK {
			t.Errorf("/livez with the store closed = %d %s, want 200", status, b)
		}
		// Ready's look is kept for db.HealthyFor.
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			status, _, b := a.do("GET", "/readyz", "", "")
			if status == http.StatusServiceUnavailable && strings.Contains(string(b), `"ok":false`) {
				break
			}
			if status != http.StatusOK || time.Now().After(deadline) {
				t.Fatalf("/readyz with the store closed = %d %s, want 503", status, b)
			}
		}
	})
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestAPI_NoServerErrorForAnythingACallerSends(t *testing.T) {
	t.Parallel()
	bodies := []string{"", "null", "[]", "{}", "\x00\xff\xfe", `{"prompt":`, strings.Repeat("[", 10000),
		`{"prompt":"p","allowed_verdicts":["a"],"context":` + strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000) + `}`,
		`{"task_id":"tsk_demo_refund_late_delivery","verdict":"approve","anon_session_id":"` + strings.Repeat("x", 200) + `"}`,
		`{"task_id":"tsk_demo_refund_late_delivery","verdict":"approve","rationale":"` + strings.Repeat("é", 5000) + `"}`,
		`{"prompt":"\ud800","allowed_verdicts":["\udfff"]}`, `{"prompt":"p","allowed_verdicts":["a"],"confidence_threshold":1e999}`,
	}
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		for _, body := range bodies {
			for _, path := range []string{"/v1/tasks", "/demo/verdicts"} {
				if status, _, b := a.do("POST", path, key, body); status >= 500 {
					t.Errorf("POST %s with %.40q: %d %s", path, body, status, b)
				}
			}
		}
		for _, id := range []string{strings.Repeat("a", 5000), "tsk_%00", "..%2F..%2Fetc", "tsk_demo_" + strings.Repeat("x", 300)} {
			if status, _, b := a.do("GET", "/v1/tasks/"+id, key, ""); status != http.StatusNotFound {
				t.Errorf("GET /v1/tasks/%.40s: %d %s", id, status, b)
			}
		}
	})
}

// TestAPI_StalledStoreIs503 holds the lock a create needs in another
// connection: the create is answered 503 {"error": …} with Retry-After
// within the store's timeout instead of waiting for the lock, on both
// stores.
func TestAPI_StalledStoreIs503(t *testing.T) {
	// Not parallel: a short store timeout is its subject; a machine busy with
	// other tests would time out the steps meant to pass.
	eachAPI(t, db.Options{Timeout: time.Second}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		body := `{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`
		if status, _, b := a.do("POST", "/v1/tasks", key, body); status != http.StatusOK {
			t.Fatalf("create = %d %s", status, b)
		}

		driver, dsn, lock := "postgres", a.url, `UPDATE daily_usage SET count = count`
		if a.store.Dialect() == db.SQLite {
			driver, dsn = "sqlite", strings.TrimPrefix(a.url, "sqlite:")
		}
		raw, err := sql.Open(driver, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		holder, err := raw.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer holder.Rollback()
		if _, err := holder.ExecContext(ctx, lock); err != nil {
			t.Fatal(err)
		}

		status, header, b := a.do("POST", "/v1/tasks", key, body)
		wantError(t, status, header, b, http.StatusServiceUnavailable)
		if s, err := strconv.Atoi(header.Get("Retry-After")); err != nil || s < 1 {
			t.Errorf("Retry-After = %q, want whole seconds", header.Get("Retry-After"))
		}
	})
}

// TestAPI_StoreGoneIs503 resets every connection to Postgres and refuses
// new ones, as a stopped or restarting server does: a create and a read are
// answered 503 {"error": …} with Retry-After, so a client that retries a
// 503 with its idempotency key is safe, and a create works again once the
// server is back. (SQLite has no connection to lose.)
func TestAPI_StoreGoneIs503(t *testing.T) {
	// Not parallel: a short store timeout is its subject; a machine busy with
	// other tests would time out the steps meant to pass.
	proxy, url := dbtest.ThroughProxy(t, dbtest.URL(t, db.Postgres))
	a := serveAPI(t, url, db.Options{Timeout: 5 * time.Second})
	key := a.newKey("a@example.com")
	task := createTask(t, a, key, goodTask)

	proxy.Cut()
	for _, req := range [][2]string{{"POST", "/v1/tasks"}, {"GET", "/v1/tasks/" + task["id"].(string)}} {
		status, header, b := a.do(req[0], req[1], key, goodTask)
		wantError(t, status, header, b, http.StatusServiceUnavailable)
		if s, err := strconv.Atoi(header.Get("Retry-After")); err != nil || s < 1 {
			t.Errorf("%s %s: Retry-After = %q, want whole seconds", req[0], req[1], header.Get("Retry-After"))
		}
	}

	proxy.Restore()
	for deadline := time.Now().Add(30 * time.Second); ; {
		status, _, b := a.do("POST", "/v1/tasks", key, goodTask)
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create after Postgres came back = %d %s", status, b)
		}
	}
}

// No field but context may be null (the document declares none of them
// nullable): a null is a 400 naming the field, on a create and on a batch
// item, and nothing is stored; an empty callback_url too.
func TestTaskCreate_RefusesNull(t *testing.T) {
	t.Parallel()
	fields := []string{"confidence_threshold", "task_type", "touchpoint", "source", "deadline_seconds", "callback_url", "audit_rate"}
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("null@example.com")
		account, _ := a.store.FindAccountByEmail(ctx, "null@example.com")
		bodies := map[string]string{`"callback_url":""`: "callback_url"}
		for _, f := range fields {
			bodies[`"`+f+`":null`] = f
		}
		for member, field := range bodies {
			body := `{"prompt":"p","allowed_verdicts":["a"],` + member + `}`
			status, h, b := a.do("POST", "/v1/tasks", key, body)
			if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, field) {
				t.Errorf("%s: %q does not name %s", body, msg, field)
			}
			status, _, b = a.do("POST", "/v1/tasks/batch", key, `{"tasks":[`+body+`]}`)
			var batch struct {
				Results []struct {
					Kind   string `json:"kind"`
					Status int    `json:"status"`
					Error  string `json:"error"`
				} `json:"results"`
			}
			if err := json.Unmarshal(b, &batch); status != http.StatusOK || err != nil || len(batch.Results) != 1 ||
				batch.Results[0].Status != http.StatusBadRequest || !strings.Contains(batch.Results[0].Error, field) {
				t.Errorf("batch of %s: %d %s, want one 400 naming %s", body, status, b, field)
			}
		}
		if used, _, err := a.store.UsageToday(ctx, account.ID); err != nil || used != 0 {
			t.Errorf("usage after refused creates = %d (%v), want 0", used, err)
		}
	})
}

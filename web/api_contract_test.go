package web_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/openapi/openapitest"
	"github.com/arbiterhq/arbiter/web"
)

// doWith is api.do with request headers.
func (a *api) doWith(method, path, key, body string, header http.Header) (int, http.Header, []byte) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	for name, values := range header {
		req.Header[name] = values
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

// errorOf decodes an error answer's body.
func errorOf(t *testing.T, b []byte) (code, field string) {
	t.Helper()
	var e struct{ Code, Field string }
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %s: %v", b, err)
	}
	return e.Code, e.Field
}

const demoVerdict = `{"task_id":"tsk_demo_refund_late_delivery","verdict":"approve"}`

// A body on a JSON endpoint is read as JSON when it says it is JSON, or
// says nothing; any other media type (curl -d's form type, text, multipart)
// is a 415 with unsupported_media_type, and nothing is stored.
func TestAPI_NonJSONBodyIs415(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("ct@example.com")
		account, _ := a.store.FindAccountByEmail(ctx, "ct@example.com")
		posts := []struct{ path, key, body string }{
			{"/v1/tasks", key, goodTask},
			{"/v1/tasks/batch", key, `{"tasks":[` + goodTask + `]}`},
			{"/demo/verdicts", "", demoVerdict},
		}
		for _, p := range posts {
			for _, ct := range []string{"application/x-www-form-urlencoded", "text/plain", "multipart/form-data; boundary=x", "application/jsonx", "not a type"} {
				status, h, b := a.doWith("POST", p.path, p.key, p.body, http.Header{"Content-Type": {ct}})
				msg := wantError(t, status, h, b, http.StatusUnsupportedMediaType)
				if code, _ := errorOf(t, b); code != "unsupported_media_type" || !strings.Contains(msg, "application/json") {
					t.Errorf("POST %s as %s: %s", p.path, ct, b)
				}
			}
		}
		if used, _, err := a.store.UsageToday(ctx, account.ID); err != nil || used != 0 {
			t.Fatalf("usage after refused bodies = %d (%v), want 0", used, err)
		}
		for _, p := range posts {
			for _, ct := range []string{"", "application/json", "application/json; charset=utf-8", "Application/JSON", "application/vnd.arbiter+json"} {
				header := http.Header{}
				if ct != "" {
					header.Set("Content-Type", ct)
				}
				if status, _, b := a.doWith("POST", p.path, p.key, p.body, header); status != http.StatusOK {
					t.Errorf("POST %s as %q = %d %s, want 200", p.path, ct, status, b)
				}
			}
		}
	})
}

// A 405 lists what the address takes in Allow (RFC 9110, 15.5.6), and HEAD
// is answered wherever GET is, with GET's status and headers and no body.
func TestAPI_MethodsAllowAndHead(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("head@example.com")
		task := createTask(t, a, key, goodTask)
		for _, c := range []struct{ method, path, allow string }{
			{"DELETE", "/demo/tasks", "GET, HEAD"},
			{"PUT", "/v1/tasks", "GET, HEAD, POST"},
			{"POST", "/v1/tasks/" + task["id"].(string), "GET, HEAD"},
			{"GET", "/demo/verdicts", "POST"},
			{"DELETE", "/healthz", "GET, HEAD"},
			{"GET", "/v1/tasks/batch", "POST"},
			{"PUT", "/v1/tasks/batch", "POST"},
		} {
			status, h, b := a.do(c.method, c.path, key, "")
			wantError(t, status, h, b, http.StatusMethodNotAllowed)
			if code, _ := errorOf(t, b); h.Get("Allow") != c.allow || code != "method_not_allowed" {
				t.Errorf("%s %s: Allow %q, code %q; want %q, method_not_allowed", c.method, c.path, h.Get("Allow"), code, c.allow)
			}
		}
		for _, path := range []string{"/v1/tasks", "/v1/tasks/" + task["id"].(string), "/demo/tasks", "/v1/openapi.json", "/v1/calibration", "/healthz", "/livez", "/readyz"} {
			getStatus, getHeader, _ := a.do("GET", path, key, "")
			status, h, b := a.do("HEAD", path, key, "")
			if status != getStatus || len(b) != 0 || h.Get("Content-Type") != getHeader.Get("Content-Type") || h.Get("X-Request-Id") == "" {
				t.Errorf("HEAD %s = %d %q (%d bytes); GET = %d %q", path, status, h.Get("Content-Type"), len(b), getStatus, getHeader.Get("Content-Type"))
			}
		}
		if status, _, _ := a.do("HEAD", "/v1/tasks/tsk_0000000000000000", key, ""); status != http.StatusNotFound {
			t.Errorf("HEAD of an unknown task = %d, want 404", status)
		}
	})
}

// A header over web.MaxHeaderBytes is a 431 answered as the API answers
// failures, with headers_too_large.
func TestAPI_HugeHeaderIs431JSON(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("big@example.com")
		big := http.Header{"X-Big": {strings.Repeat("a", web.MaxHeaderBytes)}}
		for _, path := range []string{"/v1/tasks", "/healthz", "/demo/tasks"} {
			status, h, b := a.doWith("GET", path, key, "", big)
			wantError(t, status, h, b, http.StatusRequestHeaderFieldsTooLarge)
			if code, _ := errorOf(t, b); code != "headers_too_large" {
				t.Errorf("GET %s with a big header: %s", path, b)
			}
		}
		near := http.Header{"X-Big": {strings.Repeat("a", web.MaxHeaderBytes-4<<10)}}
		if status, _, b := a.doWith("GET", "/v1/tasks", key, "", near); status != http.StatusOK {
			t.Errorf("a header just under the limit = %d %s", status, b)
		}
	})
}

// Every error answer carries a stable code, and a field error the field,
// derived from the error in one place.
func TestAPI_ErrorCodes(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{DailyTaskCap: 1}, func(t *testing.T, a *api) {
		key := a.newKey("codes@example.com")
		idem := http.Header{"Idempotency-Key": {"k1"}}
		for _, c := range []struct {
			name, method, path, key, body string
			header                        http.Header
			status                        int
			code, field                   string
		}{
			{"NoKey", "GET", "/v1/tasks", "", "", nil, 401, "unauthorized", ""},
			{"NoRoute", "GET", "/v1/nothing", key, "", nil, 404, "not_found", ""},
			{"NoTask", "GET", "/v1/tasks/tsk_0000000000000000", key, "", nil, 404, "not_found", ""},
			{"NotJSON", "POST", "/v1/tasks", key, "{", nil, 400, "invalid_request", ""},
			{"UnknownField", "POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a"],"x":1}`, nil, 400, "invalid_request", ""},
			{"WrongType", "POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a"],"task_type":5}`, nil, 400, "invalid_field", "task_type"},
			{"Null", "POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a"],"source":null}`, nil, 400, "invalid_field", "source"},
			{"OutOfRange", "POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a"],"confidence_threshold":2}`, nil, 400, "invalid_field", "confidence_threshold"},
			{"NoPrompt", "POST", "/v1/tasks", key, `{"allowed_verdicts":["a"]}`, nil, 400, "invalid_field", "prompt"},
			{"BadQuery", "GET", "/v1/tasks?limit=0", key, "", nil, 400, "invalid_field", "limit"},
			{"TooLarge", "POST", "/v1/tasks", key, `{"prompt":"` + strings.Repeat("a", 1<<20) + `"}`, nil, 413, "payload_too_large", ""},
			{"Created", "POST", "/v1/tasks", key, goodTask, idem, 200, "", ""},
			{"KeyMismatch", "POST", "/v1/tasks", key, `{"prompt":"other","allowed_verdicts":["a"]}`, idem, 422, "idempotency_mismatch", ""},
			{"DailyCap", "POST", "/v1/tasks", key, goodTask, nil, 429, "daily_cap_exceeded", ""},
		} {
			status, h, b := a.doWith(c.method, c.path, c.key, c.body, c.header)
			if c.status == http.StatusOK {
				if status != http.StatusOK {
					t.Fatalf("%s: %d %s", c.name, status, b)
				}
				continue
			}
			wantError(t, status, h, b, c.status)
			if code, field := errorOf(t, b); code != c.code || field != c.field {
				t.Errorf("%s: code %q field %q, want %q %q (%s)", c.name, code, field, c.code, c.field, b)
			}
		}
		status, _, b := a.do("POST", "/v1/tasks/batch", key, `{"tasks":[{"prompt":"p","allowed_verdicts":["a"],"audit_rate":7},`+goodTask+`]}`)
		var batch struct {
			Results []struct{ Kind, Code, Field string } `json:"results"`
		}
		if err := json.Unmarshal(b, &batch); status != 200 || err != nil || len(batch.Results) != 2 ||
			batch.Results[0].Code != "invalid_field" || batch.Results[0].Field != "audit_rate" || batch.Results[1].Code != "daily_cap_exceeded" {
			t.Errorf("batch = %d %s; want invalid_field on audit_rate, then daily_cap_exceeded", status, b)
		}
	})
}

// Every answer carries an X-Request-Id, logged with the request: the one a
// trusted proxy sent when it is well formed, else a new one; a client's own
// is not taken.
func TestAPI_RequestID(t *testing.T) {
	t.Parallel()
	generated := regexp.MustCompile(`^req_[0-9a-f]{24}$`)
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			store := dbtest.Open(t, dialect, db.Options{})
			var logs bytes.Buffer
			var mu = make(chan struct{}, 1)
			logger := slog.New(slog.NewTextHandler(lockedWriter{&logs, mu}, nil))
			serve := func(trusted []netip.Prefix) *httptest.Server {
				router := &web.Router{
					Services:       web.Services{Tasks: store, Keys: store, Demo: store, Health: store, Watcher: store, Calibration: store},
					KeyChecker:     web.NewKeyChecker(store, nil),
					Logger:         logger,
					TrustedProxies: trusted,
				}
				srv := httptest.NewServer(router.Routes())
				t.Cleanup(srv.Close)
				return srv
			}
			direct := serve(nil)
			proxied := serve([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")})
			get := func(srv *httptest.Server, path, id string) string {
				t.Helper()
				req, _ := http.NewRequest("GET", srv.URL+path, nil)
				if id != "" {
					req.Header.Set("X-Request-Id", id)
				}
				res, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				openapitest.ValidateResponse(t, req, res.StatusCode, res.Header, b)
				return res.Header.Get("X-Request-Id")
			}
			seen := map[string]bool{}
			for _, path := range []string{"/demo/tasks", "/v1/tasks", "/v1/nothing", "/static/nothing"} {
				id := get(direct, path, "")
				if !generated.MatchString(id) || seen[id] {
					t.Errorf("GET %s: X-Request-Id %q, want a new req_ id", path, id)
				}
				seen[id] = true
			}
			if id := get(direct, "/demo/tasks", "from-the-client"); id == "from-the-client" || !generated.MatchString(id) {
				t.Errorf("a client's own id was taken: %q", id)
			}
			if id := get(proxied, "/demo/tasks", "edge-7f3a:01.2_b"); id != "edge-7f3a:01.2_b" {
				t.Errorf("the trusted proxy's id = %q, want it kept", id)
			}
			for _, bad := range []string{strings.Repeat("a", 129), "two words", "a\"b", "ü"} {
				if id := get(proxied, "/demo/tasks", bad); !generated.MatchString(id) {
					t.Errorf("a proxy's id %q was taken as %q, want a new one", bad, id)
				}
			}
			id := get(direct, "/v1/tasks/tsk_0000000000000000", "")
			mu <- struct{}{}
			logged := logs.String()
			<-mu
			if !strings.Contains(logged, "request_id="+id) {
				t.Errorf("the log does not name %s:\n%s", id, logged)
			}
		})
	}
}

// lockedWriter serializes writes to a buffer that the test reads.
type lockedWriter struct {
	b  *bytes.Buffer
	mu chan struct{}
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu <- struct{}{}
	defer func() { <-w.mu }()
	return w.b.Write(p)
}

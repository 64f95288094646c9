package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/web"
)

// fixedTasks answers every read with one task, so that a benchmark of the
// get measures the HTTP path (router, middleware, key check, encoding)
// and not a store.
type fixedTasks struct {
	arbiter.TaskService
	task *arbiter.Task
}

func (f fixedTasks) FindTaskByID(_ context.Context, _, _ string) (*arbiter.Task, error) {
	t := *f.task
	return &t, nil
}

// getRouter is the router as arbiter serve wires it over fixedTasks, with
// its request log lines written to logs, and a GET of the task with a
// valid key.
func getRouter(t testing.TB, logs io.Writer) (http.Handler, *http.Request) {
	key := arbiter.NewAPIKeyPlaintext()
	var task arbiter.Task
	if err := json.Unmarshal([]byte(benchTaskJSON), &task); err != nil {
		t.Fatal(err)
	}
	router := (&web.Router{
		Services:   web.Services{Tasks: fixedTasks{task: &task}, Keys: newMemKeys(key)},
		KeyChecker: web.NewKeyChecker(newMemKeys(key), nil),
		Logger:     slog.New(slog.NewTextHandler(logs, nil)),
	}).Routes()
	req := httptest.NewRequest(http.MethodGet, "/v1/tasks/"+task.ID, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	req.RemoteAddr = "203.0.113.1:5000"
	return router, req
}

// A get allocates a bounded number of objects on the server's side
// (issue 35: 54 before the security headers, the JSON buffer and the
// request's logger stopped allocating on every answer; issue 50: 42
// before the task encoded itself).
func TestRouter_TaskGetAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own account")
	}
	router, req := getRouter(t, io.Discard)
	w := httptest.NewRecorder()
	router.ServeHTTP(w, req) // the key is looked up once, then cached
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	// Some of them are httptest's recorder's (itself, its body, the
	// header and its copy on WriteHeader).
	const most = 41
	allocs := testing.AllocsPerRun(200, func() {
		w := httptest.NewRecorder()
		router.ServeHTTP(w, req)
	})
	if allocs > most {
		t.Errorf("a get allocates %.0f objects, want at most %d", allocs, most)
	}
}

// The request's log line and the lines its handler logs carry the request
// id the answer names, first after the message, as before the handlers'
// logger was made only when asked for.
func TestRouter_LogLinesCarryTheRequestID(t *testing.T) {
	var logs bytes.Buffer
	router, req := getRouter(t, &logs)
	w := httptest.NewRecorder()
	router.ServeHTTP(w, req)
	id := w.Header().Get(web.RequestIDHeader)
	if w.Code != http.StatusOK || id == "" {
		t.Fatalf("%d, request id %q", w.Code, id)
	}
	if want := "msg=request request_id=" + id + " method=GET path=/v1/tasks/tsk_0123456789abcdef status=200 "; !strings.Contains(logs.String(), want) {
		t.Errorf("the request line lacks %q:\n%s", want, logs.String())
	}
	// A handler's own lines, through the context's logger.
	logs.Reset()
	ctxLogger := slog.New(slog.NewTextHandler(&logs, nil))
	h := handlers.NewContextWithRequestLogger(context.Background(), ctxLogger, "req_abc")
	handlers.LoggerFromContext(h).Info("inside", "k", 1)
	handlers.LoggerFromContext(h).Info("again")
	if got := logs.String(); strings.Count(got, "request_id=req_abc") != 2 || !strings.Contains(got, "msg=inside request_id=req_abc k=1") {
		t.Errorf("the handler's lines lack the request id:\n%s", got)
	}
}

// BenchmarkRouter_TaskGet serves GET /v1/tasks/{id} through the router as
// arbiter serve wires it, with a request log line written (to nowhere)
// and a realistic task (the bench's create), without a network or store:
// the server's own cost of a get.
func BenchmarkRouter_TaskGet(b *testing.B) {
	router, req := getRouter(b, io.Discard)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		router.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatalf("%d %s", w.Code, w.Body)
		}
	}
}

// benchTaskJSON is a task as the bench creates it: a ~200-byte prompt,
// ~1 KiB of context and three verdicts, pending.
const benchTaskJSON = `{"id":"tsk_0123456789abcdef","status":"pending","prompt":"A customer asks for a full refund of order ord_58213 because two items arrived broken. The photos in the ticket show cracked ceramic. Policy allows refunds within 30 days. Approve, reject or escalate?",
"allowed_verdicts":["approve","reject","escalate"],"confidence_threshold":0.85,"task_type":"refund","touchpoint":"email","source":"support-bot",
"context":{"currency":"EUR","customer":{"id":"cus_9921","orders":17,"since":"2021-04-02"},"items":[{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":1,"sku":"SKU-01000"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":2,"sku":"SKU-01001"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":3,"sku":"SKU-01002"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":1,"sku":"SKU-01003"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":2,"sku":"SKU-01004"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":3,"sku":"SKU-01005"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":1,"sku":"SKU-01006"},{"name":"Ceramic pour-over coffee dripper","price":24.9,"qty":2,"sku":"SKU-01007"}],"order_id":"ord_58213","total":199.2},
"created_at":1763805600000,"updated_at":1763805600000}`

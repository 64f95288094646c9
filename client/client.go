// Package client is the Go client of Arbiter's HTTP API. It imports only the
// standard library.
//
// New reads the API key from SVC_API_KEY and the server's address from
// SVC_BASE_URL (default http://localhost:8080); options override both. A
// program that asks a question and waits for the answer:
//
//	package main
//
//	import (
//		"context"
//		"fmt"
//		"log"
//		"time"
//
//		"github.com/arbiterhq/arbiter/client"
//	)
//
//	func main() {
//		c := client.New() // SVC_API_KEY, SVC_BASE_URL
//		ctx := context.Background()
//		task, err := c.CreateTask(ctx, client.TaskCreate{
//			Prompt:          "Approve this refund?",
//			AllowedVerdicts: []string{"approve", "reject"},
//			Context:         map[string]any{"order": "ord_1", "amount": 42.5},
//		})
//		if err != nil {
//			log.Fatal(err)
//		}
//		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
//		defer cancel()
//		task, err = c.WaitTask(ctx, task.ID, nil)
//		if err != nil {
//			log.Fatal(err)
//		}
//		if task.Status == client.StatusExpired { // only with a deadline
//			log.Fatal("nobody decided in time")
//		}
//		fmt.Println(*task.FinalVerdict, *task.FinalTier)
//	}
//
// Failures the server answers are *Error values carrying the status and the
// server's sentence; IsNotFound, IsUnauthorized, IsInvalid, IsTooLarge,
// IsRateLimited, IsConflict and IsUnprocessable classify them. The client
// retries a 429 after its Retry-After when that wait is short enough, and a
// 5xx on reads. A POST is not retried after a 5xx or a lost connection, as
// it might have been stored, unless it is safe to repeat: a create with an
// IdempotencyKey, or a batch whose every task has one, is retried after a
// 5xx, a 409 and a connection error too, and the server makes its task
// once. Response fields added by later servers are ignored.
package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// DefaultBaseURL is the server New talks to when neither SVC_BASE_URL nor
// WithBaseURL names one.
const DefaultBaseURL = "http://localhost:8080"

// Defaults of the retry policy; see WithRetries and WithMaxRetryWait.
const (
	DefaultRetries      = 3
	DefaultMaxRetryWait = time.Minute
)

// maxResponseBytes bounds what the client reads of one answer.
const maxResponseBytes = 16 << 20

// Client calls one Arbiter server. It is safe for concurrent use.
type Client struct {
	apiKey       string
	baseURL      string
	httpClient   *http.Client
	userAgent    string
	retries      int
	maxRetryWait time.Duration
}

// Option configures a Client built by New.
type Option func(*Client)

// WithAPIKey sets the API key (svc_live_…), overriding SVC_API_KEY.
func WithAPIKey(key string) Option {
	return func(c *Client) { c.apiKey = key }
}

// WithBaseURL sets the server's address, such as https://arbiter.example.com,
// overriding SVC_BASE_URL. An empty string means DefaultBaseURL.
func WithBaseURL(baseURL string) Option {
	return func(c *Client) { c.baseURL = baseURL }
}

// WithHTTPClient sets the *http.Client requests go through, for a proxy,
// custom TLS or a different timeout. The default has a 30-second timeout
// per request.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.httpClient = hc }
}

// WithUserAgent sets the User-Agent header (default "arbiter-go/VERSION").
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// WithRetries sets how many times one call is retried after a 429, or after
// a 5xx on a read (default DefaultRetries). Zero turns retries off.
func WithRetries(n int) Option {
	return func(c *Client) { c.retries = max(n, 0) }
}

// WithMaxRetryWait sets the longest Retry-After the client waits out before
// retrying (default DefaultMaxRetryWait). A 429 asking for longer, or for
// longer than the context has left, is returned at once.
func WithMaxRetryWait(d time.Duration) Option {
	return func(c *Client) { c.maxRetryWait = d }
}

// New returns a client for the server at SVC_BASE_URL using the key in
// SVC_API_KEY; options given override them.
func New(opts ...Option) *Client {
	c := &Client{
		apiKey:       os.Getenv("SVC_API_KEY"),
		baseURL:      os.Getenv("SVC_BASE_URL"),
		httpClient:   &http.Client{Timeout: 30 * time.Second},
		userAgent:    "arbiter-go/" + version(),
		retries:      DefaultRetries,
		maxRetryWait: DefaultMaxRetryWait,
	}
	for _, opt := range opts {
		opt(c)
	}
	if c.baseURL == "" {
		c.baseURL = DefaultBaseURL
	}
	c.baseURL = strings.TrimRight(c.baseURL, "/")
	if c.httpClient == nil {
		c.httpClient = http.DefaultClient
	}
	return c
}

// version is the client module's version as the Go toolchain recorded it in
// the binary, or "devel" when it did not.
func version() string {
	const module = "github.com/arbiterhq/arbiter"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if info.Main.Path == module && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	for _, dep := range info.Deps {
		if dep.Path == module && dep.Version != "" {
			return dep.Version
		}
	}
	return "devel"
}

// call describes one API request.
type call struct {
	method string
	path   string // below the base URL, escaped
	auth   bool   // send the API key
	body   any    // encoded as JSON when not nil
	// answers lists statuses other than 200 whose body decodes into out
	// rather than becoming an *Error, and which are not retried.
	answers []int
	// idempotencyKey, when set, is sent as the Idempotency-Key header.
	idempotencyKey string
	// repeatable marks a POST that the server stores at most once however
	// often it is sent (its tasks carry idempotency keys), so that it may
	// be retried when its outcome is unknown: after a 5xx, a 409 or a
	// connection error.
	repeatable bool
	// noRetryConflict keeps a repeatable call from retrying a 409, which
	// for it is an answer rather than a request still being stored.
	noRetryConflict bool
}

// do sends the call, retrying as the policy allows, and decodes a successful
// answer into out.
func (c *Client) do(ctx context.Context, cl call, out any) error {
	var body []byte
	if cl.body != nil {
		var err error
		if body, err = json.Marshal(cl.body); err != nil {
			return fmt.Errorf("encoding the request: %w", err)
		}
	}
	for attempt := 0; ; attempt++ {
		status, header, b, err := c.send(ctx, cl, body)
		if err != nil {
			if !cl.repeatable || attempt >= c.retries || ctx.Err() != nil || !c.wait(ctx, backoff(attempt)) {
				return err
			}
			continue
		}
		if status == http.StatusNoContent && out == nil {
			return nil
		}
		if status == http.StatusOK {
			if err := json.Unmarshal(b, out); err != nil {
				return fmt.Errorf("%s %s answered 200 with a body that is not the expected JSON: %w", cl.method, cl.path, err)
			}
			return nil
		}
		if containsStatus(cl.answers, status) && json.Unmarshal(b, out) == nil {
			return nil
		}
		apiErr := newError(status, header, b)
		retryable := status == http.StatusTooManyRequests ||
			(status >= 500 && (cl.method == http.MethodGet || cl.repeatable)) ||
			(status == http.StatusConflict && cl.repeatable && !cl.noRetryConflict)
		if !retryable || attempt >= c.retries {
			return apiErr
		}
		wait := apiErr.RetryAfter
		if wait == 0 {
			wait = backoff(attempt)
		}
		if !c.wait(ctx, wait) {
			return apiErr
		}
	}
}

// wait waits d before a retry and reports whether to make it: not when d
// is longer than the client's longest wait or than ctx has left, nor when
// ctx ends meanwhile.
func (c *Client) wait(ctx context.Context, d time.Duration) bool {
	if d > c.maxRetryWait {
		return false
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < d {
		return false
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// send makes one HTTP exchange and reads the whole answer.
func (c *Client) send(ctx context.Context, cl call, body []byte) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, cl.method, c.baseURL+cl.path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cl.auth && c.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if cl.idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", cl.idempotencyKey)
	}
	res, err := c.httpClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading the answer to %s %s: %w", cl.method, cl.path, err)
	}
	return res.StatusCode, res.Header, b, nil
}

// backoff is the wait before retry n (from 0) when the server named none:
// 200 ms doubling, with up to 20% jitter so clients spread out.
func backoff(n int) time.Duration {
	d := 200 * time.Millisecond << min(n, 6)
	return d + rand.N(d/5+1)
}

// parseRetryAfter reads a Retry-After header: delay seconds or an HTTP date.
func parseRetryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

func containsStatus(statuses []int, status int) bool {
	for _, s := range statuses {
		if s == status {
			return true
		}
	}
	return false
}

// Error is a failure the server answered: its HTTP status and its sentence.
type Error struct {
	// StatusCode is the HTTP status, such as 404.
	StatusCode int
	// Message is the server's human-readable sentence.
	Message string
	// Code is the server's stable code for programs, such as
	// "daily_cap_exceeded" or "invalid_field" (docs/api.md lists them); ""
	// when the answer was not Arbiter's.
	Code string
	// Field, with Code "invalid_field", names the request field at fault.
	Field string
	// RequestID is the answer's X-Request-Id, to quote when reporting a
	// problem; "" for a batch item's error, whose request id is the
	// batch's.
	RequestID string
	// RetryAfter is the wait the server asked for (429 answers), or zero.
	RetryAfter time.Duration
}

// Error returns the server's sentence.
func (e *Error) Error() string { return e.Message }

// newError builds the *Error of a non-success answer. A body that is not
// Arbiter's {"error": "…", "code": "…"} (a proxy's page, say) gets the
// status text.
func newError(status int, header http.Header, body []byte) *Error {
	e := &Error{StatusCode: status, RetryAfter: parseRetryAfter(header.Get("Retry-After")), RequestID: header.Get("X-Request-Id")}
	var wire struct {
		Error string `json:"error"`
		Code  string `json:"code"`
		Field string `json:"field"`
	}
	if json.Unmarshal(body, &wire) == nil && wire.Error != "" {
		e.Message, e.Code, e.Field = wire.Error, wire.Code, wire.Field
	} else {
		e.Message = fmt.Sprintf("The server answered %d %s.", status, http.StatusText(status))
	}
	return e
}

// StatusCode returns the HTTP status of an *Error in err's chain, or 0.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// IsInvalid reports whether the server refused the request as malformed or
// out of range (400).
func IsInvalid(err error) bool { return StatusCode(err) == http.StatusBadRequest }

// IsUnauthorized reports whether the API key was missing, malformed, unknown
// or revoked (401).
func IsUnauthorized(err error) bool { return StatusCode(err) == http.StatusUnauthorized }

// IsNotFound reports whether the task is unknown or another account's (404).
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }

// IsTooLarge reports whether the request body was over the server's limit
// (413).
func IsTooLarge(err error) bool { return StatusCode(err) == http.StatusRequestEntityTooLarge }

// IsRateLimited reports whether the account's daily task cap is used up
// (429). The *Error's RetryAfter says when the cap resets.
func IsRateLimited(err error) bool { return StatusCode(err) == http.StatusTooManyRequests }

// IsConflict reports whether the server could not answer a create yet
// because another request with its idempotency key was being stored (409);
// the *Error's RetryAfter says when to try again.
func IsConflict(err error) bool { return StatusCode(err) == http.StatusConflict }

// IsUnprocessable reports whether a create's idempotency key was used for a
// different request (422); nothing was stored.
func IsUnprocessable(err error) bool { return StatusCode(err) == http.StatusUnprocessableEntity }

// CreateTask submits a task. The answer is the stored task, pending. With
// in.IdempotencyKey set, the server makes the task once however often the
// create is sent within the key's retention (24 hours by default), and the
// client retries it when its outcome is unknown; a repeat is answered with
// the task as it is by then.
func (c *Client) CreateTask(ctx context.Context, in TaskCreate) (*Task, error) {
	var t Task
	cl := call{method: http.MethodPost, path: "/v1/tasks", auth: true, body: in,
		idempotencyKey: in.IdempotencyKey, repeatable: in.IdempotencyKey != ""}
	if err := c.do(ctx, cl, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// MaxBatchTasks is the most tasks CreateTasks takes in one call.
const MaxBatchTasks = 100

// TaskResult is the outcome of one task of CreateTasks: the task, or the
// error that kept it from being created.
type TaskResult struct {
	// Task is the created task, or the one an earlier create with the same
	// IdempotencyKey made (Replayed); nil when Err is set.
	Task *Task
	// Replayed is true when Task was created earlier, by a create with the
	// same IdempotencyKey.
	Replayed bool
	// Err is an *Error with the task's status: 400 (IsInvalid), 409
	// (IsConflict), 422 (IsUnprocessable) or 429 (IsRateLimited).
	Err error
}

// CreateTasks submits up to MaxBatchTasks tasks in one request, stored in
// one transaction. The batch is not atomic: the answer has one TaskResult
// per task, in order, each a task or an error; the daily cap admits as many
// new tasks as fit. The error returned is for the request as a whole (an
// invalid or too large batch, a missing key, the server down), when no
// task was stored. Each task may carry its own IdempotencyKey; when every
// one does, the client retries the request when its outcome is unknown.
func (c *Client) CreateTasks(ctx context.Context, in []TaskCreate) ([]TaskResult, error) {
	type item struct {
		TaskCreate
		IdempotencyKey string `json:"idempotency_key,omitempty"`
	}
	body := struct {
		Tasks []item `json:"tasks"`
	}{make([]item, len(in))}
	repeatable := len(in) > 0
	for i, t := range in {
		body.Tasks[i] = item{t, t.IdempotencyKey}
		repeatable = repeatable && t.IdempotencyKey != ""
	}
	var answer struct {
		Results []struct {
			Status   int    `json:"status"`
			Task     *Task  `json:"task"`
			Replayed bool   `json:"replayed"`
			Error    string `json:"error"`
			Code     string `json:"code"`
			Field    string `json:"field"`
		} `json:"results"`
	}
	cl := call{method: http.MethodPost, path: "/v1/tasks/batch", auth: true, body: body, repeatable: repeatable}
	if err := c.do(ctx, cl, &answer); err != nil {
		return nil, err
	}
	if len(answer.Results) != len(in) {
		return nil, fmt.Errorf("POST /v1/tasks/batch answered %d results for %d tasks", len(answer.Results), len(in))
	}
	results := make([]TaskResult, len(in))
	for i, r := range answer.Results {
		if r.Status == http.StatusOK && r.Task != nil {
			results[i] = TaskResult{Task: r.Task, Replayed: r.Replayed}
			continue
		}
		msg := r.Error
		if msg == "" {
			msg = fmt.Sprintf("The server answered %d %s for this task.", r.Status, http.StatusText(r.Status))
		}
		results[i] = TaskResult{Err: &Error{StatusCode: r.Status, Message: msg, Code: r.Code, Field: r.Field}}
	}
	return results, nil
}

// GetTask reads a task of the key's account, with its attempts. An unknown
// id, or another account's, is an error for which IsNotFound is true.
func (c *Client) GetTask(ctx context.Context, id string) (*Task, error) {
	return c.getTask(ctx, id, 0)
}

// WaitOptions tune WaitTask. The zero value, like a nil *WaitOptions,
// long-polls DefaultLongPoll at a time and, against a server that answers
// without waiting, polls after 200 ms, doubling up to every 5 s.
type WaitOptions struct {
	// LongPoll is how long one request asks the server to wait for the
	// task (GET /v1/tasks/{id}?wait=N), in whole seconds up to 60 (default
	// DefaultLongPoll). It is cut to what the context has left and to the
	// HTTP client's timeout less LongPollMargin. Negative: poll with plain
	// reads.
	LongPoll time.Duration
	// PollInterval is the first wait between two reads that the server
	// answered before the task was final and before its long-poll was up
	// (default 200 ms).
	PollInterval time.Duration
	// MaxPollInterval caps the doubling wait (default 5 s).
	MaxPollInterval time.Duration
}

// Long-polling defaults; see WaitOptions.
const (
	DefaultLongPoll = 20 * time.Second
	MaxLongPoll     = 60 * time.Second
	// LongPollMargin is the part of the HTTP client's timeout a long-poll
	// leaves for the answer to arrive.
	LongPollMargin = 5 * time.Second
)

// WaitTask waits until the task is in a final state (completed, or expired
// when its deadline passed first) and returns it. It long-polls: each
// request asks the server to answer as soon as the task is final, so the
// answer arrives within moments of the decision. Against a server that
// answers at once instead (one that predates long-polling) it reads the
// task after PollInterval, doubling. A task waiting for a person may take
// minutes or days, so give ctx the deadline you can afford: when ctx ends
// first, WaitTask returns the last task it read (nil if none) with an error
// wrapping ctx's.
func (c *Client) WaitTask(ctx context.Context, id string, opts *WaitOptions) (*Task, error) {
	var o WaitOptions
	if opts != nil {
		o = *opts
	}
	longPoll := min(cmp.Or(o.LongPoll, DefaultLongPoll), MaxLongPoll)
	if c.httpClient.Timeout > 0 {
		longPoll = min(longPoll, c.httpClient.Timeout-LongPollMargin)
	}
	interval, ceiling := cmp.Or(o.PollInterval, 200*time.Millisecond), cmp.Or(o.MaxPollInterval, 5*time.Second)
	var last *Task
	for {
		wait := longPoll
		if deadline, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(deadline))
		}
		seconds := max(int(wait/time.Second), 0)
		started := time.Now()
		t, err := c.getTask(ctx, id, seconds)
		if err != nil {
			if ctx.Err() != nil {
				return last, waitError(id, last, ctx.Err())
			}
			return last, err
		}
		last = t
		if t.Final() {
			return t, nil
		}
		if seconds > 0 && time.Since(started) >= time.Duration(seconds)*time.Second {
			// The server waited the whole time: ask again at once.
			interval = cmp.Or(o.PollInterval, 200*time.Millisecond)
			continue
		}
		timer := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			timer.Stop()
			return last, waitError(id, last, ctx.Err())
		case <-timer.C:
		}
		interval = min(interval*2, ceiling)
	}
}

// getTask reads the task, asking the server to wait up to seconds for it
// to be final.
func (c *Client) getTask(ctx context.Context, id string, seconds int) (*Task, error) {
	path := "/v1/tasks/" + url.PathEscape(id)
	if seconds > 0 {
		path += "?wait=" + strconv.Itoa(seconds)
	}
	var t Task
	if err := c.do(ctx, call{method: http.MethodGet, path: path, auth: true}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

func waitError(id string, last *Task, err error) error {
	if last == nil {
		return fmt.Errorf("waiting for task %s: %w", id, err)
	}
	return fmt.Errorf("task %s is still %s: %w", id, last.Status, err)
}

// DemoTasks lists the curated demo queue. It needs no API key.
func (c *Client) DemoTasks(ctx context.Context) ([]DemoTask, error) {
	var list struct {
		Tasks []DemoTask `json:"tasks"`
	}
	if err := c.do(ctx, call{method: http.MethodGet, path: "/demo/tasks"}, &list); err != nil {
		return nil, err
	}
	return list.Tasks, nil
}

// SubmitDemoVerdict records an anonymous verdict on a demo task and returns
// the stored record; the demo task never changes. It needs no API key.
func (c *Client) SubmitDemoVerdict(ctx context.Context, in DemoVerdictCreate) (*DemoVerdict, error) {
	var v DemoVerdict
	if err := c.do(ctx, call{method: http.MethodPost, path: "/demo/verdicts", body: in}, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// Health reports whether the server's store answers and a worker is alive.
// An unhealthy server's 503 is not an error: it comes back as a Health with
// OK false and the reason. It needs no API key.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	err := c.do(ctx, call{method: http.MethodGet, path: "/healthz", answers: []int{http.StatusServiceUnavailable}}, &h)
	if err != nil {
		return nil, err
	}
	return &h, nil
}

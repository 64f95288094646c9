// Package handlers holds one http.Handler constructor per endpoint or page.
// Each one is thin: decode the request, call a service of the root package,
// encode the answer. Failures all go through Error.
package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/arbiterhq/arbiter"
)

// statusByCode maps domain error codes to HTTP status codes.
var statusByCode = map[string]int{
	arbiter.EINVALID:      http.StatusBadRequest,
	arbiter.EUNAUTHORIZED: http.StatusUnauthorized,
	arbiter.ENOTFOUND:     http.StatusNotFound,
	arbiter.ECONFLICT:     http.StatusConflict,
	arbiter.EMISMATCH:     http.StatusUnprocessableEntity,
	arbiter.ERATELIMIT:    http.StatusTooManyRequests,
	arbiter.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	arbiter.EUNAVAILABLE:  http.StatusServiceUnavailable,
	arbiter.EINTERNAL:     http.StatusInternalServerError,
}

// StatusOf returns the HTTP status for err: the status an HTTP-only error
// carries (see StatusError), else the one of its domain code.
func StatusOf(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	if s, ok := statusByCode[arbiter.ErrorCode(err)]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// statusError is a failure that only HTTP knows, such as a method a route
// does not accept: a status and the domain error that says it to people.
type statusError struct {
	status int
	err    *arbiter.Error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// StatusError returns an error answered with status and the message, for the
// few failures that have no domain code (405, for one).
func StatusError(status int, format string, args ...any) error {
	return &statusError{status: status, err: arbiter.Errorf(arbiter.EINVALID, format, args...)}
}

// codeByStatus are the API codes of the statuses only HTTP knows.
var codeByStatus = map[int]string{
	http.StatusForbidden:                   arbiter.CodeForbidden,
	http.StatusMethodNotAllowed:            arbiter.CodeMethodNotAllowed,
	http.StatusNotAcceptable:               arbiter.CodeNotAcceptable,
	http.StatusUnsupportedMediaType:        arbiter.CodeUnsupportedMediaType,
	http.StatusRequestHeaderFieldsTooLarge: arbiter.CodeHeadersTooLarge,
}

// CodeOf returns the API code answered for err (see arbiter.APICode):
// the code of the status an HTTP-only error carries, else its domain
// error's.
func CodeOf(err error) string {
	var se *statusError
	if errors.As(err, &se) {
		if c, ok := codeByStatus[se.status]; ok {
			return c
		}
		for code, status := range statusByCode {
			if status == se.status {
				return arbiter.APICode(arbiter.Errorf(code, ""))
			}
		}
	}
	return arbiter.APICode(err)
}

// ErrorBody is the JSON of every API failure: a sentence for people, a
// stable code for programs (arbiter.APICodes) and, when one request field
// is at fault, its name.
type ErrorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Field string `json:"field,omitempty"`
}

// ErrorBodyOf returns the ErrorBody answered for err.
func ErrorBodyOf(err error) ErrorBody {
	return ErrorBody{Error: arbiter.ErrorMessage(err), Code: CodeOf(err), Field: arbiter.ErrorField(err)}
}

// Error is the one way every handler and middleware answers a failure: with
// the status of err's code, as an HTML error page when the request came from
// a page (or, off the API, from a browser), else as an ErrorBody,
// {"error": "…", "code": "…"} and "field" when one field is at fault.
// Internal errors are logged once here, with the request, and answered with
// a generic sentence; an unavailable store or dependency (503) is logged
// here too, with its cause. A RetryAfter on the error becomes Retry-After.
// A failure of the server's side once the caller has left (its request's
// context canceled: it closed the connection) is no failure of the
// server's: it is logged at INFO as a cancel and answered
// StatusCallerLeft, which nobody reads.
func Error(w http.ResponseWriter, r *http.Request, err error) {
	status := StatusOf(err)
	if status >= http.StatusInternalServerError && errors.Is(r.Context().Err(), context.Canceled) {
		LoggerFromContext(r.Context()).InfoContext(r.Context(), "request canceled: the caller left",
			"method", r.Method, "path", r.URL.Path, "error", err.Error())
		w.WriteHeader(StatusCallerLeft)
		return
	}
	logFailure(r.Context(), status, err, "method", r.Method, "path", r.URL.Path)
	setRetryAfter(w, err)
	if wantsPage(r) {
		errorPage(w, r, status, err)
		return
	}
	JSON(w, status, ErrorBodyOf(err))
}

// logFailure logs, with attrs, a failure answered with status that is the
// server's to fix: an internal error, or an unavailable store or
// dependency (503) with its cause. The caller's failures are not logged.
func logFailure(ctx context.Context, status int, err error, attrs ...any) {
	switch status {
	case http.StatusInternalServerError:
		LoggerFromContext(ctx).ErrorContext(ctx, "internal error", append(attrs, "error", err.Error())...)
	case http.StatusServiceUnavailable:
		LoggerFromContext(ctx).WarnContext(ctx, "unavailable", append(attrs, "error", err.Error())...)
	}
}

// setRetryAfter sets Retry-After, in whole seconds rounded up, when err
// carries a RetryAfter.
func setRetryAfter(w http.ResponseWriter, err error) {
	var e *arbiter.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
}

// AskForKey sets WWW-Authenticate on the answer of an API request refused
// for its key (EUNAUTHORIZED): keys go in Authorization as bearer tokens.
func AskForKey(h http.Header, err error) {
	if arbiter.ErrorCode(err) == arbiter.EUNAUTHORIZED {
		h.Set("WWW-Authenticate", `Bearer realm="arbiter"`)
	}
}

// allowClient spends one request of the client's bucket in l, counting
// the client by arbiter.Client.LimitKey. When the bucket is empty it
// returns an ERATELIMIT error with msg and how long until the next request
// is allowed; when the limit fails, its error.
func allowClient(r *http.Request, l arbiter.RateLimit, msg string) error {
	ok, wait, err := l.Allow(r.Context(), ClientOf(r).LimitKey())
	switch {
	case err != nil:
		return err
	case !ok:
		return &arbiter.Error{Code: arbiter.ERATELIMIT, Message: msg, RetryAfter: wait}
	}
	return nil
}

type formatKey struct{}

// answerFormat says how a request's failures are answered; routes set it,
// and middleware outside them (the recoverer) reads what they set.
type answerFormat struct{ known, page bool }

// WithAnswerFormat returns a request whose routes can say how its failures
// are answered (see Pages and API), so that middleware wrapping the routes,
// such as a recoverer, answers the same way.
func WithAnswerFormat(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), formatKey{}, &answerFormat{}))
}

// Pages is middleware for the dashboard's and the reviewer site's routes:
// their failures are answered as HTML pages.
func Pages(next http.Handler) http.Handler { return answerAs(next, true) }

// API is middleware for the API's routes: their failures are answered as
// JSON, whatever the client accepts.
func API(next http.Handler) http.Handler { return answerAs(next, false) }

func answerAs(next http.Handler, page bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f, ok := r.Context().Value(formatKey{}).(*answerFormat); ok {
			f.known, f.page = true, page
		} else {
			r = r.WithContext(context.WithValue(r.Context(), formatKey{}, &answerFormat{known: true, page: page}))
		}
		next.ServeHTTP(w, r)
	})
}

// wantsPage reports whether a failure of r is answered as a page: always on
// the pages' routes, never on the API's, and elsewhere (an unknown route)
// when the client accepts HTML, as browsers do.
func wantsPage(r *http.Request) bool {
	if f, ok := r.Context().Value(formatKey{}).(*answerFormat); ok && f.known {
		return f.page
	}
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// JSON writes v as a JSON response with the status.
func JSON(w http.ResponseWriter, status int, v any) {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer putJSONBuffer(buf)
	status, body := encodeJSONTo(buf, status, v)
	writeJSON(w, status, body)
}

// encodeJSON is the status and body of JSON's answer, in bytes of its own.
func encodeJSON(status int, v any) (int, []byte) {
	var buf bytes.Buffer
	return encodeJSONTo(&buf, status, v)
}

// encodeJSONTo encodes JSON's answer into buf and returns the status and
// buf's bytes (or the internal error's when v cannot be encoded).
func encodeJSONTo(buf *bytes.Buffer, status int, v any) (int, []byte) {
	buf.Reset()
	if a, ok := v.(selfEncoding); ok {
		// The bytes json.Marshal would return, without its
		// reflection.
		b, err := a.AppendJSON(buf.AvailableBuffer())
		if err != nil {
			return http.StatusInternalServerError, internalErrorBody
		}
		buf.Write(append(b, '\n'))
		return status, buf.Bytes()
	}
	// Encode writes what json.Marshal returns and a newline, and nothing
	// when it fails.
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		return http.StatusInternalServerError, internalErrorBody
	}
	return status, buf.Bytes()
}

// selfEncoding is a value that appends its own JSON (arbiter.Task), the
// bytes encoding/json would make of it.
type selfEncoding interface {
	AppendJSON(b []byte) ([]byte, error)
}

// internalErrorBody answers a value that could not be encoded.
var internalErrorBody = []byte(`{"error":"Internal error.","code":"internal_error"}` + "\n")

// writeJSON writes an answer encodeJSON made.
func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// jsonContentType is the Content-Type of JSON answers, shared as the
// value Header.Set would make each time; the slice is full, so adding a
// value to it makes a new one.
var jsonContentType = []string{"application/json"}[:1:1]

// jsonBuffers keeps JSON's buffers between answers; putJSONBuffer lets the
// large ones go.
var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func putJSONBuffer(b *bytes.Buffer) {
	if b.Cap() <= 64<<10 {
		jsonBuffers.Put(b)
	}
}

// ReadBody reads a JSON request body of at most arbiter.MaxBodyBytes. A
// longer body is an ETOOLARGE error; nothing of it is used. A body sent as
// another media type than JSON is a 415 (see CheckJSONContentType).
func ReadBody(r *http.Request) ([]byte, error) {
	if err := CheckJSONContentType(r); err != nil {
		return nil, err
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, arbiter.MaxBodyBytes+1))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, arbiter.Errorf(arbiter.ETOOLARGE, "The request body is larger than %d bytes.", arbiter.MaxBodyBytes)
		}
		return nil, arbiter.Errorf(arbiter.EINVALID, "The request body could not be read.")
	}
	if len(body) > arbiter.MaxBodyBytes {
		return nil, arbiter.Errorf(arbiter.ETOOLARGE, "The request body is larger than %d bytes.", arbiter.MaxBodyBytes)
	}
	return body, nil
}

// CheckJSONContentType returns a 415 error unless r's Content-Type is
// application/json or another JSON type (…/…+json), parameters such as
// charset aside. A request without a Content-Type is taken as JSON, as
// clients that send none meant it. curl's -d sends
// application/x-www-form-urlencoded, which is not JSON: its sentence says
// what to send instead.
func CheckJSONContentType(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		return nil
	}
	return StatusError(http.StatusUnsupportedMediaType,
		"The request body must be JSON, sent as Content-Type: application/json, not %.100q (curl -d sends application/x-www-form-urlencoded: add -H \"Content-Type: application/json\").", ct)
}

type loggerKey struct{}

// NewContextWithLogger returns a context carrying the request's logger.
func NewContextWithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// NewContextWithRequestLogger returns a context carrying the request's
// logger: base with the request's id, made when first asked for, since
// most requests log nothing but their request line.
func NewContextWithRequestLogger(ctx context.Context, base *slog.Logger, requestID string) context.Context {
	return context.WithValue(ctx, loggerKey{}, &lazyLogger{base: base, requestID: requestID})
}

// lazyLogger is a request's logger, made once when first asked for.
type lazyLogger struct {
	base      *slog.Logger
	requestID string
	once      sync.Once
	logger    *slog.Logger
	// later is set when the request is parked (see AnswerLater).
	later *answerLater
}

// LoggerFromContext returns the request's logger, or slog's default.
func LoggerFromContext(ctx context.Context) *slog.Logger {
	switch l := ctx.Value(loggerKey{}).(type) {
	case *slog.Logger:
		return l
	case *lazyLogger:
		l.once.Do(func() { l.logger = l.base.With(slog.String("request_id", l.requestID)) })
		return l.logger
	}
	return slog.Default()
}

package web

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// RequestIDHeader names the request's id in the answer, and in a request
// from a trusted proxy.
const RequestIDHeader = "X-Request-Id"

// maxRequestIDLen bounds a request id taken from a proxy.
const maxRequestIDLen = 128

// requestLogger logs one line per request: its id, method, path, status,
// size and duration. Every request gets an id, answered in X-Request-Id
// and on every line logged about it: the one a trusted proxy sent (see
// validRequestID), else a new one, req_ and 24 hex digits. It never logs
// other headers, the query string or bodies, so keys and tokens stay out of
// the log.
func requestLogger(logger *slog.Logger, trusted []netip.Prefix) func(http.Handler) http.Handler {
	if logger == nil {
		logger = slog.Default()
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			id := requestIDOf(r, trusted)
			w.Header().Set(RequestIDHeader, id)
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			ctx := handlers.NewContextWithRequestLogger(r.Context(), logger, id)
			next.ServeHTTP(ww, r.WithContext(ctx))
			// A parked request is logged once it is answered.
			if handlers.IsParked(ctx) {
				method, path := r.Method, r.URL.Path
				handlers.AnswerLater(ctx, func(status, bytes int) {
					logRequest(context.Background(), logger, id, method, path, status, bytes, start)
				})
				return
			}
			logRequest(r.Context(), logger, id, r.Method, r.URL.Path, ww.Status(), ww.BytesWritten(), start)
		})
	}
}

// logRequest logs the line of a request answered with status (0: 200)
// and a body of bytes.
func logRequest(ctx context.Context, logger *slog.Logger, id, method, path string, status, bytes int, start time.Time) {
	if status == 0 {
		status = http.StatusOK
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelError
	}
	// The request's id first, where the handlers' logger puts it.
	logger.LogAttrs(ctx, level, "request",
		slog.String("request_id", id),
		slog.String("method", method),
		slog.String("path", path),
		slog.Int("status", status),
		slog.Int("bytes", bytes),
		slog.Duration("duration", time.Since(start)),
	)
}

// requestIDOf returns the id of r: the one X-Request-Id holds when the
// connection's peer is a trusted proxy and it sent one valid id, else a
// new one.
func requestIDOf(r *http.Request, trusted []netip.Prefix) string {
	if ids := r.Header.Values(RequestIDHeader); len(ids) == 1 && validRequestID(ids[0]) && isTrusted(parseIP(r.RemoteAddr), trusted) {
		return ids[0]
	}
	return arbiter.NewID("req_", 12)
}

// validRequestID reports whether id may be taken from a proxy: 1 to 128
// letters, digits and - _ . : (a UUID, a trace id), nothing a log line or
// a header could be bent by.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// MaxHeaderBytes bounds a request's header: the request line and every
// header line. A larger one is answered 431 by the route's error function
// (JSON on the API), as long as the server read it whole (see
// ServerMaxHeaderBytes).
const MaxHeaderBytes = 64 << 10

// ServerMaxHeaderBytes is the http.Server's own bound, above
// MaxHeaderBytes, so that the router sees, and answers, the headers over
// MaxHeaderBytes up to it. A header past it is refused by net/http before
// any route, with a plain-text 431.
const ServerMaxHeaderBytes = 2 * MaxHeaderBytes

// errHeadersTooLarge answers a header over MaxHeaderBytes.
var errHeadersTooLarge = handlers.StatusError(http.StatusRequestHeaderFieldsTooLarge,
	"The request's header is larger than %d bytes.", MaxHeaderBytes)

// limitHeader answers 431 to a request whose header is over
// MaxHeaderBytes, counted as net/http counts it.
func limitHeader(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4 + len("Host: \r\n") + len(r.Host)
		for name, values := range r.Header {
			for _, v := range values {
				n += len(name) + len(v) + 4
			}
		}
		if n > MaxHeaderBytes {
			w.Header().Set("Connection", "close")
			handlers.Error(w, r, errHeadersTooLarge)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RequestObserver records answered requests (metrics.Metrics implements
// it).
type RequestObserver interface {
	// ObserveRequest records a request to the route pattern the router
	// matched ("" when none did), its method, its status and how long its
	// answer took.
	ObserveRequest(route, method string, status int, d time.Duration)
}

// observeRequests tells o of every request once it is answered, by the
// route pattern chi matched, so task ids never become labels.
func observeRequests(o RequestObserver) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r)
			route := ""
			if rc := chi.RouteContext(r.Context()); rc != nil {
				route = rc.RoutePattern()
			}
			// A parked request is counted once it is answered.
			if handlers.IsParked(r.Context()) {
				method := r.Method
				handlers.AnswerLater(r.Context(), func(status, _ int) { observeRequest(o, route, method, status, start) })
				return
			}
			observeRequest(o, route, r.Method, ww.Status(), start)
		})
	}
}

// observeRequest tells o of a request answered with status (0: 200).
func observeRequest(o RequestObserver, route, method string, status int, start time.Time) {
	if status == 0 {
		status = http.StatusOK
	}
	o.ObserveRequest(route, method, status, time.Since(start))
}

// recoverer turns a panic in a handler into a logged 500, answered as the
// panicking route answers its failures (a page or JSON).
func recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = handlers.WithAnswerFormat(r)
		defer func() {
			p := recover()
			if p == nil || p == http.ErrAbortHandler {
				if p != nil {
					panic(p)
				}
				return
			}
			handlers.Error(w, r, fmt.Errorf("panic: %v\n%s", p, debug.Stack()))
		}()
		next.ServeHTTP(w, r)
	})
}

// limitBody caps every request body at n bytes; reading past it fails and
// the connection is closed after the answer.
func limitBody(n int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Body = http.MaxBytesReader(w, r.Body, n)
			next.ServeHTTP(w, r)
		})
	}
}

// bearerAuth admits requests carrying an active API key as
// "Authorization: Bearer svc_live_…" and puts the key's account in the
// request context. Anything else is answered 401, or 429 once the client
// has failed too many checks (see KeyChecker.Check).
func bearerAuth(keys *KeyChecker) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			accountID, _, err := keys.Check(r.Context(), handlers.ClientOf(r).LimitKey(), bearerToken(r))
			handlers.AskForKey(w.Header(), err)
			if err != nil {
				handlers.Error(w, r, err)
				return
			}
			if span := trace.SpanFromContext(r.Context()); span.IsRecording() {
				span.SetAttributes(attribute.String("arbiter.account_id", accountID))
			}
			next.ServeHTTP(w, r.WithContext(arbiter.NewContextWithAccountID(r.Context(), accountID)))
		})
	}
}

// bearerToken returns the token of an "Authorization: Bearer" header, or "".
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// notFound answers a route that does not exist.
func notFound(w http.ResponseWriter, r *http.Request) { handlers.Error(w, r, handlers.ErrNoPage) }

// allowMethods are the methods a 405's Allow header may list.
var allowMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// methodNotAllowed answers a known route of routes asked with another
// method, with the methods it takes in Allow (RFC 9110, 15.5.6); HEAD
// wherever GET (see middleware.GetHead).
func methodNotAllowed(routes chi.Routes) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var allowed []string
		for _, m := range allowMethods {
			if routes.Match(chi.NewRouteContext(), m, r.URL.Path) ||
				m == http.MethodHead && routes.Match(chi.NewRouteContext(), http.MethodGet, r.URL.Path) {
				allowed = append(allowed, m)
			}
		}
		refuseMethod(w, r, allowed)
	}
}

// traceRequests makes a server span of each request (telemetry), a child
// of the caller's trace when it sends a traceparent: named by the method
// and the route's pattern (/v1/tasks/{id}, never an id), with the status.
// Nothing else of the request goes on it: no query, no header, no body;
// bearerAuth adds the account. A parked request's span ends when it is
// answered.
//
// A request the sampler leaves out runs as with tracing off: its context
// carries no span, so the store starts none under it, a create keeps no
// trace context and the worker starts no span for its task
// (telemetry.StartChild). That path costs the sampler's decision and
// nothing else: the caller's headers are read only when it sent a
// traceparent, and no request or context is copied.
func traceRequests(next http.Handler) http.Handler {
	tracer := telemetry.Tracer()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if _, ok := r.Header["Traceparent"]; ok {
			ctx = telemetry.Extract(ctx, r.Header)
		}
		ctx, span := tracer.Start(ctx, r.Method, serverSpan...)
		if !span.IsRecording() {
			next.ServeHTTP(w, r)
			return
		}
		ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
		r = r.WithContext(ctx)
		next.ServeHTTP(ww, r)
		route := ""
		if rc := chi.RouteContext(ctx); rc != nil {
			route = rc.RoutePattern()
		}
		if route != "" {
			span.SetName(r.Method + " " + route)
		}
		end := func(status int) {
			if status == 0 {
				status = http.StatusOK
			}
			// One call, into one slice: each SetAttributes grows the
			// span's, which the profile showed on every request.
			attrs := [3]attribute.KeyValue{attribute.String("http.request.method", r.Method), attribute.Int("http.response.status_code", status)}
			n := 2
			if route != "" {
				attrs[2], n = attribute.String("http.route", route), 3
			}
			span.SetAttributes(attrs[:n]...)
			if status >= 500 {
				span.SetStatus(codes.Error, "")
			}
			span.End()
		}
		if handlers.IsParked(ctx) {
			handlers.AnswerLater(ctx, func(status, _ int) { end(status) })
			return
		}
		end(ww.Status())
	})
}

// serverSpan is a request span's start option, made once: a variadic
// argument built at the call escapes to the heap on every request.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// refuseMethod answers 405 with the methods the address takes in Allow.
func refuseMethod(w http.ResponseWriter, r *http.Request, allowed []string) {
	w.Header().Set("Allow", strings.Join(allowed, ", "))
	handlers.Error(w, r, handlers.StatusError(http.StatusMethodNotAllowed,
		"This address does not accept the method %s; it takes %s.", r.Method, strings.Join(allowed, ", ")))
}

// only serves an address that takes one method and whose path a pattern
// route with other methods also matches (POST /v1/tasks/batch beside GET
// /v1/tasks/{id}): any other method is answered 405 with Allow naming that
// one, instead of reaching the pattern's handler.
func only(method string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method {
			refuseMethod(w, r, []string{method})
			return
		}
		h.ServeHTTP(w, r)
	})
}

package web

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/handlers"
)

// requestLogger logs one line per request: method, path, status, size and
// duration. It never logs headers, the query string or bodies, so keys and
// tokens stay out of the log.
func requestLogger(logger *slog.Logger) func(http.Handler) http.Handler {
	if logger == nil {
		logger = slog.Default()
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			ww := middleware.NewWrapResponseWriter(w, r.ProtoMajor)
			next.ServeHTTP(ww, r.WithContext(handlers.WithLogger(r.Context(), logger)))
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			level := slog.LevelInfo
			if status >= 500 {
				level = slog.LevelError
			}
			logger.LogAttrs(r.Context(), level, "request",
				slog.String("method", r.Method),
				slog.String("path", r.URL.Path),
				slog.Int("status", status),
				slog.Int("bytes", ww.BytesWritten()),
				slog.Duration("duration", time.Since(start)),
			)
		})
	}
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
			status := ww.Status()
			if status == 0 {
				status = http.StatusOK
			}
			route := ""
			if rc := chi.RouteContext(r.Context()); rc != nil {
				route = rc.RoutePattern()
			}
			o.ObserveRequest(route, r.Method, status, time.Since(start))
		})
	}
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
			accountID, err := keys.Check(r.Context(), handlers.ClientOf(r).LimitKey(), bearerToken(r))
			if arbiter.ErrorCode(err) == arbiter.EUNAUTHORIZED {
				w.Header().Set("WWW-Authenticate", `Bearer realm="arbiter"`)
			}
			if err != nil {
				handlers.Error(w, r, err)
				return
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

// methodNotAllowed answers a known route asked with another method.
func methodNotAllowed(w http.ResponseWriter, r *http.Request) {
	handlers.Error(w, r, handlers.StatusError(http.StatusMethodNotAllowed,
		"This address does not accept the method %s.", r.Method))
}

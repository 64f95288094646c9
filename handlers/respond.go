// Package handlers holds one http.Handler constructor per endpoint or page.
// Each one is thin: decode the request, call a service of the root package,
// encode the answer. Failures all go through Error.
package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter"
)

// statusByCode maps domain error codes to HTTP status codes.
var statusByCode = map[string]int{
	arbiter.EINVALID:      http.StatusBadRequest,
	arbiter.EUNAUTHORIZED: http.StatusUnauthorized,
	arbiter.ENOTFOUND:     http.StatusNotFound,
	arbiter.ECONFLICT:     http.StatusConflict,
	arbiter.ERATELIMIT:    http.StatusTooManyRequests,
	arbiter.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	arbiter.EUNAVAILABLE:  http.StatusServiceUnavailable,
	arbiter.EINTERNAL:     http.StatusInternalServerError,
}

// StatusOf returns the HTTP status for err's domain code.
func StatusOf(err error) int {
	if s, ok := statusByCode[arbiter.ErrorCode(err)]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error answers err as {"error": "…"} with the status of its code. Internal
// errors are logged with the request and answered with a generic sentence.
func Error(w http.ResponseWriter, r *http.Request, err error) {
	status := StatusOf(err)
	if status == http.StatusInternalServerError {
		Logger(r.Context()).ErrorContext(r.Context(), "internal error",
			"method", r.Method, "path", r.URL.Path, "error", err.Error())
	}
	var e *arbiter.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	JSON(w, status, struct {
		Error string `json:"error"`
	}{arbiter.ErrorMessage(err)})
}

// JSON writes v as a JSON response with the status.
func JSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"Internal error."}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// ReadBody reads a request body of at most arbiter.MaxBodyBytes. A longer
// body is an ETOOLARGE error; nothing of it is used.
func ReadBody(r *http.Request) ([]byte, error) {
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

type loggerKey struct{}

// WithLogger returns a context carrying the request's logger.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// Logger returns the request's logger, or slog's default.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

package handlers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/handlers"
)

// healthFunc adapts a function to arbiter.HealthService.
type healthFunc func(ctx context.Context) error

func (f healthFunc) Health(ctx context.Context) error { return f(ctx) }

// getHealthz serves GET /healthz with health and returns the response and
// what was logged.
func getHealthz(health arbiter.HealthService) (*httptest.ResponseRecorder, string) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	r := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	r = r.WithContext(handlers.WithLogger(r.Context(), logger))
	w := httptest.NewRecorder()
	handlers.Healthz(health).ServeHTTP(w, r)
	return w, logs.String()
}

// TestHealthz_LogsTheCause answers an unhealthy store with its sentence and
// logs the driver's error, which the answer does not show.
func TestHealthz_LogsTheCause(t *testing.T) {
	cause := errors.New("dial tcp 10.0.0.5:5432: connect: connection refused")
	w, logs := getHealthz(healthFunc(func(context.Context) error {
		return fmt.Errorf("%w: %w", arbiter.Errorf(arbiter.EUNAVAILABLE, "The database does not answer."), cause)
	}))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"error":"The database does not answer."`) {
		t.Errorf("healthz = %d %s", w.Code, w.Body)
	}
	if strings.Contains(w.Body.String(), "10.0.0.5") {
		t.Errorf("the answer names an internal address: %s", w.Body)
	}
	if !strings.Contains(logs, "connection refused") {
		t.Errorf("the log does not hold the cause:\n%s", logs)
	}
}

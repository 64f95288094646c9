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
	"time"

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
	r = r.WithContext(handlers.NewContextWithLogger(r.Context(), logger))
	w := httptest.NewRecorder()
	handlers.Healthz(health).ServeHTTP(w, r)
	return w, logs.String()
}

// TestHealthz_LogsTheCause answers an unhealthy store with its sentence and
// logs the driver's error, which the answer does not show.
func TestHealthz_LogsTheCause(t *testing.T) {
	t.Parallel()
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

// TestHealthz_AnswersWhateverTheStoreDoes answers 503 when the store's
// health check does not return, whether it waits for its context to end or
// ignores it, as a frozen database's driver may.
func TestHealthz_AnswersWhateverTheStoreDoes(t *testing.T) {
	t.Parallel()
	stuck := make(chan struct{})
	defer close(stuck)
	for name, health := range map[string]healthFunc{
		"UntilTheContextEnds": func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
		"IgnoringTheContext":  func(context.Context) error { <-stuck; return nil },
	} {
		t.Run(name, func(t *testing.T) {
			answered := make(chan *httptest.ResponseRecorder, 1)
			go func() { w, _ := getHealthz(health); answered <- w }()
			select {
			case w := <-answered:
				if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `"error":"The store did not answer within 2s."`) {
					t.Errorf("healthz = %d %s, want 503", w.Code, w.Body)
				}
			case <-time.After(time.Minute):
				t.Fatal("healthz did not answer while the store hung")
			}
		})
	}
}

package web_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/web"
)

// TestCallerWhoLeftIsLoggedAtInfo serves an API request whose caller has
// left (its context canceled, as net/http cancels it when the connection
// closes) while its key is looked up in the store: it is logged at INFO as
// a cancel with status 499, not as an internal error at ERROR with 500.
func TestCallerWhoLeftIsLoggedAtInfo(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		var log testutil.SyncBuffer
		router := &web.Router{
			Services:   web.Services{Tasks: a.store, Keys: a.store, Health: a.store, Watcher: a.store},
			KeyChecker: web.NewKeyChecker(a.store, nil), // nothing cached: the key is looked up
			Logger:     slog.New(slog.NewTextHandler(&log, nil)),
		}
		key := a.newKey("a@example.com")
		left, leave := context.WithCancel(ctx)
		leave()
		req := httptest.NewRequestWithContext(left, http.MethodGet, "/v1/tasks", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		rec := httptest.NewRecorder()
		router.Routes().ServeHTTP(rec, req)

		lines := log.String()
		if rec.Code != 499 || strings.Contains(lines, "level=ERROR") || strings.Contains(lines, "internal error") {
			t.Fatalf("a caller who left: %d, logged\n%s\nwant 499 and nothing at ERROR", rec.Code, lines)
		}
		if !strings.Contains(lines, `level=INFO msg="request canceled: the caller left"`) ||
			!strings.Contains(lines, "level=INFO msg=request") || !strings.Contains(lines, "status=499") {
			t.Fatalf("a caller who left is not logged as a cancel at INFO:\n%s", lines)
		}
	})
}

package web

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRecoverer_PanicIsA500JSON(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := requestLogger(logger, nil)(recoverer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	})))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/tasks/x?token=sekrit", nil)
	req.Header.Set("Authorization", "Bearer svc_live_0123456789abcdef0123456789ab")
	h.ServeHTTP(rec, req)

	var body map[string]string
	if rec.Code != 500 || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body["error"] == "" {
		t.Fatalf("panic answered %d %s, want 500 JSON", rec.Code, rec.Body)
	}
	if strings.Contains(body["error"], "boom") {
		t.Errorf("the panic value leaked to the caller: %q", body["error"])
	}
	if !strings.Contains(logs.String(), "boom") || !strings.Contains(logs.String(), "status=500") {
		t.Errorf("the panic was not logged:\n%s", logs.String())
	}
	for _, secret := range []string{"svc_live_", "sekrit"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the log holds %q:\n%s", secret, logs.String())
		}
	}
}

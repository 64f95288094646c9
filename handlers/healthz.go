package handlers

import (
	"net/http"

	"github.com/arbiterhq/arbiter"
)

// Healthz handles GET /healthz: {"ok": true} when the store answers and a
// worker's heartbeat is fresh, else 503 {"ok": false, "error": "…"}.
func Healthz(health arbiter.HealthService) http.Handler {
	type response struct {
		OK    bool   `json:"ok"`
		Error string `json:"error,omitempty"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if err := health.Health(r.Context()); err != nil {
			Logger(r.Context()).WarnContext(r.Context(), "unhealthy", "error", err.Error())
			JSON(w, http.StatusServiceUnavailable, response{OK: false, Error: arbiter.ErrorMessage(err)})
			return
		}
		JSON(w, http.StatusOK, response{OK: true})
	})
}

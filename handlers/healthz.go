package handlers

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter"
)

// HealthzTimeout bounds /healthz: a store that has not answered by then is
// unhealthy, whatever it is doing.
const HealthzTimeout = 2 * time.Second

// Healthz handles GET /healthz: {"ok": true} when the store answers, its
// writes do not fail and a worker's heartbeat is fresh, else 503
// {"ok": false, "error": "…"}. It answers within HealthzTimeout even when
// the store call does not return.
func Healthz(health arbiter.HealthService) http.Handler {
	type response struct {
		OK    bool   `json:"ok"`
		Error string `json:"error,omitempty"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		ctx, cancel := context.WithTimeout(r.Context(), HealthzTimeout)
		defer cancel()
		checked := make(chan error, 1) // the check may outlive the answer
		go func() { checked <- health.Health(ctx) }()
		var err error
		select {
		case err = <-checked:
		case <-ctx.Done():
		}
		if ctx.Err() != nil && arbiter.ErrorCode(err) != arbiter.EUNAVAILABLE {
			late := arbiter.Errorf(arbiter.EUNAVAILABLE, "The store did not answer within %s.", HealthzTimeout)
			if err != nil {
				err = fmt.Errorf("%w: %w", late, err)
			} else {
				err = late
			}
		}
		if err != nil {
			LoggerFromContext(r.Context()).WarnContext(r.Context(), "unhealthy", "error", err.Error())
			JSON(w, http.StatusServiceUnavailable, response{OK: false, Error: arbiter.ErrorMessage(err)})
			return
		}
		JSON(w, http.StatusOK, response{OK: true})
	})
}

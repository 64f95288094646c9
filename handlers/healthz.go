package handlers

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/arbiterhq/arbiter"
)

// HealthzTimeout bounds /healthz and /readyz: a store that has not
// answered by then is unhealthy, whatever it is doing.
const HealthzTimeout = 2 * time.Second

// Healthz handles GET /healthz: {"ok": true} when the store answers, its
// writes do not fail and a worker's heartbeat is fresh, else 503
// {"ok": false, "error": "…"}. It answers within HealthzTimeout even when
// the store call does not return.
func Healthz(health arbiter.HealthService) http.Handler {
	return probe("unhealthy", func(ctx context.Context) error { return health.Health(ctx) })
}

// Readyz handles GET /readyz, Kubernetes' readiness probe: {"ok": true}
// when this process should be sent traffic (see arbiter.ReadinessService),
// else 503 {"ok": false, "error": "…"}, within HealthzTimeout.
func Readyz(ready arbiter.ReadinessService) http.Handler {
	return probe("not ready", func(ctx context.Context) error { return ready.Ready(ctx) })
}

// Livez handles GET /livez, Kubernetes' liveness probe: {"ok": true}
// whenever the process can answer at all. It asks nothing of the store,
// so that a database outage restarts no replica.
func Livez() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		JSON(w, http.StatusOK, probeResponse{OK: true})
	})
}

// probeResponse is the answer of /healthz, /readyz and /livez.
type probeResponse struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// probe answers check's outcome within HealthzTimeout, logging a failure
// under msg.
func probe(msg string, check func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		ctx, cancel := context.WithTimeout(r.Context(), HealthzTimeout)
		defer cancel()
		checked := make(chan error, 1) // the check may outlive the answer
		go func() { checked <- check(ctx) }()
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
			LoggerFromContext(r.Context()).WarnContext(r.Context(), msg, "error", err.Error())
			JSON(w, http.StatusServiceUnavailable, probeResponse{OK: false, Error: arbiter.ErrorMessage(err)})
			return
		}
		JSON(w, http.StatusOK, probeResponse{OK: true})
	})
}

package arbiter

import "context"

// HealthService reports whether the store answers and a worker is alive.
type HealthService interface {
	// Health returns nil when healthy, else EUNAVAILABLE with the reason.
	Health(ctx context.Context) error
}

// ReadinessService reports whether a process should be sent traffic now:
// what a load balancer or Kubernetes' readiness probe asks (/readyz),
// where HealthService answers for the whole service (/healthz).
type ReadinessService interface {
	// Ready returns nil when ready, else EUNAVAILABLE with the reason.
	Ready(ctx context.Context) error
}

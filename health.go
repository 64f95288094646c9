package arbiter

import "context"

// HealthService reports whether the store answers and a worker is alive.
type HealthService interface {
	// Health returns nil when healthy, else EUNAVAILABLE with the reason.
	Health(ctx context.Context) error
}

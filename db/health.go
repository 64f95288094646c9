package db

import (
	"context"
	"fmt"
	"time"

	"github.com/arbiterhq/arbiter"
)

var _ arbiter.HealthService = (*DB)(nil)

// HeartbeatMaxAge is how old the newest worker heartbeat may be for the
// service to count as healthy.
const HeartbeatMaxAge = 15 * time.Second

// Heartbeat records that the worker workerID is alive now.
func (d *DB) Heartbeat(ctx context.Context, workerID string) error {
	_, err := d.db.ExecContext(ctx, d.rebind(`INSERT INTO workers (id, heartbeat_at) VALUES (?, ?)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`), workerID, int64(d.nowMS()))
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// RemoveWorker forgets a worker that shut down cleanly.
func (d *DB) RemoveWorker(ctx context.Context, workerID string) error {
	if _, err := d.db.ExecContext(ctx, d.rebind(`DELETE FROM workers WHERE id = ?`), workerID); err != nil {
		return fmt.Errorf("remove worker: %w", err)
	}
	return nil
}

// Health returns nil when the store answers and some worker, in this process
// or another, beat within HeartbeatMaxAge; EUNAVAILABLE otherwise.
func (d *DB) Health(ctx context.Context) error {
	var last *int64
	if err := d.db.QueryRowContext(ctx, `SELECT MAX(heartbeat_at) FROM workers`).Scan(&last); err != nil {
		return fmt.Errorf("%w: %w", arbiter.Errorf(arbiter.EUNAVAILABLE, "The database does not answer."), err)
	}
	if last == nil {
		return arbiter.Errorf(arbiter.EUNAVAILABLE, "No worker is running.")
	}
	if age := d.now().Sub(time.UnixMilli(*last)); age > HeartbeatMaxAge {
		return arbiter.Errorf(arbiter.EUNAVAILABLE, "The worker has not reported for %s.", age.Round(time.Second))
	}
	return nil
}

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
func (d *DB) Heartbeat(ctx context.Context, workerID string) (err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	_, err = d.db.ExecContext(ctx, d.rebind(`INSERT INTO workers (id, heartbeat_at) VALUES (?, ?)
		ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`), workerID, int64(d.nowMS()))
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	return nil
}

// RemoveWorker forgets a worker that shut down cleanly.
func (d *DB) RemoveWorker(ctx context.Context, workerID string) (err error) {
	ctx, end := d.begin(ctx)
	defer end(&err)
	if _, err := d.db.ExecContext(ctx, d.rebind(`DELETE FROM workers WHERE id = ?`), workerID); err != nil {
		return fmt.Errorf("remove worker: %w", err)
	}
	return nil
}

// Health returns nil when the store answers, its writes do not fail (not
// the last three in a row, within the last 30 seconds), and some worker, in
// this process or another, beat within HeartbeatMaxAge; EUNAVAILABLE
// otherwise.
func (d *DB) Health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	var last *int64
	if err := d.db.QueryRowContext(ctx, `SELECT MAX(heartbeat_at) FROM workers`).Scan(&last); err != nil {
		return fmt.Errorf("%w: %w", arbiter.Errorf(arbiter.EUNAVAILABLE, "The database does not answer."), err)
	}
	if failed, err := d.writes.refused(d.now()); err != nil {
		return fmt.Errorf("%w: %w", arbiter.Errorf(arbiter.EUNAVAILABLE, "The database refuses writes: the last %d failed.", failed), err)
	}
	if last == nil {
		return arbiter.Errorf(arbiter.EUNAVAILABLE, "No worker is running.")
	}
	if age := d.now().Sub(time.UnixMilli(*last)); age > HeartbeatMaxAge {
		return arbiter.Errorf(arbiter.EUNAVAILABLE, "The worker has not reported for %s.", age.Round(time.Second))
	}
	return nil
}

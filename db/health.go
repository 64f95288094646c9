package db

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
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
	d.health.forget()
	return nil
}

// HealthyFor is how long Health trusts a look at the store that found it
// healthy: /healthz hit many times a second costs at most one store query a
// second, and a store that failed since is seen within a second. A look
// that found it unhealthy is not kept: the next call looks again, so
// recovery shows at once.
const HealthyFor = time.Second

// Health returns nil when the store answers, its writes do not fail (not
// the last three in a row, within the last 30 seconds), and some worker, in
// this process or another, beat within HeartbeatMaxAge; EUNAVAILABLE
// otherwise. Concurrent calls share one look at the store (see HealthyFor).
func (d *DB) Health(ctx context.Context) error {
	if failed, err := d.writes.refused(d.now()); err != nil {
		return fmt.Errorf("%w: %w", arbiter.Errorf(arbiter.EUNAVAILABLE, "The database refuses writes: the last %d failed.", failed), err)
	}
	return d.health.do(ctx, d.now, d.lookHealthy)
}

// lookHealthy reads the newest worker heartbeat: nil when the store answers
// and it is fresh.
func (d *DB) lookHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	d.health.looks.Add(1)
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

// healthCheck runs one look at a time for all callers and keeps a healthy
// outcome for HealthyFor.
type healthCheck struct {
	mu       sync.Mutex
	okUntil  time.Time    // a healthy look stands until then
	inFlight *healthLook  // the look running, nil when none
	looks    atomic.Int64 // looks at the store, for tests
}

// healthLook is one look at the store; err is set before done closes.
type healthLook struct {
	done chan struct{}
	err  error
}

// do returns the outcome of a look at the store: a healthy one younger than
// HealthyFor, the one running, or a new one. A look runs detached from the
// callers, bounded by its own timeout, so that a caller who gives up does
// not fail the others; the caller stops waiting when ctx ends.
func (h *healthCheck) do(ctx context.Context, now arbiter.Clock, look func(context.Context) error) error {
	h.mu.Lock()
	if now().Before(h.okUntil) {
		h.mu.Unlock()
		return nil
	}
	l := h.inFlight
	if l == nil {
		l = &healthLook{done: make(chan struct{})}
		h.inFlight = l
		go func() {
			l.err = look(context.WithoutCancel(ctx))
			h.mu.Lock()
			h.inFlight = nil
			if l.err == nil {
				h.okUntil = now().Add(HealthyFor)
			}
			h.mu.Unlock()
			close(l.done)
		}()
	}
	h.mu.Unlock()
	select {
	case <-l.done:
		return l.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// forget drops a healthy outcome kept, after a change that may end it.
func (h *healthCheck) forget() {
	h.mu.Lock()
	h.okUntil = time.Time{}
	h.mu.Unlock()
}

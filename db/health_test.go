package db_test

import (
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestHealthService_SharesALook answers many concurrent health checks with
// one look at the store, keeps a healthy answer for HealthyFor and no
// longer, looks again on every call while the store is unhealthy, so that
// it is healthy as soon as the worker beats again, and drops a healthy
// answer kept when the worker stops.
func TestHealthService_SharesALook(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		if err := d.Heartbeat(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		looks := d.HealthLooks()
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				if err := d.Health(ctx); err != nil {
					t.Errorf("healthy store: %v", err)
				}
			})
		}
		wg.Wait()
		if got := d.HealthLooks() - looks; got != 1 {
			t.Errorf("32 concurrent checks looked at the store %d times, want once", got)
		}
		c.Add(db.HealthyFor - time.Millisecond)
		if err := d.Health(ctx); err != nil || d.HealthLooks()-looks != 1 {
			t.Errorf("Health within HealthyFor = %v after %d looks, want the kept answer", err, d.HealthLooks()-looks)
		}
		c.Add(time.Millisecond)
		if err := d.Health(ctx); err != nil || d.HealthLooks()-looks != 2 {
			t.Errorf("Health after HealthyFor = %v after %d looks, want a new look", err, d.HealthLooks()-looks)
		}

		c.Add(db.HeartbeatMaxAge + time.Second)
		for i := range 2 {
			wantCode(t, d.Health(ctx), arbiter.EUNAVAILABLE)
			if got := d.HealthLooks() - looks; got != int64(3+i) {
				t.Errorf("unhealthy check %d: %d looks, want %d", i+1, got, 3+i)
			}
		}
		if err := d.Heartbeat(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		if err := d.Health(ctx); err != nil {
			t.Errorf("Health right after the worker beat again: %v", err)
		}
		if err := d.RemoveWorker(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		wantCode(t, d.Health(ctx), arbiter.EUNAVAILABLE)
	})
}

func TestHealthService(t *testing.T) {
	t.Parallel()
	now := time.Now()
	clock := func() time.Time { return now }
	dbtest.Each(t, db.Options{Now: clock}, func(t *testing.T, d *db.DB) {
		wantCode(t, d.Health(ctx), arbiter.EUNAVAILABLE)
		if err := d.Heartbeat(ctx, "w1"); err != nil {
			t.Fatal(err)
		}
		if err := d.Health(ctx); err != nil {
			t.Fatalf("fresh heartbeat: %v", err)
		}
		now = now.Add(db.HeartbeatMaxAge + time.Second)
		wantCode(t, d.Health(ctx), arbiter.EUNAVAILABLE)
		now = time.Now()
	})
}

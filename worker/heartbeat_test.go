package worker_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/worker"
)

// refusingHeartbeats passes heartbeats to the store unless told to refuse
// them, as a store on a full disk does.
type refusingHeartbeats struct {
	store  *db.DB
	refuse atomic.Bool
	beats  atomic.Int64
}

func (h *refusingHeartbeats) Heartbeat(ctx context.Context, workerID string) error {
	h.beats.Add(1)
	if h.refuse.Load() {
		return errors.New("disk full")
	}
	return h.store.Heartbeat(ctx, workerID)
}

func (h *refusingHeartbeats) RemoveWorker(ctx context.Context, workerID string) error {
	return h.store.RemoveWorker(ctx, workerID)
}

// TestWorker_HeartbeatRecoversWithTheStore refuses the worker's heartbeats
// until one has failed and the worker is reported missing, then lets them
// through: the worker tries a failed beat again after HeartbeatRetry, not
// after its interval, so the store is healthy again as soon as it takes
// writes (issue 26: /healthz healthy 4 s after a full disk was freed).
func TestWorker_HeartbeatRecoversWithTheStore(t *testing.T) {
	// Not parallel: the store must be healthy within half a heartbeat
	// interval.
	const interval = 4 * time.Second
	var offset atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	dbtest.Each(t, db.Options{Now: now}, func(t *testing.T, store *db.DB) {
		beats := &refusingHeartbeats{store: store}
		beats.refuse.Store(true)
		var logs testutil.SyncBuffer
		start(t, store, answer("approve", 1), func(c *worker.Config) {
			c.Health, c.Heartbeat = beats, interval
			c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		})
		offset.Add(int64(db.HeartbeatMaxAge + time.Second))
		// The first beat, at start, failed; wait for the next one to.
		for deadline := time.Now().Add(30 * time.Second); beats.beats.Load() < 2; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("no beat after the first")
			}
		}
		if err := store.Health(ctx); arbiter.ErrorCode(err) != arbiter.EUNAVAILABLE {
			t.Fatalf("Health with the heartbeats refused = %v, want unavailable", err)
		}

		beats.refuse.Store(false)
		freed := time.Now()
		waitHealth(t, store, func(err error) bool { return err == nil })
		took := time.Since(freed)
		t.Logf("healthy %s after the heartbeats were let through", took.Round(time.Millisecond))
		if took >= interval/2 {
			t.Errorf("healthy %s after the store took writes again, want well within the heartbeat interval (%s)", took, interval)
		}
		// A run of failed beats is logged once, and its end.
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(logs.String(), `msg="heartbeat stored again"`); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the end of the failed beats is not logged:\n%s", logs.String())
			}
		}
		if n := strings.Count(logs.String(), "msg=heartbeat "); n != 1 {
			t.Errorf("the failed beats are logged %d times, want once:\n%s", n, logs.String())
		}
	})
}

// waitHealth polls the store's health until ok holds; the bound only ends a
// test whose state never comes.
func waitHealth(t *testing.T, store *db.DB, ok func(error) bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		err := store.Health(ctx)
		if ok(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store's health did not come: %v", err)
		}
	}
}

package db

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arbiterhq/arbiter"
)

// A calibration report reads up to MaxCalibrationPairs pairs, ~80 ms of the
// store's time at the cap, and anyone with a key or a session may ask for
// it as often as they like: eight callers at once slowed another account's
// reads from ~2 ms to 50–125 ms. So its data is kept, per account and
// filter, for CalibrationFor; callers asking for data being read share the
// read; and an account's reads take turns, one at a time, so filters that
// differ cannot run many at once either.
const (
	// CalibrationFor is how long a calibration report's data is kept: a
	// report is at most this old (its ComputedAt says how old).
	CalibrationFor = 15 * time.Second
	// maxCachedCalibrations bounds the reports kept (a few KiB each, up
	// to ~20 KiB with every bucket and cell).
	maxCachedCalibrations = 256
)

// calibrationKey names the pairs a report reads: the account and the
// filter, less the target error rate, which the data does not depend on.
type calibrationKey struct {
	accountID, taskType, source, model, version, verifier string
	after, before                                         arbiter.Timestamp
	hasAfter, hasBefore                                   bool
}

func calibrationKeyOf(accountID string, f arbiter.CalibrationFilter) calibrationKey {
	k := calibrationKey{accountID: accountID, taskType: f.TaskType, source: f.Source, model: f.Model, version: f.Version,
		verifier: f.Verifier}
	if f.CreatedAfter != nil {
		k.after, k.hasAfter = *f.CreatedAfter, true
	}
	if f.CreatedBefore != nil {
		k.before, k.hasBefore = *f.CreatedBefore, true
	}
	return k
}

// calibrationRead is one read of a report's data; data and err are set
// before done closes, until once it is kept.
type calibrationRead struct {
	done  chan struct{}
	data  arbiter.CalibrationData
	err   error
	until time.Time
}

// calibrationCache keeps calibration data and runs its reads (see
// CalibrationFor).
type calibrationCache struct {
	mu    sync.Mutex
	reads map[calibrationKey]*calibrationRead
	// turns lets one read of an account's data run at a time.
	turns accountTurns
	// computed counts the reads that went to the store, running those
	// running now and busiest the most that ever ran at once, for tests.
	computed, running, busiest atomic.Int64
}

// get returns the data of key: kept, being read, or read now by compute
// in the account's turn. The read runs detached from the caller, so that a
// caller who gives up does not fail the others who share it; the caller
// stops waiting when ctx ends.
func (c *calibrationCache) get(ctx context.Context, key calibrationKey, now arbiter.Clock, wait time.Duration,
	compute func(context.Context) (arbiter.CalibrationData, error)) (arbiter.CalibrationData, error) {
	c.mu.Lock()
	r := c.reads[key]
	if r != nil {
		select {
		case <-r.done:
			if r.err != nil || !now().Before(r.until) {
				r = nil
			}
		default:
		}
	}
	if r == nil {
		r = &calibrationRead{done: make(chan struct{})}
		c.keep(key, r, now())
		go func() {
			r.data, r.err = c.inTurn(ctx, key.accountID, wait, compute)
			c.mu.Lock()
			if r.err != nil {
				if c.reads[key] == r {
					delete(c.reads, key)
				}
			} else {
				r.until = now().Add(CalibrationFor)
			}
			c.mu.Unlock()
			close(r.done)
		}()
	}
	c.mu.Unlock()
	select {
	case <-r.done:
		return r.data, r.err
	case <-ctx.Done():
		return arbiter.CalibrationData{}, ctx.Err()
	}
}

// inTurn waits at most wait for the account's turn and runs compute in it.
func (c *calibrationCache) inTurn(ctx context.Context, accountID string, wait time.Duration,
	compute func(context.Context) (arbiter.CalibrationData, error)) (arbiter.CalibrationData, error) {
	waiting, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
	defer cancel()
	end, err := c.turns.take(waiting, accountID)
	if err != nil {
		return arbiter.CalibrationData{}, &arbiter.Error{Code: arbiter.EUNAVAILABLE, RetryAfter: wait,
			Message: "Other calibration reports of this account are being computed; try again shortly."}
	}
	defer end()
	c.computed.Add(1)
	n := c.running.Add(1)
	defer c.running.Add(-1)
	for {
		if b := c.busiest.Load(); n <= b || c.busiest.CompareAndSwap(b, n) {
			break
		}
	}
	return compute(context.WithoutCancel(ctx))
}

// keep stores r under key, first making room when maxCachedCalibrations
// are kept: reads kept past their time go, then, if that was not enough,
// any finished one. Called with mu held.
func (c *calibrationCache) keep(key calibrationKey, r *calibrationRead, now time.Time) {
	if c.reads == nil {
		c.reads = map[calibrationKey]*calibrationRead{}
	}
	for _, expiredOnly := range []bool{true, false} {
		for k, old := range c.reads {
			if len(c.reads) < maxCachedCalibrations {
				break
			}
			select {
			case <-old.done:
				if !expiredOnly || !now.Before(old.until) {
					delete(c.reads, k)
				}
			default:
			}
		}
	}
	c.reads[key] = r
}

// forget drops the data kept for the account, after a change a report
// must show at once (the demo's history stored).
func (c *calibrationCache) forget(accountID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, r := range c.reads {
		if k.accountID == accountID {
			select {
			case <-r.done:
				delete(c.reads, k)
			default:
			}
		}
	}
}

package main

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// gcPercent is the garbage collector's target when GOGC is not set. The
// live heap of an API server is a few megabytes, so Go's default of 100
// collects every few megabytes of requests; 400 spends far less CPU on
// collection for tens of megabytes more memory (docs/benchmarks.md).
const gcPercent = 400

// gcHeadroom bounds the garbage let grow between two collections once the
// live heap is large: 10,000 long-polls hold ~180 MB live, and 400% of
// that would let the heap reach 900 MB. tuneGC lowers the target so that
// the heap grows by at most this much, down to minGCPercent. 64 MB held
// 10,000 waiters at 301-306 MB (RSS), 32 MB at 295-296 MB.
const (
	gcHeadroom   = 32 << 20
	minGCPercent = 25
)

// gcTuneEvery is how often tuneGC looks at the live heap.
const gcTuneEvery = 500 * time.Millisecond

// gcPercentFor returns the target for a live heap of live bytes:
// gcPercent while that lets the heap grow by at most gcHeadroom, less
// (in steps of 5, at least minGCPercent) beyond.
func gcPercentFor(live uint64) int {
	if live == 0 || live*gcPercent/100 <= gcHeadroom {
		return gcPercent
	}
	p := int(gcHeadroom * 100 / live)
	return max(minGCPercent, p-p%5)
}

// tuneGC keeps the collector's target at gcPercentFor the live heap until
// ctx ends; a process started with GOGC set is left alone (read from the
// process's environment, as main does: it is Go's setting, not the
// server's).
func tuneGC(ctx context.Context) {
	if os.Getenv("GOGC") != "" {
		return
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	current := gcPercent
	tick := time.NewTicker(gcTuneEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		if p := gcPercentFor(sample[0].Value.Uint64()); p != current {
			debug.SetGCPercent(p)
			current = p
		}
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// The cascade phase (-phases=cascade) measures what a cascade of three
// verifiers costs the worker over one, without any provider's latency:
// every verifier is a rules backend, which answers at once. Both runs
// decide the same -cascade-tasks pending tasks (threshold 0.85) at the
// same ARBITER_WORKERS, each on a fresh database:
//
//   - one verifier: `large` answers approve at 0.99 and decides each task
//     with one call;
//   - a cascade of three: `rules` and `small` answer at 0.5, below the
//     threshold, and pass each task on; `large` then decides it — three
//     claims and three recorded attempts a task.
//
// The overhead is the difference of the two runs' wall times over the
// tasks: the time the cascade adds to a task's way through the worker
// (its extra claims, attempts and policy reads), with the worker's
// concurrency as it runs. Target: under 1 ms a task.

// cascadeTarget is the overhead a task the cascade phase holds to.
const cascadeTarget = time.Millisecond

// cascadeFiles are the verifiers files of the two runs: one verifier, and
// the cascade of three, each rules file beside them.
var cascadeFiles = map[string]string{
	"one": "verifiers:\n  - {name: large, backend: rules, rules_file: large.txt}\ncascade: [large]\n",
	"three": "verifiers:\n  - {name: rules, backend: rules, rules_file: low.txt}\n  - {name: small, backend: rules, rules_file: low.txt}\n" +
		"  - {name: large, backend: rules, rules_file: large.txt}\ncascade: [rules, small, large]\n",
}

// cascadeResult is what the cascade phase measured.
type cascadeResult struct {
	tasks         int
	one, three    result
	overheadPerOp time.Duration
}

// measureCascade runs the worker over the same tasks with one verifier,
// then with the cascade of three, and keeps the overhead.
func (b *bench) measureCascade(ctx context.Context) error {
	// A phase before may have sealed secrets (the chat phases) that a
	// server started without their key refuses to start over.
	if err := b.resetDatabase(ctx); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "arbiter-bench-cascade")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for name, body := range map[string]string{"large.txt": "approve 0.99 true\n", "low.txt": "approve 0.5 true\n",
		"one.yaml": cascadeFiles["one"], "three.yaml": cascadeFiles["three"]} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return err
		}
	}
	one, err := b.timeWorker(ctx, "worker (1 verifier)", b.cascadeTasks, b.workers, "ARBITER_VERIFIERS="+filepath.Join(dir, "one.yaml"))
	if err != nil {
		return err
	}
	three, err := b.timeWorker(ctx, "worker (cascade of 3)", b.cascadeTasks, b.workers, "ARBITER_VERIFIERS="+filepath.Join(dir, "three.yaml"))
	if err != nil {
		return err
	}
	b.results = append(b.results, one, three)
	b.cascade = &cascadeResult{tasks: b.cascadeTasks, one: one, three: three,
		overheadPerOp: (three.elapsed - one.elapsed) / time.Duration(b.cascadeTasks)}
	return nil
}

// printCascade writes the cascade phase's figure against its target.
func printCascade(w io.Writer, r *cascadeResult) {
	if r == nil {
		return
	}
	per := float64(r.overheadPerOp.Microseconds()) / 1000
	cpu := func(of func(cpuUse) time.Duration) int64 {
		return (of(r.three.cpu) - of(r.one.cpu)).Microseconds() / int64(r.tasks)
	}
	fmt.Fprintf(w, "%-22s %s ms a task over one verifier (%.0f vs %.0f tasks/s, %s tasks; CPU +%d µs worker, +%d µs Postgres a task) (target < 1 ms) %s\n",
		"cascade (3 verifiers)", strconv.FormatFloat(per, 'f', 3, 64), r.three.perSec, r.one.perSec, strconv.Itoa(r.tasks),
		cpu(func(c cpuUse) time.Duration { return c.server }), cpu(func(c cpuUse) time.Duration { return c.postgres }),
		verdict(r.overheadPerOp < cascadeTarget))
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"time"
)

// riverOutcome is the line bin/river-bench prints at the end.
type riverOutcome struct {
	Jobs       int     `json:"jobs"`
	Seconds    float64 `json:"seconds"`
	PerSec     float64 `json:"per_sec"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

// measureQueue runs the queue comparison: River works queueJobs no-op jobs
// with its own benchmark's settings (bin/river-bench, its own module),
// then as many no-op jobs whose args carry the bench's task (taskBody:
// the prompt, context and verdicts an Arbiter task's row holds, where
// River's benchmark jobs carry a number), then `arbiter worker` decides as
// many pending tasks with the rules backend, on the same Postgres, one
// after the other. The target is against the first; the second tells how
// much of the difference is the bytes each row carries.
func (b *bench) measureQueue(ctx context.Context) error {
	for _, run := range []struct {
		name string
		args []string
	}{
		{"River (no-op)", nil},
		{"River (task args)", []string{"-args", string(taskBody)}},
	} {
		r, err := b.runRiver(ctx, run.name, run.args...)
		if err != nil {
			return err
		}
		b.results = append(b.results, r)
	}
	r, err := b.timeWorker(ctx, "worker (vs River)", b.queueJobs, b.queueWorkers)
	if err != nil {
		return err
	}
	b.results = append(b.results, r)
	return nil
}

// runRiver runs bin/river-bench with args on a fresh database and returns
// its outcome as the result name.
func (b *bench) runRiver(ctx context.Context, name string, args ...string) (result, error) {
	riverURL, err := withDatabase(b.databaseURL, "_river")
	if err != nil {
		return result{}, err
	}
	if err := recreateDatabase(ctx, riverURL); err != nil {
		return result{}, err
	}
	b.logf("%s: %d jobs through River's own client (%s)", name, b.queueJobs, b.riverBin)
	cmd := exec.CommandContext(ctx, b.riverBin, append([]string{"-database-url", riverURL, "-jobs", fmt.Sprint(b.queueJobs)}, args...)...)
	cmd.Stderr = b.log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	if err := cmd.Start(); err != nil {
		return result{}, fmt.Errorf("%s: %w (make bench builds it)", b.riverBin, err)
	}
	var before cpuUse
	var outcome riverOutcome
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		line := lines.Text()
		switch {
		case line == "working":
			before = b.cpuNow()
		case strings.HasPrefix(line, "{"):
			if err := json.Unmarshal([]byte(line), &outcome); err != nil {
				return result{}, fmt.Errorf("river-bench: %w", err)
			}
		}
	}
	after := b.cpuNow()
	if err := cmd.Wait(); err != nil {
		return result{}, fmt.Errorf("river-bench: %w", err)
	}
	if outcome.Jobs == 0 {
		return result{}, fmt.Errorf("river-bench printed no outcome")
	}
	cpu := after.minus(before)
	cpu.generator, cpu.server = 0, time.Duration(outcome.CPUSeconds*float64(time.Second))
	return result{name: name, ops: int64(outcome.Jobs), unitName: "jobs/s",
		elapsed: time.Duration(outcome.Seconds * float64(time.Second)), perSec: outcome.PerSec, cpu: cpu}, nil
}

// withDatabase returns databaseURL naming the database whose name is
// databaseURL's followed by suffix.
func withDatabase(databaseURL, suffix string) (string, error) {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return "", err
	}
	u.Path += suffix
	return u.String(), nil
}

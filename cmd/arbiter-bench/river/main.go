// Command river-bench is the River side of arbiter-bench's queue
// comparison: it inserts -jobs jobs into River (github.com/riverqueue/river
// with its pgx driver) on a fresh database and works them with a no-op
// worker through River's own client, with the settings of River's own
// benchmark (cmd/river/riverbench: FetchCooldown 2 ms, FetchPollInterval
// 20 ms, MaxWorkers 2,000). Jobs are counted as River's benchmark counts
// them, through the client's completion events. With -args each job also
// carries that JSON value in its args, so that River's rows hold the bytes
// an Arbiter task's row holds.
//
// It is its own Go module so that River never enters the arbiter binary's
// dependencies; arbiter-bench runs it. On stdout it prints "working" when
// the client starts, then one JSON line with the outcome.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "river-bench:", err)
		os.Exit(1)
	}
}

// outcome is the JSON line printed at the end.
type outcome struct {
	Jobs    int     `json:"jobs"`
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"per_sec"`
	// CPUSeconds is this process's user plus system CPU time while the
	// jobs were worked.
	CPUSeconds float64 `json:"cpu_seconds"`
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("river-bench", flag.ContinueOnError)
	databaseURL := fs.String("database-url", "", "a fresh Postgres database (required)")
	jobs := fs.Int("jobs", 20000, "jobs to insert and work")
	payload := fs.String("args", "", "a JSON value every job carries in its args as \"task\" (none by default, as River's benchmark)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *databaseURL == "" {
		return fmt.Errorf("-database-url is required")
	}
	if *payload != "" && !json.Valid([]byte(*payload)) {
		return fmt.Errorf("-args is not JSON")
	}
	pool, err := pgxpool.New(ctx, *databaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     2 * time.Millisecond,
		FetchPollInterval: 20 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2_000}},
		Workers:           workers,
	})
	if err != nil {
		return err
	}
	events, cancelEvents := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: *jobs,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancelEvents()

	// Inserted as River's benchmark inserts them: in batches of 5,000,
	// all before the client starts.
	const insertBatch = 5000
	for n := 0; n < *jobs; {
		batch := make([]river.InsertManyParams, min(insertBatch, *jobs-n))
		for i := range batch {
			n++
			batch[i] = river.InsertManyParams{Args: noopArgs{Num: n, Task: json.RawMessage(*payload)}}
		}
		if _, err := client.InsertMany(ctx, batch); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}

	fmt.Fprintln(stdout, "working")
	cpu := selfCPU()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return err
	}
	var last time.Time
	for worked := 0; worked < *jobs; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-events:
			if ev == nil {
				return fmt.Errorf("the event channel closed after %d jobs", worked)
			}
			if ev.Kind != river.EventKindJobCompleted {
				return fmt.Errorf("job %d: %s", ev.Job.ID, ev.Kind)
			}
			worked++
			last = time.Now()
		case <-time.After(time.Minute):
			return fmt.Errorf("no job was worked for a minute after %d", worked)
		}
	}
	elapsed := last.Sub(start)
	used := selfCPU() - cpu
	if err := client.Stop(ctx); err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(outcome{Jobs: *jobs, Seconds: elapsed.Seconds(),
		PerSec: float64(*jobs) / elapsed.Seconds(), CPUSeconds: used.Seconds()})
}

// noopArgs are the benchmark's jobs, as River's own benchmark's, and with
// -args the task they stand for.
type noopArgs struct {
	Num  int             `json:"num"`
	Task json.RawMessage `json:"task,omitempty"`
}

func (noopArgs) Kind() string { return "benchmark" }

// noopWorker does nothing, as River's own benchmark worker.
type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (*noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// selfCPU returns this process's user plus system CPU time from
// /proc/self/stat, assuming 100 clock ticks per second.
func selfCPU() time.Duration {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	user, _ := strconv.ParseInt(f[11], 10, 64)
	sys, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(user+sys) * 10 * time.Millisecond
}

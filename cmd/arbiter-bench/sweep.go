package main

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// The sweep phase (issues 30 and 35): the periodic sweeps over a large
// table of tasks with deadlines, a fraction of them due. Each sweep runs as
// the worker runs it (worker/maintenance.go), batch after batch until one
// takes less than a batch; its statements are explained on the same table
// to show that a sweep reads what it takes, not the table.

// sweepBatch is the worker's expireBatch: the most tasks one sweep
// statement takes.
const sweepBatch = 500

// idleSweeps is how many sweeps with nothing due the phase times.
const idleSweeps = 200

// sweepCase is one periodic sweep: round takes at most max due tasks and
// returns how many it took.
type sweepCase struct {
	name  string
	round func(ctx context.Context, store *db.DB, max int) (int, error)
}

// sweeps are the sweeps the phase measures, in the order the worker runs
// them. A new sweep adds its line here and its statements to
// db.SweepStatements.
var sweeps = []sweepCase{
	{"expiry", func(ctx context.Context, s *db.DB, max int) (int, error) {
		ids, err := s.ExpireTasks(ctx, max)
		return len(ids), err
	}},
	{"alerts", func(ctx context.Context, s *db.DB, max int) (int, error) {
		return s.FireDueAlerts(ctx, max)
	}},
}

// sweepOnce runs one sweep as the worker does: batches of sweepBatch until
// one takes fewer. It returns the tasks taken and the batches run.
func sweepOnce(ctx context.Context, store *db.DB, s sweepCase) (taken, batches int, err error) {
	for {
		n, err := s.round(ctx, store, sweepBatch)
		if err != nil {
			return taken, batches, err
		}
		taken, batches = taken+n, batches+1
		if n < sweepBatch {
			return taken, batches, nil
		}
	}
}

// measureSweep fills a fresh database with b.sweepTasks tasks with
// deadlines, every tenth with an on-expiry outcome, makes b.sweepDue of
// them due and as many others waiting for a person with a reminder due,
// and measures each sweep over them: the sweep of the due tasks,
// its statements' plans and rows read with a batch due and with none, and
// the sweeps that find nothing due, the steady state.
func (b *bench) measureSweep(ctx context.Context) error {
	if err := b.resetDatabase(ctx); err != nil {
		return err
	}
	store, err := db.Open(ctx, b.databaseURL, db.Options{DailyTaskCap: 1_000_000_000})
	if err != nil {
		return err
	}
	defer store.Close()
	account, err := store.FindOrCreateAccountByEmail(ctx, "bench-sweep@example.com")
	if err != nil {
		return err
	}
	due := int(float64(b.sweepTasks) * b.sweepDue)
	b.logf("creating %d tasks with deadlines, %d of them due", b.sweepTasks, due)
	seedStart := time.Now()
	ids, err := createWithDeadlines(ctx, store, account.ID, b.sweepTasks)
	if err != nil {
		return err
	}
	conn, err := sql.Open("postgres", b.databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	perm := rand.New(rand.NewPCG(1, 2)).Perm(len(ids))
	dueIDs, alertIDs := make([]string, 0, due), make([]string, 0, due)
	for _, i := range perm[:due] {
		dueIDs = append(dueIDs, ids[i])
	}
	for _, i := range perm[due:min(2*due, len(perm))] {
		alertIDs = append(alertIDs, ids[i])
	}
	// The due tasks' deadlines passed a second ago by the database's clock.
	if _, err := conn.ExecContext(ctx, `UPDATE task_states SET deadline_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint - 1000
		WHERE id = ANY($1)`, pq.Array(dueIDs)); err != nil {
		return err
	}
	// As many others wait for a person, for an hour, with a reminder after
	// 15 minutes, due a second ago: the reminders sweep's due tasks. Their
	// deadlines are a day away, so the expiry sweep passes them over.
	if err := remindNow(ctx, conn, alertIDs); err != nil {
		return err
	}
	if err := vacuum(ctx, b.databaseURL); err != nil {
		return err
	}
	b.logf("seeded in %s", time.Since(seedStart).Round(time.Second))

	statements := store.SweepStatements()
	for _, s := range sweeps {
		plans, err := explainAll(ctx, conn, statements)
		if err != nil {
			return err
		}
		before := b.cpuNow()
		start := time.Now()
		taken, batches, err := sweepOnce(ctx, store, s)
		if err != nil {
			return fmt.Errorf("sweep %s: %w", s.name, err)
		}
		swept := time.Since(start)
		cpu := b.cpuNow().minus(before)
		b.results = append(b.results, result{name: fmt.Sprintf("sweep: %s (%d due)", s.name, due), ops: int64(taken),
			elapsed: swept, cpu: cpu, perSec: float64(taken) / swept.Seconds(), unitName: "tasks/s"})
		idlePlans, err := explainAll(ctx, conn, statements)
		if err != nil {
			return err
		}
		hist := hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
		before = b.cpuNow()
		start = time.Now()
		var idleTaken int
		for range idleSweeps {
			t := time.Now()
			n, _, err := sweepOnce(ctx, store, s)
			if err != nil {
				return fmt.Errorf("sweep %s: %w", s.name, err)
			}
			idleTaken += n
			_ = hist.RecordValue(time.Since(t).Microseconds())
		}
		elapsed := time.Since(start)
		b.results = append(b.results, result{name: fmt.Sprintf("sweep: %s (none due)", s.name), ops: idleSweeps, hist: hist,
			elapsed: elapsed, cpu: b.cpuNow().minus(before), perSec: idleSweeps / elapsed.Seconds(), unitName: "sweeps/s"})

		// The targets: every due task taken, once; no statement scans the
		// table; a statement reads at most three rows for each task of
		// its batch (the row its index finds, the row an update reads
		// again by primary key, and the due tasks of the other statement
		// it passes over), and a handful when none is due: what it reads
		// does not grow with the table.
		b.sweepNotes = append(b.sweepNotes, fmt.Sprintf("%-22s %d of %d due tasks taken over %d tasks in %d batches, %.0f µs a task (target: all) %s",
			"sweep: "+s.name, taken, due, b.sweepTasks, batches, float64(swept.Microseconds())/float64(max(taken, 1)), verdict(taken == due && idleTaken == 0)))
		for i, p := range plans {
			idle := idlePlans[i]
			ok := !p.seqScan && !idle.seqScan && p.rowsRead <= 3*sweepBatch && idle.rowsRead <= 10
			b.sweepNotes = append(b.sweepNotes, fmt.Sprintf("%-22s %q: due: %d rows read for %d taken, %d buffers, %.1f ms; none due: %d rows read, %d buffers, %.2f ms; seq scan: %v (target: no seq scan, rows read ≤ 3 × batch, ≤ 10 idle) %s",
				"sweep: "+s.name, p.name, p.rowsRead, p.rowsOut, p.buffers, p.ms, idle.rowsRead, idle.buffers, idle.ms, p.seqScan || idle.seqScan, verdict(ok)))
		}
	}
	return nil
}

// createWithDeadlines creates n pending tasks with a deadline a day away,
// every tenth with the on-expiry outcome verdict:reject, through the
// store's batch create from a few goroutines, and returns their ids.
func createWithDeadlines(ctx context.Context, store *db.DB, accountID string, n int) ([]string, error) {
	in, err := arbiter.ParseTaskCreate(taskBody)
	if err != nil {
		return nil, err
	}
	in.DeadlineSeconds = 24 * 60 * 60
	withOutcome := in
	withOutcome.OnExpiry = arbiter.OnExpiry{Outcome: arbiter.OnExpiryVerdictPrefix + "reject"}
	const seeders = 4
	batches := (n + batchSize - 1) / batchSize
	ids := make([]string, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for g := range seeders {
		wg.Go(func() {
			for batch := g; batch < batches && ctx.Err() == nil; batch += seeders {
				lo, hi := batch*batchSize, min((batch+1)*batchSize, n)
				creates := make([]arbiter.TaskCreate, hi-lo)
				for i := range creates {
					if creates[i] = in; (lo+i)%10 == 0 {
						creates[i] = withOutcome
					}
				}
				created, err := store.CreateTasks(ctx, accountID, creates)
				for i, c := range created {
					if err == nil && c.Err != nil {
						err = c.Err
					}
					if c.Task != nil {
						ids[lo+i] = c.Task.ID
					}
				}
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return ids, ctx.Err()
}

// sweepPlan is what EXPLAIN ANALYZE says of one sweep statement.
type sweepPlan struct {
	name     string
	rowsOut  int64   // the rows the statement returned
	rowsRead int64   // rows the scans of tasks read, kept or filtered out
	buffers  int64   // shared buffers hit or read
	seqScan  bool    // whether a node scans the whole tasks table
	ms       float64 // execution time
}

// explainAll runs EXPLAIN (ANALYZE, BUFFERS) of each statement with the
// batch as its argument, in a transaction it rolls back, so that the
// statements change nothing.
func explainAll(ctx context.Context, conn *sql.DB, statements []db.SweepStatement) ([]sweepPlan, error) {
	plans := make([]sweepPlan, 0, len(statements))
	for _, s := range statements {
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		var out []byte
		err = tx.QueryRowContext(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+s.SQL, sweepBatch).Scan(&out)
		_ = tx.Rollback()
		if err != nil {
			return nil, fmt.Errorf("explain %s: %w", s.Name, err)
		}
		var doc []struct {
			Plan          planNode `json:"Plan"`
			ExecutionTime float64  `json:"Execution Time"`
		}
		if err := json.Unmarshal(out, &doc); err != nil || len(doc) == 0 {
			return nil, fmt.Errorf("explain %s: %v", s.Name, err)
		}
		p := sweepPlan{name: s.Name, rowsOut: int64(doc[0].Plan.ActualRows), ms: doc[0].ExecutionTime,
			buffers: doc[0].Plan.SharedHit + doc[0].Plan.SharedRead}
		doc[0].Plan.walk(func(n *planNode) {
			if n.Relation != "tasks" {
				return
			}
			if n.NodeType == "Seq Scan" {
				p.seqScan = true
			}
			if n.NodeType != "ModifyTable" {
				p.rowsRead += int64(n.ActualRows*n.Loops) + n.RemovedByFilter + n.RemovedByRecheck
			}
		})
		plans = append(plans, p)
	}
	return plans, nil
}

// planNode is a node of a JSON plan, the fields the phase reads.
type planNode struct {
	NodeType         string     `json:"Node Type"`
	Relation         string     `json:"Relation Name"`
	ActualRows       float64    `json:"Actual Rows"`
	Loops            float64    `json:"Actual Loops"`
	RemovedByFilter  int64      `json:"Rows Removed by Filter"`
	RemovedByRecheck int64      `json:"Rows Removed by Index Recheck"`
	SharedHit        int64      `json:"Shared Hit Blocks"`
	SharedRead       int64      `json:"Shared Read Blocks"`
	Plans            []planNode `json:"Plans"`
}

func (n *planNode) walk(fn func(*planNode)) {
	fn(n)
	for i := range n.Plans {
		n.Plans[i].walk(fn)
	}
}

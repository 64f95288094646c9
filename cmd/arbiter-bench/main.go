// Command arbiter-bench measures Arbiter against the database's own
// ceiling: it builds nothing itself, but starts the arbiter binary on a
// fresh Postgres database, drives HTTP load at it, issues the same store
// calls straight through database/sql for comparison, times the worker
// with the rules backend and reads the server's peak memory. `make bench`
// runs it; docs/benchmarks.md explains the figures.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/lib/pq"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

func main() {
	// The generator collects garbage as the service does by default
	// (cmd/arbiter), so that neither starves the other of CPU.
	if serveBenchUpstream() {
		return
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "arbiter-bench:", err)
		os.Exit(1)
	}
}

// config holds the command line.
type config struct {
	bin             string
	databaseURL     string
	addr            string
	duration        time.Duration
	concurrency     int
	tracingRounds   int
	tracingDuration time.Duration
	accounts        int
	workerTasks     int
	workers         int
	waiters         int
	riverBin        string
	queueJobs       int
	queueWorkers    int
	latencyRates    latencyRatesFlag
	latencyDuration time.Duration
	deskTasks       int
	waitHold        time.Duration
	phases          map[string]bool
	// webhookMessages is how many messages the webhook delivery phase
	// sends (webhooks.go); 0 skips the webhook phases.
	webhookMessages int
	// mailMessages is how many mails the mail phase sends (mail.go); 0
	// skips it.
	mailMessages int
	// The provider phases' scale (throttle.go).
	throttleTasks, throttleWorkers, busyTasks int
	throttleRPM                               float64
	providerLatency, busyLatency              time.Duration
	// sweepTasks is how many tasks with deadlines the sweep phase fills
	// the table with (sweep.go), sweepDue the fraction of them due; 0
	// tasks skips the phase.
	sweepTasks int
	sweepDue   float64
	// gatewayCalls is how many echo calls each round of the gateway
	// phase makes, straight and through the gateway (gateway.go); 0
	// skips it.
	gatewayCalls int
	// cascadeTasks is how many tasks each run of the cascade phase
	// decides (cascade.go).
	cascadeTasks int
	// cascadeDeployments is how many simulated deployments the
	// cascade-sim phase runs (cascade_sim.go); 0 skips it.
	cascadeDeployments int
}

// allPhases names the groups of phases -phases selects from, in the order
// they run.
var allPhases = []string{"api", "wait", "worker", "queue", "latency", "desk", "webhooks", "mail", "slack", "teams", "sweep", "views", "integrity", "provider", "tracing", "replicas", "gateway", "cascade", "cascade-sim"}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c config
	fs := flag.NewFlagSet("arbiter-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.bin, "bin", "bin/arbiter", "the arbiter binary to measure")
	fs.StringVar(&c.databaseURL, "database-url", "postgres://postgres@127.0.0.1:5432/arbiter_bench?sslmode=disable",
		"a Postgres database that is dropped and created afresh")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:18180", "where the server under test listens")
	fs.DurationVar(&c.duration, "duration", 15*time.Second, "length of each load phase")
	fs.IntVar(&c.concurrency, "concurrency", 32, "concurrent connections")
	fs.IntVar(&c.tracingRounds, "tracing-rounds", 5, "rounds of traces off, at 100% and at the default sampler in the tracing phase")
	fs.DurationVar(&c.tracingDuration, "tracing-duration", 6*time.Second, "length of each load phase of the tracing phase")
	fs.IntVar(&c.accounts, "accounts", 100, "accounts the creates are spread over")
	fs.IntVar(&c.workerTasks, "worker-tasks", 10000, "tasks the worker phase decides")
	fs.IntVar(&c.cascadeTasks, "cascade-tasks", 5000, "tasks each run of the cascade phase decides (0 skips it)")
	fs.IntVar(&c.cascadeDeployments, "cascade-deployments", 200, "simulated deployments of the cascade-sim phase (0 skips it)")
	fs.IntVar(&c.workers, "workers", 32, "ARBITER_WORKERS for the worker phase")
	fs.StringVar(&c.riverBin, "river-bin", "bin/river-bench", "the River side of the queue comparison (cmd/arbiter-bench/river)")
	fs.IntVar(&c.queueJobs, "queue-jobs", 20000, "jobs River and tasks the worker work in the queue comparison (0 skips it)")
	fs.IntVar(&c.queueWorkers, "queue-workers", 2000, "ARBITER_WORKERS in the queue comparison, as River's MaxWorkers")
	c.latencyRates = latencyRatesFlag{100, 1000}
	fs.Var(&c.latencyRates, "latency-rates", "the rates, in tasks/s, of the end-to-end latency phases")
	fs.DurationVar(&c.latencyDuration, "latency-duration", 10*time.Second, "length of each end-to-end latency phase")
	fs.IntVar(&c.deskTasks, "desk-tasks", 50000, "tasks waiting for a human in the review desk phases")
	fs.IntVar(&c.waiters, "waiters", 10000, "long-polls the wait phase holds open (0 skips it)")
	fs.DurationVar(&c.waitHold, "wait-hold", 0, "how long the wait phase holds its waiters before deciding their tasks, for profiling")
	phases := fs.String("phases", strings.Join(allPhases, ","), "the groups of phases to run, of "+strings.Join(allPhases, ","))
	fs.IntVar(&c.webhookMessages, "webhook-messages", 10000, "messages the webhook delivery phase sends (0 skips the webhook phases)")
	fs.IntVar(&c.mailMessages, "mail-messages", 5000, "mails the mail phase sends (0 skips it)")
	fs.IntVar(&c.throttleTasks, "throttle-tasks", 5000, "tasks the throttled provider phase decides (0 skips it)")
	fs.Float64Var(&c.throttleRPM, "throttle-rpm", 600, "requests a minute the throttled provider allows")
	fs.IntVar(&c.throttleWorkers, "throttle-workers", 32, "ARBITER_WORKERS for the throttled provider phase")
	fs.DurationVar(&c.providerLatency, "provider-latency", 800*time.Millisecond,
		"how long the throttled provider takes to answer; with -throttle-rpm, the throttled phase's time scale")
	fs.DurationVar(&c.busyLatency, "busy-latency", 2*time.Second, "how long the busy provider takes to answer")
	fs.IntVar(&c.busyTasks, "busy-tasks", 320, "tasks the busy provider phase decides at -workers slots (0 skips it)")
	fs.IntVar(&c.sweepTasks, "sweep-tasks", 1_000_000, "tasks with deadlines the sweep phase fills the table with (0 skips it)")
	fs.Float64Var(&c.sweepDue, "sweep-due", 0.01, "the fraction of the sweep phase's tasks that are due")
	fs.IntVar(&c.gatewayCalls, "gateway-calls", 3000, "echo calls each round of the gateway phase makes, straight and through arbiter gateway (0 skips it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c.phases = map[string]bool{}
	for _, p := range strings.Split(*phases, ",") {
		if !slices.Contains(allPhases, p) {
			return fmt.Errorf("-phases: %q is not one of %s", p, strings.Join(allPhases, ","))
		}
		c.phases[p] = true
	}
	b := &bench{config: c, log: stderr}
	return b.run(ctx, stdout)
}

type bench struct {
	config
	serverPID int // the server under test, while the API phases run
	// serverPIDs are the servers under test when there are several
	// (replicas.go); their CPU counts as the server's.
	serverPIDs []int
	log        io.Writer
	results    []result
	rssMB      float64
	ids        []idAt
	wait       *waitResult
	// slackNotes are the Slack phases' checks (slack.go).
	slackNotes []string
	// teamsNotes are the Teams phase's checks (teams.go).
	teamsNotes []string
	// provider holds the provider phases' figures (throttle.go).
	provider []providerResult
	// sweepNotes are the sweep phase's checks (sweep.go).
	sweepNotes []string
	// views are the views phase's renders (views.go).
	views []viewRender
	// integrity are the integrity phase's steps (integrity.go).
	integrity []integrityStep
	// cascade is what the cascade phase measured (cascade.go).
	cascade *cascadeResult
	// cascadeSim is what the cascade-sim phase measured (cascade_sim.go).
	cascadeSim *cascadeSimResult
	// tracingLoad is the load average before and after the tracing phase
	// (tracing.go).
	tracingLoad [2]string
}

// idAt is a created task and the account that owns it.
type idAt struct{ id, accountID, key string }

// result is one measured phase.
type result struct {
	name     string
	ops      int64
	errors   int64
	elapsed  time.Duration
	hist     *hdrhistogram.Histogram
	perSec   float64
	unitName string
	cpu      cpuUse // CPU spent during the phase, by process
}

func (b *bench) logf(format string, args ...any) { fmt.Fprintf(b.log, "· "+format+"\n", args...) }

func (b *bench) run(ctx context.Context, stdout io.Writer) error {
	if err := b.resetDatabase(ctx); err != nil {
		return err
	}
	if b.phases["api"] {
		keys, accountIDs, err := b.createKeys(ctx)
		if err != nil {
			return err
		}
		if err := b.measureAPI(ctx, keys, accountIDs); err != nil {
			return err
		}
	}
	if b.phases["wait"] && b.waiters > 0 {
		if err := b.measureWait(ctx); err != nil {
			return err
		}
	}
	if b.phases["worker"] && b.workerTasks > 0 {
		if err := b.measureWorker(ctx); err != nil {
			return err
		}
	}
	if b.phases["queue"] && b.queueJobs > 0 {
		if err := b.measureQueue(ctx); err != nil {
			return err
		}
	}
	if b.phases["latency"] {
		if err := b.measureLatency(ctx); err != nil {
			return err
		}
	}
	if b.phases["desk"] && b.deskTasks > 0 {
		if err := b.measureDesk(ctx); err != nil {
			return err
		}
	}
	if b.phases["webhooks"] && b.webhookMessages > 0 {
		if err := b.measureWebhooks(ctx); err != nil {
			return err
		}
	}
	if b.phases["mail"] && b.mailMessages > 0 {
		if err := b.measureMail(ctx); err != nil {
			return err
		}
	}
	if b.phases["slack"] {
		if err := b.measureSlack(ctx); err != nil {
			return err
		}
	}
	if b.phases["teams"] {
		if err := b.measureTeams(ctx); err != nil {
			return err
		}
	}
	if b.phases["sweep"] && b.sweepTasks > 0 {
		if err := b.measureSweep(ctx); err != nil {
			return err
		}
	}
	if b.phases["views"] {
		if err := b.measureViews(ctx); err != nil {
			return err
		}
	}
	if b.phases["integrity"] {
		if err := b.measureIntegrity(ctx); err != nil {
			return err
		}
	}
	if b.phases["provider"] {
		if err := b.measureProvider(ctx); err != nil {
			return err
		}
	}
	if b.phases["tracing"] {
		if err := b.measureTracing(ctx); err != nil {
			return err
		}
	}
	if b.phases["replicas"] {
		if err := b.measureReplicas(ctx); err != nil {
			return err
		}
	}
	if b.phases["gateway"] && b.gatewayCalls > 0 {
		if err := b.measureGateway(ctx); err != nil {
			return err
		}
	}
	if b.phases["cascade"] && b.cascadeTasks > 0 {
		if err := b.measureCascade(ctx); err != nil {
			return err
		}
	}
	if b.phases["cascade-sim"] && b.cascadeDeployments > 0 {
		b.measureCascadeSim()
	}
	b.print(stdout)
	return nil
}

// env is the environment of every arbiter process the bench starts.
func (b *bench) env(extra ...string) []string {
	env := append(os.Environ(),
		"ARBITER_DATABASE_URL="+b.databaseURL,
		"ARBITER_DAILY_TASK_CAP=100000000",
		"ARBITER_ADDR="+b.addr,
		// Every client of the bench is on one address.
		"ARBITER_MAX_CONNECTIONS_PER_IP=1000000",
	)
	return append(env, extra...)
}

// resetDatabase drops and creates the bench database and migrates it.
func (b *bench) resetDatabase(ctx context.Context) error {
	if err := recreateDatabase(ctx, b.databaseURL); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, b.bin, "migrate")
	cmd.Env = b.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("arbiter migrate: %v\n%s", err, out)
	}
	return nil
}

// recreateDatabase drops the database of databaseURL and creates it empty.
func recreateDatabase(ctx context.Context, databaseURL string) error {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(u.Path, "/")
	admin := *u
	admin.Path = "/postgres"
	conn, err := sql.Open("postgres", admin.String())
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	if _, err := conn.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	return nil
}

// createKeys creates one account and key per account through the CLI.
func (b *bench) createKeys(ctx context.Context) (keys, accountIDs []string, err error) {
	b.logf("creating %d accounts and keys through `arbiter admin create-key`", b.accounts)
	store, err := db.Open(ctx, b.databaseURL, db.Options{})
	if err != nil {
		return nil, nil, err
	}
	defer store.Close()
	for i := range b.accounts {
		email := fmt.Sprintf("bench-%03d@example.com", i)
		key, err := b.createKey(ctx, email)
		if err != nil {
			return nil, nil, err
		}
		account, err := store.FindAccountByEmail(ctx, email)
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, key)
		accountIDs = append(accountIDs, account.ID)
	}
	return keys, accountIDs, nil
}

// createKey creates a key for the account of email, and the account if it
// does not exist, through `arbiter admin create-key`.
func (b *bench) createKey(ctx context.Context, email string) (string, error) {
	cmd := exec.CommandContext(ctx, b.bin, "admin", "create-key", "--email", email, "--name", "bench")
	cmd.Env = b.env()
	cmd.Stderr = b.log
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("create-key: %w", err)
	}
	key := strings.TrimSpace(string(out))
	if key == "" {
		return "", errNoKey
	}
	return key, nil
}

// taskBody is a realistic create: a ~200-byte prompt, ~1 KiB of context
// and three verdicts.
var taskBody = func() []byte {
	items := make([]map[string]any, 8)
	for i := range items {
		items[i] = map[string]any{"sku": fmt.Sprintf("SKU-%05d", 1000+i), "name": "Ceramic pour-over coffee dripper", "qty": 1 + i%3, "price": 24.90}
	}
	b, _ := json.Marshal(map[string]any{
		"prompt": "A customer asks for a full refund of order ord_58213 because two items arrived broken. " +
			"The photos in the ticket show cracked ceramic. Policy allows refunds within 30 days. Approve, reject or escalate?",
		"allowed_verdicts":     []string{"approve", "reject", "escalate"},
		"confidence_threshold": 0.85,
		"task_type":            "refund",
		"touchpoint":           "email",
		"source":               "support-bot",
		"context": map[string]any{
			"order_id": "ord_58213", "customer": map[string]any{"id": "cus_9921", "since": "2021-04-02", "orders": 17},
			"items": items, "total": 199.20, "currency": "EUR",
		},
	})
	return b
}()

// measureAPI starts `arbiter serve --worker=false` and measures creates and
// gets over HTTP, each right beside its ceiling so that drift in the
// machine's speed does not skew the ratios; then it reads the server's peak
// RSS.
func (b *bench) measureAPI(ctx context.Context, keys, accountIDs []string) error {
	logFile, err := os.CreateTemp("", "arbiter-bench-server-*.log")
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(b.bin, "serve", "--worker=false")
	cmd.Env = b.env()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	b.serverPID = cmd.Process.Pid
	base := "http://" + b.addr
	if err := waitReady(ctx, base+"/demo/tasks"); err != nil {
		return fmt.Errorf("%w (server log: %s)", err, logFile.Name())
	}
	client := b.httpClient()
	// The ceilings: the store calls the handlers make, grouped as in the
	// service, and the same calls with one statement each. Each gets the
	// pool that serves it best here: one-statement creates wait on their
	// commits and do best with a connection per goroutine; the rest do
	// best with the service's default pool, as more backends only take
	// turns on the cores.
	store, err := db.Open(ctx, b.databaseURL, db.Options{DailyTaskCap: 100_000_000})
	if err != nil {
		return err
	}
	defer store.Close()
	singleCreates, err := db.Open(ctx, b.databaseURL, db.Options{DailyTaskCap: 100_000_000, MaxOpenConns: b.concurrency, Ungrouped: true})
	if err != nil {
		return err
	}
	defer singleCreates.Close()
	singleReads, err := db.Open(ctx, b.databaseURL, db.Options{Ungrouped: true})
	if err != nil {
		return err
	}
	defer singleReads.Close()
	in, err := arbiter.ParseTaskCreate(taskBody)
	if err != nil {
		return err
	}
	// createThrough and getThrough make the ceilings' store calls: the
	// accounts and ids of the HTTP phases, straight to a store.
	createThrough := func(store *db.DB) func(w, i int) error {
		return func(w, i int) error {
			_, err := store.CreateTask(ctx, accountIDs[(w+i*b.concurrency)%len(accountIDs)], in)
			return err
		}
	}
	getThrough := func(store *db.DB) func(w, i int) error {
		return func(w, i int) error {
			t := b.created(w, i)
			_, err := store.FindTaskByID(ctx, t.accountID, t.id)
			return err
		}
	}

	var mu sync.Mutex
	b.logf("POST /v1/tasks for %s at %d connections", b.duration, b.concurrency)
	b.results = append(b.results, b.phase(ctx, "create (HTTP)", func(w, i int) error {
		a := (w + i*b.concurrency) % len(keys)
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/tasks", bytes.NewReader(taskBody))
		req.Header.Set("Authorization", "Bearer "+keys[a])
		req.Header.Set("Content-Type", "application/json")
		var task struct{ ID string }
		if err := do(client, req, &task); err != nil {
			return err
		}
		mu.Lock()
		if len(b.ids) < 1_000_000 {
			b.ids = append(b.ids, idAt{id: task.ID, accountID: accountIDs[a], key: keys[a]})
		}
		mu.Unlock()
		return nil
	}))
	if len(b.ids) == 0 {
		return errors.New("no task was created")
	}
	b.logf("POST /v1/tasks/batch with %d tasks each for %s at %d connections", batchSize, b.duration, b.concurrency)
	b.results = append(b.results, b.batchPhase(ctx, client, base, keys))
	b.logf("ceiling: one create statement per create through database/sql for %s", b.duration)
	b.results = append(b.results, b.phase(ctx, "create (ceiling)", createThrough(singleCreates)))
	b.logf("ceiling: the service's grouped creates through database/sql for %s", b.duration)
	b.results = append(b.results, b.phase(ctx, "create (grouped)", createThrough(store)))

	// The creates leave work for autovacuum; do it now rather than in the
	// middle of the gets.
	if err := vacuum(ctx, b.databaseURL); err != nil {
		return err
	}
	b.logf("GET /v1/tasks/{id} for %s at %d connections", b.duration, b.concurrency)
	b.results = append(b.results, b.phase(ctx, "get (HTTP)", func(w, i int) error {
		t := b.created(w, i)
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/tasks/"+t.id, nil)
		req.Header.Set("Authorization", "Bearer "+t.key)
		return do(client, req, nil)
	}))
	if r, ok, err := b.measurePgbench(ctx, store.FindTaskStatement()); err != nil {
		return err
	} else if ok {
		b.results = append(b.results, r)
	}
	b.logf("ceiling: one read statement per get through database/sql for %s", b.duration)
	b.results = append(b.results, b.phase(ctx, "get (ceiling)", getThrough(singleReads)))
	b.logf("ceiling: the service's grouped reads through database/sql for %s", b.duration)
	b.results = append(b.results, b.phase(ctx, "get (grouped)", getThrough(store)))
	b.rssMB = rssMB(cmd.Process.Pid, "VmHWM:")
	return nil
}

// created picks the task that call i of goroutine w reads, spread over the
// tasks the create phase made.
func (b *bench) created(w, i int) idAt { return b.ids[(i*b.concurrency+w)*7919%len(b.ids)] }

// vacuum runs VACUUM ANALYZE on the tables of tasks (task_states, task_bodies).
func vacuum(ctx context.Context, databaseURL string) error {
	conn, err := sql.Open("postgres", databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "VACUUM ANALYZE task_states, task_bodies"); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// alwaysRule decides every task; the worker phase measures the queue, not
// a model.
const alwaysRule = "approve 0.99 true\n"

// measureWorker times `arbiter worker` with the rules backend deciding
// workerTasks pending tasks at ARBITER_WORKERS=workers.
func (b *bench) measureWorker(ctx context.Context) error {
	r, err := b.timeWorker(ctx, "worker (rules)", b.workerTasks, b.workers)
	if err != nil {
		return err
	}
	b.results = append(b.results, r)
	return nil
}

// timeWorker creates n pending tasks on a fresh database, starts `arbiter
// worker` with the rules backend (or the verifiers extraEnv names) and
// ARBITER_WORKERS=workers, and times it
// from the moment it says it started until the last task's completion is
// heard on the task channel, the way River's benchmark counts its jobs
// through its completion events. CPU is the worker's and Postgres's in
// that window.
func (b *bench) timeWorker(ctx context.Context, name string, n, workers int, extraEnv ...string) (result, error) {
	if err := b.resetDatabase(ctx); err != nil {
		return result{}, err
	}
	store, err := db.Open(ctx, b.databaseURL, db.Options{DailyTaskCap: 100_000_000})
	if err != nil {
		return result{}, err
	}
	defer store.Close()
	account, err := store.FindOrCreateAccountByEmail(ctx, "bench-worker@example.com")
	if err != nil {
		return result{}, err
	}
	b.logf("creating %d pending tasks", n)
	if _, err := createPending(ctx, store, account.ID, n); err != nil {
		return result{}, err
	}
	if err := vacuum(ctx, b.databaseURL); err != nil {
		return result{}, err
	}
	completed, stopListening, err := listenCompletions(b.databaseURL)
	if err != nil {
		return result{}, err
	}
	defer stopListening()

	dir, err := os.MkdirTemp("", "arbiter-bench")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	b.logf("arbiter worker with the rules backend, %d concurrent", workers)
	w, err := b.startWorker(ctx, dir, append([]string{"ARBITER_WORKERS=" + strconv.Itoa(workers)}, extraEnv...)...)
	if err != nil {
		return result{}, err
	}
	defer w.stop()
	select {
	case <-w.started:
	case <-ctx.Done():
		return result{}, ctx.Err()
	case <-time.After(30 * time.Second):
		return result{}, errors.New("the worker did not start within 30 s")
	}
	b.serverPID = w.pid
	before := b.cpuNow()
	start := time.Now()
	seen := make(map[string]bool, n)
	for len(seen) < n {
		select {
		case id := <-completed:
			seen[id] = true
		case <-ctx.Done():
			return result{}, ctx.Err()
		case <-time.After(time.Minute):
			return result{}, fmt.Errorf("the worker decided %d of %d tasks, then nothing for a minute", len(seen), n)
		}
	}
	elapsed := time.Since(start)
	cpu := b.cpuNow().minus(before)
	cpu.generator = 0 // the bench only listened
	return result{name: name, ops: int64(n), elapsed: elapsed, cpu: cpu,
		perSec: float64(n) / elapsed.Seconds(), unitName: "tasks/s"}, nil
}

// listenCompletions listens on Arbiter's task channel and sends the id of
// each task that reaches a final state.
func listenCompletions(databaseURL string) (<-chan string, func(), error) {
	l := pq.NewListener(databaseURL, 100*time.Millisecond, time.Second, nil)
	if err := l.Listen("arbiter_tasks"); err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("listen: %w", err)
	}
	ids := make(chan string, 1024)
	stop := make(chan struct{})
	go func() {
		for n := range l.Notify {
			// The channel also says when tasks were created ("created").
			if n == nil || !strings.HasPrefix(n.Extra, "tsk_") {
				continue
			}
			select {
			case ids <- n.Extra:
			case <-stop:
				return
			}
		}
	}()
	return ids, func() {
		close(stop)
		l.Close()
	}, nil
}

// phase drives fn at the configured concurrency and duration, and records
// the CPU time the generator, the server and Postgres spent meanwhile.
func (b *bench) phase(ctx context.Context, name string, fn func(worker, i int) error) result {
	before := b.cpuNow()
	r := drive(ctx, name, b.concurrency, b.duration, fn)
	r.cpu = b.cpuNow().minus(before)
	return r
}

// cpuUse is CPU time, user plus system, by process.
type cpuUse struct{ generator, server, postgres time.Duration }

func (c cpuUse) minus(o cpuUse) cpuUse {
	return cpuUse{c.generator - o.generator, c.server - o.server, c.postgres - o.postgres}
}

// cpuNow reads the CPU time used so far by this process, the server and
// every process named postgres, from /proc (zero where it is unreadable).
func (b *bench) cpuNow() cpuUse {
	c := cpuUse{generator: procCPU("self"), server: procCPU(strconv.Itoa(b.serverPID))}
	for _, pid := range b.serverPIDs {
		c.server += procCPU(strconv.Itoa(pid))
	}
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if d.Name()[0] >= '0' && d.Name()[0] <= '9' {
			if comm, _ := os.ReadFile("/proc/" + d.Name() + "/comm"); strings.TrimSpace(string(comm)) == "postgres" {
				c.postgres += procCPU(d.Name())
			}
		}
	}
	return c
}

// procCPU returns the user plus system time of /proc/pid/stat, assuming
// the usual 100 clock ticks per second.
func procCPU(pid string) time.Duration {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th of the whole line.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	user, _ := strconv.ParseInt(f[11], 10, 64)
	sys, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(user+sys) * 10 * time.Millisecond
}

// errStop ends a drive loop early without counting an error.
var errStop = errors.New("stop")

// drive calls fn from conc goroutines for d (or until fn returns errStop)
// and records each call's latency.
func drive(ctx context.Context, name string, conc int, d time.Duration, fn func(worker, i int) error) result {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	hists := make([]*hdrhistogram.Histogram, conc)
	errs := make([]int64, conc)
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		hists[w] = hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				t := time.Now()
				err := fn(w, i)
				if errors.Is(err, errStop) {
					return
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					errs[w]++
					once.Do(func() { firstErr = err })
					continue
				}
				_ = hists[w].RecordValue(time.Since(t).Microseconds())
			}
		})
	}
	wg.Wait()
	r := result{name: name, elapsed: time.Since(start), hist: hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3), unitName: "req/s"}
	for w := range conc {
		r.hist.Merge(hists[w])
		r.errors += errs[w]
	}
	r.ops = r.hist.TotalCount()
	r.perSec = float64(r.ops) / r.elapsed.Seconds()
	if firstErr != nil && name != "" {
		fmt.Fprintf(os.Stderr, "· %s: %d errors, the first: %v\n", name, r.errors, firstErr)
	}
	return r
}

// do sends req and decodes a 200 answer into v (when not nil).
func do(c *http.Client, req *http.Request, v any) error {
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, res.StatusCode, body)
	}
	if v != nil {
		return json.Unmarshal(body, v)
	}
	return nil
}

// waitReady polls url until it answers 200.
func waitReady(ctx context.Context, url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if res, err := http.Get(url); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("the server did not answer %s within 30s", url)
}

// rssMB reads a process's resident set size in MB from the field of
// /proc/pid/status: "VmRSS:" now, "VmHWM:" its peak.
func rssMB(pid int, field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// print writes the result table and the ratios against the targets.
func (b *bench) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\tthroughput\tp50\tp99\terrors\tCPU µs/op: gen\tserver\tpostgres\t\n")
	byName := map[string]result{}
	for _, r := range b.results {
		byName[r.name] = r
		p50, p99 := "-", "-"
		if r.hist != nil {
			p50 = ms(r.hist.ValueAtQuantile(50))
			p99 = ms(r.hist.ValueAtQuantile(99))
		}
		perOp := func(d time.Duration) string {
			if r.ops == 0 || d == 0 {
				return "-"
			}
			return strconv.FormatInt(d.Microseconds()/r.ops, 10)
		}
		fmt.Fprintf(tw, "%s\t%.0f %s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", r.name, r.perSec, r.unitName, p50, p99, r.errors,
			perOp(r.cpu.generator), perOp(r.cpu.server), perOp(r.cpu.postgres))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nconcurrency %d, %s per phase, %d accounts\n", b.concurrency, b.duration, b.accounts)
	for _, note := range append(b.slackNotes, b.teamsNotes...) {
		fmt.Fprintln(w, note)
	}
	ratio := func(svc, ceil string, target float64) {
		s, c := byName[svc], byName[ceil]
		if c.perSec == 0 {
			return
		}
		r := s.perSec / c.perSec
		check := "(for reference)"
		if target > 0 {
			check = fmt.Sprintf("(target ≥ %.2f) %s", target, verdict(r >= target))
		}
		fmt.Fprintf(w, "%-22s %.2f × %s %s\n", svc, r, ceil, check)
	}
	ratio("create (HTTP)", "create (ceiling)", 0.6)
	ratio("create (HTTP)", "create (grouped)", 0)
	ratio("get (HTTP)", pgbenchGetName, 0.5)
	ratio("get (HTTP)", "get (ceiling)", 0.5)
	ratio("get (HTTP)", "get (grouped)", 0)
	for _, name := range []string{"create (HTTP)", "get (HTTP)"} {
		if r, ok := byName[name]; ok {
			p99 := float64(r.hist.ValueAtQuantile(99)) / 1000
			fmt.Fprintf(w, "%-22s p99 %.1f ms (target < 25 ms) %s\n", name, p99, verdict(p99 < 25))
		}
	}
	if r, ok := byName["worker (rules)"]; ok {
		fmt.Fprintf(w, "%-22s %.0f tasks/s (target ≥ 1000) %s\n", "worker", r.perSec, verdict(r.perSec >= 1000))
	}
	printWebhookTargets(w, byName)
	printMailTargets(w, byName)
	printReplicas(w, byName)
	printProvider(w, b.provider)
	printGateway(w, byName)
	printTracing(w, b.results, b.tracingRounds, b.tracingLoad)
	if b.phases["api"] {
		fmt.Fprintf(w, "%-22s %.0f MB (target < 150 MB) %s\n", "server peak RSS", b.rssMB, verdict(b.rssMB > 0 && b.rssMB < 150))
	}
	ratio("batch create (HTTP)", "create (HTTP)", 3)
	ratio("worker (vs River)", "River (no-op)", 1)
	ratio("worker (vs River)", "River (task args)", 0)
	for _, name := range []string{"desk: /review", "desk: task page", "desk: decide",
		"desk (2 votes): /review", "desk (2 votes): task page", "desk (2 votes): vote"} {
		if r, ok := byName[name]; ok {
			p99 := float64(r.hist.ValueAtQuantile(99)) / 1000
			fmt.Fprintf(w, "%-22s p99 %.1f ms (target < 50 ms) %s\n", name, p99, verdict(r.errors == 0 && r.ops > 0 && p99 < 50))
		}
	}
	if r, ok := byName["end to end (1000/s)"]; ok && r.hist != nil {
		p50, p99 := float64(r.hist.ValueAtQuantile(50))/1000, float64(r.hist.ValueAtQuantile(99))/1000
		fmt.Fprintf(w, "%-22s p50 %.1f ms, p99 %.1f ms (target p50 < 20 ms, p99 < 100 ms) %s\n", "end to end (1000/s)",
			p50, p99, verdict(r.errors == 0 && r.ops > 0 && p50 < 20 && p99 < 100))
	}
	if r := b.wait; r != nil {
		fmt.Fprintf(w, "%-22s %d held, %d errors, open file limit %d\n", "wait", r.waiters, r.errors, r.fileLimit)
		fmt.Fprintf(w, "%-22s %.0f MB held, %.0f MB peak (%.0f MB of it by the time all were held) (target < 300 MB) %s\n", "wait: server RSS",
			r.heldRSSMB, r.peakRSSMB, r.heldPeakMB, verdict(r.errors == 0 && r.peakRSSMB > 0 && r.peakRSSMB < 300))
		p50, p99 := float64(r.wake.ValueAtQuantile(50))/1000, float64(r.wake.ValueAtQuantile(99))/1000
		fmt.Fprintf(w, "%-22s p50 %.1f ms, p99 %.1f ms (target p99 < 250 ms) %s\n", "wait: wake-up",
			p50, p99, verdict(r.errors == 0 && r.wake.TotalCount() > 0 && p99 < 250))
	}
	for _, note := range b.sweepNotes {
		fmt.Fprintln(w, note)
	}
	printViews(w, b.views)
	printIntegrity(w, b.integrity)
	printCascade(w, b.cascade)
	printCascadeSim(w, b.cascadeSim)
}

func ms(us int64) string { return fmt.Sprintf("%.2f ms", float64(us)/1000) }

func verdict(ok bool) string {
	if ok {
		return "ok"
	}
	return "MISSED"
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// waitResult is what the wait phase measured.
type waitResult struct {
	waiters    int
	heldRSSMB  float64 // the server's resident memory with every waiter held
	heldPeakMB float64 // its peak by then, through the waiters' arrival
	peakRSSMB  float64 // its peak, through the wake-ups
	fileLimit  uint64  // this process's open file limit
	wake       *hdrhistogram.Histogram
	errors     int64
	firstError error
}

// measureWait starts `arbiter serve --worker=false` on the bench database,
// holds b.waiters long-polls GET /v1/tasks/{id}?wait=60 open on as many
// connections, each on its own pending task, reads the server's memory, then
// lets `arbiter worker` (a second process) decide the tasks and records, for
// each waiter, the time from its task's completed_at to its answer.
func (b *bench) measureWait(ctx context.Context) error {
	// A fresh database: a worker decides the oldest pending tasks first,
	// and the API phases leave many.
	if err := b.resetDatabase(ctx); err != nil {
		return err
	}
	store, err := db.Open(ctx, b.databaseURL, db.Options{DailyTaskCap: 100_000_000})
	if err != nil {
		return err
	}
	defer store.Close()
	account, err := store.FindOrCreateAccountByEmail(ctx, "bench-wait@example.com")
	if err != nil {
		return err
	}
	key, err := b.createKey(ctx, "bench-wait@example.com")
	if err != nil {
		return err
	}
	ids, err := createPending(ctx, store, account.ID, b.waiters)
	if err != nil {
		return err
	}

	dir, err := os.MkdirTemp("", "arbiter-bench-wait")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	// Room for every waiter's connection, and a few more; every waiter is
	// of one key.
	server := exec.Command(b.bin, "serve", "--worker=false")
	server.Env = b.env("ARBITER_MAX_CONNECTIONS="+strconv.Itoa(b.waiters+1000),
		"ARBITER_MAX_WAITERS_PER_KEY="+strconv.Itoa(b.waiters), "ARBITER_MAX_WAITERS_PER_ACCOUNT="+strconv.Itoa(b.waiters))
	server.Stdout, server.Stderr = logFile, logFile
	if err := server.Start(); err != nil {
		return err
	}
	defer func() {
		_ = server.Process.Signal(syscall.SIGTERM)
		_ = server.Wait()
	}()
	base := "http://" + b.addr
	if err := waitReady(ctx, base+"/demo/tasks"); err != nil {
		return fmt.Errorf("%w (server log: %s)", err, logFile.Name())
	}

	res := waitResult{waiters: b.waiters, fileLimit: openFileLimit(),
		wake: hdrhistogram.New(1, int64(2*time.Minute/time.Microsecond), 3)}
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: b.waiters, DisableCompression: true,
		DialContext: (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
	}}
	b.logf("holding %d long-polls GET /v1/tasks/{id}?wait=60 open (open file limit %d)", b.waiters, res.fileLimit)
	var (
		mu      sync.Mutex
		written sync.WaitGroup
		done    sync.WaitGroup
		sent    atomic.Int64
	)
	record := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		res.errors++
		if res.firstError == nil {
			res.firstError = err
		}
	}
	// Connections are opened a few hundred at a time, so the listen
	// queue never overflows; each waiter then holds its own.
	dialing := make(chan struct{}, 256)
	for _, id := range ids {
		written.Add(1)
		done.Add(1)
		dialing <- struct{}{}
		go func() {
			defer done.Done()
			var once sync.Once
			wrote := func() { once.Do(func() { <-dialing; written.Done() }) }
			defer wrote()
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { sent.Add(1); wrote() }}
			reqCtx, cancel := context.WithTimeout(httptrace.WithClientTrace(ctx, trace), 2*time.Minute)
			defer cancel()
			req, _ := http.NewRequestWithContext(reqCtx, "GET", base+"/v1/tasks/"+id+"?wait=60", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			resp, err := client.Do(req)
			if err != nil {
				record(err)
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			answered := time.Now()
			if err != nil {
				record(err)
				return
			}
			var task struct {
				Status      string   `json:"status"`
				CompletedAt *float64 `json:"completed_at"`
			}
			if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &task) != nil {
				record(fmt.Errorf("wait: %d %s", resp.StatusCode, body))
				return
			}
			if task.Status != arbiter.StatusCompleted || task.CompletedAt == nil {
				record(fmt.Errorf("a wait answered with the task %s", task.Status))
				return
			}
			decided := time.UnixMilli(int64(*task.CompletedAt*1000 + 0.5))
			mu.Lock()
			_ = res.wake.RecordValue(max(answered.Sub(decided).Microseconds(), 1))
			mu.Unlock()
		}()
	}
	written.Wait()
	// Every request is written; the server has taken them in once it has
	// stopped spending CPU on them.
	settle(ctx, server.Process.Pid)
	res.heldRSSMB = rssMB(server.Process.Pid, "VmRSS:")
	res.heldPeakMB = rssMB(server.Process.Pid, "VmHWM:")
	if b.waitHold > 0 {
		b.logf("holding the waiters for %s", b.waitHold)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(b.waitHold):
		}
	}
	b.logf("%d waiters held; server RSS %.0f MB (peak so far %.0f MB); deciding their tasks with `arbiter worker`", sent.Load(), res.heldRSSMB, res.heldPeakMB)

	w, err := b.startWorker(ctx, dir)
	if err != nil {
		return err
	}
	done.Wait()
	w.stop()
	res.peakRSSMB = rssMB(server.Process.Pid, "VmHWM:")
	b.wait = &res
	if res.errors > 0 {
		b.logf("wait: %d errors, the first: %v", res.errors, res.firstError)
	}
	return nil
}

// createPending stores n pending tasks in the account, a hundred per call,
// and returns their ids.
func createPending(ctx context.Context, store *db.DB, accountID string, n int) ([]string, error) {
	in, err := arbiter.ParseTaskCreate(taskBody)
	if err != nil {
		return nil, err
	}
	return createPendingOf(ctx, store, accountID, n, in)
}

// createPendingOf creates n pending tasks of in for the account, in
// batches, and returns their ids.
func createPendingOf(ctx context.Context, store *db.DB, accountID string, n int, in arbiter.TaskCreate) ([]string, error) {
	ids := make([]string, 0, n)
	for len(ids) < n {
		creates := make([]arbiter.TaskCreate, min(batchSize, n-len(ids)))
		for i := range creates {
			creates[i] = in
		}
		created, err := store.CreateTasks(ctx, accountID, creates)
		if err != nil {
			return nil, err
		}
		for _, c := range created {
			if c.Err != nil {
				return nil, c.Err
			}
			ids = append(ids, c.Task.ID)
		}
	}
	return ids, nil
}

// startedWorker is an `arbiter worker` the bench started.
type startedWorker struct {
	pid     int
	started <-chan struct{} // closed when it logs that it started
	stop    func()
}

// startWorker starts `arbiter worker` with the rules backend deciding every
// task, ARBITER_WORKERS=b.workers unless extraEnv sets it.
func (b *bench) startWorker(ctx context.Context, dir string, extraEnv ...string) (*startedWorker, error) {
	rules := filepath.Join(dir, "rules.txt")
	if err := os.WriteFile(rules, []byte(alwaysRule), 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "worker.log"))
	if err != nil {
		return nil, err
	}
	started := make(chan struct{})
	cmd := exec.CommandContext(ctx, b.bin, "worker")
	env := []string{"ARBITER_AGENT=rules", "ARBITER_AGENT_RULES=" + rules, "ARBITER_WORKERS=" + strconv.Itoa(b.workers)}
	if slices.ContainsFunc(extraEnv, func(v string) bool { return strings.HasPrefix(v, "ARBITER_AGENT=") }) {
		// Another backend: a rules file beside it is refused at start.
		env = env[2:]
	}
	cmd.Env = b.env(append(env, extraEnv...)...)
	cmd.Stdout = logFile
	cmd.Stderr = &lineWatcher{w: logFile, want: []byte(`msg="worker started"`), seen: started}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	return &startedWorker{pid: cmd.Process.Pid, started: started, stop: func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logFile.Close()
	}}, nil
}

// lineWatcher passes writes on to w and closes seen the first time want
// appears in them.
type lineWatcher struct {
	w    io.Writer
	want []byte
	seen chan struct{}
	once sync.Once
}

func (l *lineWatcher) Write(p []byte) (int, error) {
	if bytes.Contains(p, l.want) {
		l.once.Do(func() { close(l.seen) })
	}
	return l.w.Write(p)
}

// settle waits until the process pid has spent no CPU for 200 ms, or 10 s
// have passed.
func settle(ctx context.Context, pid int) {
	p := strconv.Itoa(pid)
	last := procCPU(p)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		now := procCPU(p)
		if now == last {
			return
		}
		last = now
	}
}

// openFileLimit returns this process's soft limit on open files.
func openFileLimit() uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return lim.Cur
}

// errNoKey is returned when `arbiter admin create-key` printed nothing.
var errNoKey = errors.New("arbiter admin create-key printed no key")

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/arbiterhq/arbiter"
)

// measureLatency starts `arbiter serve` with its worker and the rules
// backend deciding every task, and at each rate of b.latencyRates creates
// tasks at that pace (open loop: a create is sent on schedule whatever the
// earlier ones are doing) for b.latencyDuration. Each create is followed by
// a long-poll GET /v1/tasks/{id}?wait=30 on another connection; its
// latency runs from sending the create to the long-poll's answer with the
// task completed.
func (b *bench) measureLatency(ctx context.Context) error {
	// A fresh database, so the worker has no earlier phase's tasks to
	// work first.
	if err := b.resetDatabase(ctx); err != nil {
		return err
	}
	key, err := b.createKey(ctx, "bench-latency@example.com")
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "arbiter-bench-latency")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	rules := filepath.Join(dir, "rules.txt")
	if err := os.WriteFile(rules, []byte(alwaysRule), 0o600); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	server := exec.Command(b.bin, "serve")
	server.Env = b.env("ARBITER_AGENT=rules", "ARBITER_AGENT_RULES="+rules, "ARBITER_WORKERS="+strconv.Itoa(b.workers))
	server.Stdout, server.Stderr = logFile, logFile
	if err := server.Start(); err != nil {
		return err
	}
	defer func() {
		_ = server.Process.Signal(syscall.SIGTERM)
		_ = server.Wait()
	}()
	b.serverPID = server.Process.Pid
	base := "http://" + b.addr
	if err := waitReady(ctx, base+"/demo/tasks"); err != nil {
		return fmt.Errorf("%w (server log: %s)", err, logFile.Name())
	}
	transport := func() *http.Client {
		return &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 1024, DisableCompression: true,
			DialContext: (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
		}}
	}
	creates, waits := transport(), transport()
	for _, rate := range b.latencyRates {
		b.logf("end to end at %d tasks/s for %s: create, then wait for completed on another connection", rate, b.latencyDuration)
		before := b.cpuNow()
		r := b.latencyAt(ctx, creates, waits, base, key, rate)
		r.cpu = b.cpuNow().minus(before)
		b.results = append(b.results, r)
	}
	return nil
}

// latencyAt drives one rate of measureLatency.
func (b *bench) latencyAt(ctx context.Context, creates, waits *http.Client, base, key string, rate int) result {
	r := result{name: fmt.Sprintf("end to end (%d/s)", rate), unitName: "tasks/s",
		hist: hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)}
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	one := func(sent time.Time) {
		err := func() error {
			req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/tasks", bytes.NewReader(taskBody))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			var task struct{ ID string }
			if err := do(creates, req, &task); err != nil {
				return err
			}
			req, _ = http.NewRequestWithContext(ctx, "GET", base+"/v1/tasks/"+task.ID+"?wait=30", nil)
			req.Header.Set("Authorization", "Bearer "+key)
			var got struct{ Status string }
			if err := do(waits, req, &got); err != nil {
				return err
			}
			if got.Status != arbiter.StatusCompleted {
				return fmt.Errorf("the wait answered the task %s", got.Status)
			}
			return nil
		}()
		took := time.Since(sent)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			r.errors++
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		_ = r.hist.RecordValue(took.Microseconds())
	}
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= b.latencyDuration {
			break
		}
		if wait := time.Until(at); wait > 0 {
			select {
			case <-ctx.Done():
				return r
			case <-time.After(wait):
			}
		}
		wg.Go(func() { one(at) })
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	r.ops = r.hist.TotalCount()
	r.perSec = float64(r.ops) / b.latencyDuration.Seconds()
	if firstErr != nil {
		b.logf("%s: %d errors, the first: %v", r.name, r.errors, firstErr)
	}
	return r
}

// latencyRatesFlag parses -latency-rates.
type latencyRatesFlag []int

func (f *latencyRatesFlag) String() string {
	b, _ := json.Marshal(*f)
	return string(b)
}

func (f *latencyRatesFlag) Set(s string) error {
	*f = nil
	for _, part := range bytes.Split([]byte(s), []byte(",")) {
		n, err := strconv.Atoi(string(part))
		if err != nil || n <= 0 {
			return fmt.Errorf("%q is not a rate in tasks per second", part)
		}
		*f = append(*f, n)
	}
	return nil
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// The webhooks phases (issue 15): deliveries per second to a receiver in
// this process, and the latency from a create to its task.completed
// delivery through the whole service.

// webhookLatencyConcurrency is how many creates wait for their delivery
// at once in the latency phase: light load, so the figure is the path's
// own latency, not a queue's.
const webhookLatencyConcurrency = 4

// receiver is the endpoint the bench's messages go to: it answers 204 at
// once and notes when each message arrived.
type receiver struct {
	srv      *http.Server
	url      string
	received atomic.Int64
	mu       sync.Mutex
	first    time.Time
	last     time.Time
	// arrived wakes whoever waits for a task's task.completed.
	arrived map[string]chan time.Time
}

func startReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &receiver{url: "http://" + ln.Addr().String() + "/hooks", arrived: map[string]chan time.Time{}}
	r.srv = &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	now := time.Now()
	body, _ := io.ReadAll(req.Body)
	var event struct {
		Type string `json:"type"`
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &event)
	r.received.Add(1)
	r.mu.Lock()
	if r.first.IsZero() {
		r.first = now
	}
	r.last = now
	var c chan time.Time
	if event.Type == arbiter.EventTaskCompleted {
		c = r.channel(event.Data.ID)
	}
	r.mu.Unlock()
	if c != nil {
		select {
		case c <- now:
		default:
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// channel returns the task's arrival channel; r.mu is held.
func (r *receiver) channel(taskID string) chan time.Time {
	c, ok := r.arrived[taskID]
	if !ok {
		c = make(chan time.Time, 1)
		r.arrived[taskID] = c
	}
	return c
}

// waitFor returns when the task's task.completed arrived.
func (r *receiver) waitFor(ctx context.Context, taskID string) (time.Time, error) {
	r.mu.Lock()
	c := r.channel(taskID)
	r.mu.Unlock()
	select {
	case t := <-c:
		return t, nil
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case <-time.After(30 * time.Second):
		return time.Time{}, fmt.Errorf("no task.completed for %s within 30s", taskID)
	}
}

// measureWebhooks runs both webhook phases on a fresh database.
func (b *bench) measureWebhooks(ctx context.Context) error {
	if err := b.resetDatabase(ctx); err != nil {
		return err
	}
	rx, err := startReceiver()
	if err != nil {
		return err
	}
	defer rx.srv.Close()
	store, err := db.Open(ctx, b.databaseURL, db.Options{DailyTaskCap: 100_000_000})
	if err != nil {
		return err
	}
	defer store.Close()
	const email = "bench-webhooks@example.com"
	account, err := store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		return err
	}
	if _, err := store.CreateWebhookEndpoint(ctx, account.ID, arbiter.WebhookEndpointInput{URL: rx.url}, true,
		arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "arbiter-bench-webhooks")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := b.measureDeliveries(ctx, store, account.ID, rx, dir); err != nil {
		return err
	}
	return b.measureCreateToDelivery(ctx, email, rx, dir)
}

// measureDeliveries queues webhookMessages pings and times `arbiter worker`
// delivering them all: deliveries per second from the first arrival to the
// last.
func (b *bench) measureDeliveries(ctx context.Context, store *db.DB, accountID string, rx *receiver, dir string) error {
	endpoints, err := store.ListWebhookEndpoints(ctx, accountID)
	if err != nil {
		return err
	}
	b.logf("queueing %d webhook messages", b.webhookMessages)
	var next sync.Mutex
	n := 0
	drive(ctx, "", b.concurrency, time.Hour, func(int, int) error {
		next.Lock()
		if n >= b.webhookMessages {
			next.Unlock()
			return errStop
		}
		n++
		next.Unlock()
		_, err := store.SendWebhookPing(ctx, accountID, endpoints[0].ID)
		return err
	})
	logFile, err := os.Create(filepath.Join(dir, "deliverer.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	b.logf("arbiter worker delivering them to a receiver on loopback")
	cmd := exec.Command(b.bin, "worker")
	cmd.Env = b.env("ARBITER_WEBHOOK_ALLOW_PRIVATE=1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	if err := awaitCount(ctx, start, "messages delivered", rx.received.Load, b.webhookMessages, logFile.Name()); err != nil {
		return err
	}
	rx.mu.Lock()
	elapsed := rx.last.Sub(rx.first)
	rx.mu.Unlock()
	b.results = append(b.results, result{
		name: "webhook deliveries", ops: int64(b.webhookMessages), elapsed: elapsed,
		perSec: float64(b.webhookMessages-1) / elapsed.Seconds(), unitName: "msgs/s",
	})
	return nil
}

// measureCreateToDelivery starts `arbiter serve` with its worker and the
// rules backend, and times each create from its request to the arrival of
// its task.completed message, a few at a time, for the phase's duration.
func (b *bench) measureCreateToDelivery(ctx context.Context, email string, rx *receiver, dir string) error {
	keyCmd := exec.CommandContext(ctx, b.bin, "admin", "create-key", "--email", email, "--name", "bench")
	keyCmd.Env, keyCmd.Stderr = b.env(), b.log
	out, err := keyCmd.Output()
	if err != nil {
		return fmt.Errorf("create-key: %w", err)
	}
	key := strings.TrimSpace(string(out))
	rules := filepath.Join(dir, "rules.txt")
	if err := os.WriteFile(rules, []byte(alwaysRule), 0o600); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(b.bin, "serve")
	cmd.Env = b.env("ARBITER_WEBHOOK_ALLOW_PRIVATE=1", "ARBITER_AGENT=rules", "ARBITER_AGENT_RULES="+rules)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	base := "http://" + b.addr
	if err := waitReady(ctx, base+"/demo/tasks"); err != nil {
		return fmt.Errorf("%w (server log: %s)", err, logFile.Name())
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: webhookLatencyConcurrency}}
	b.logf("create → task.completed delivered, %d at a time, for %s", webhookLatencyConcurrency, b.duration)
	r := drive(ctx, "create→delivery", webhookLatencyConcurrency, b.duration, func(int, int) error {
		req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/tasks", bytes.NewReader(taskBody))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		var task struct{ ID string }
		if err := do(client, req, &task); err != nil {
			return err
		}
		_, err := rx.waitFor(ctx, task.ID)
		return err
	})
	r.name, r.unitName = "create→delivery", "tasks/s"
	b.results = append(b.results, r)
	return nil
}

// awaitCount waits, from start, until got counts want, for at most 10
// minutes; what names the count and logName the log to read when it fails.
func awaitCount(ctx context.Context, start time.Time, what string, got func() int64, want int, logName string) error {
	for got() < int64(want) {
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("%d of %d %s in 10 minutes (log: %s)", got(), want, what, logName)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// printWebhookTargets writes the webhook phases against their targets.
func printWebhookTargets(w io.Writer, byName map[string]result) {
	if r, ok := byName["webhook deliveries"]; ok {
		fmt.Fprintf(w, "%-22s %.0f msgs/s (target ≥ 1000) %s\n", "webhook deliveries", r.perSec, verdict(r.perSec >= 1000))
	}
	if r, ok := byName["create→delivery"]; ok && r.hist != nil {
		p50 := float64(r.hist.ValueAtQuantile(50)) / 1000
		fmt.Fprintf(w, "%-22s p50 %.1f ms (target < 50 ms) %s\n", "create→delivery", p50, verdict(p50 < 50))
	}
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/internal/limits"
)

// The replicas phases (-phases=replicas, issue 45) measure what running
// several `arbiter serve` processes on one Postgres costs and buys:
//
//   - limit: what one request's check of a limit shared by every process
//     adds to it (internal/limits: a token bucket row spent by one
//     upsert, a slot taken and given back, a wait admitted and ended:
//     two slots), beside the same check in the process's memory: one
//     check after another, so that the latency is the check's own, not a
//     queue's; and the checks a second at -concurrency goroutines. Slots
//     are reserved in blocks: after a key's first check its slot comes
//     from its process's block, with no statement. A bucket's requests
//     are reserved in blocks only while its key's requests use a block
//     up before it lapses (every after it was reserved), and not at all
//     for an every under 10 ms: the bucket of a billion over 1,000 keys
//     (one every nanosecond) and the production-shaped one (60 at once
//     and one a second, as the Slack failures', over 100,000 keys, each
//     seen less often than once a second) both make a statement a check,
//     the first on rows that exist, the second as a client seen once in a
//     while does;
//   - 1 vs 3 servers: creates and gets over HTTP against one `arbiter
//     serve --worker=false`, then against three on one database, the
//     generator spreading its connections over them, in the same run.
//     On a machine of few cores the three servers, Postgres and the
//     generator share them, so the figure to read beside the throughput
//     is the CPU each request costs, by process.

// limitKeys is how many keys the limit phases spread their checks over;
// productionKeys how many the production-shaped bucket's checks are
// spread over: enough that a key is seen less often than its block
// lasts (a second), so that each check reserves a request with a
// statement, and never more than its bucket refills (it is never
// refused), at any -duration.
const (
	limitKeys      = 1000
	productionKeys = 100_000
)

// measureReplicas runs the replicas phases.
func (b *bench) measureReplicas(ctx context.Context) error {
	// A phase before may have sealed secrets (the chat phases) that a
	// server started without their key refuses to start over.
	if err := b.resetDatabase(ctx); err != nil {
		return err
	}
	store, err := db.Open(ctx, b.databaseURL, db.Options{})
	if err != nil {
		return err
	}
	defer store.Close()
	key := func(w, i int) string { return strconv.Itoa((w*7919 + i) % limitKeys) }
	b.serverPID = 0
	// A bucket that never runs dry: every check is an allowed spend, the
	// statement a request pays.
	slots := store.Limits().Slots("bench", 1_000_000)
	// A wait's admission: its key's slot and its account's, taken and
	// given back (limits.Waiters).
	waiters := limits.Waiters(store.Limits(), 1_000_000, 1_000_000)
	checks := []struct {
		name  string
		check func(w, i int) error
	}{
		{"rate (in process)", allowEach(limits.Local{}.Rate("bench", 1_000_000_000, time.Nanosecond), key)},
		{"rate (Postgres)", allowEach(store.Limits().Rate("bench", 1_000_000_000, time.Nanosecond), key)},
		{productionRate, allowEach(store.Limits().Rate("bench-production", 60, time.Second), func(w, i int) string {
			return strconv.Itoa((w*7919 + i*104_729) % productionKeys)
		})},
		{"slot (Postgres)", func(w, i int) error {
			release, ok, err := slots.Acquire(ctx, key(w, i))
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("a slot limit of a million refused")
			}
			release()
			return nil
		}},
		{"wait admitted (Postgres)", func(w, i int) error {
			leave, err := waiters.EnterWait(ctx, "acct_"+key(w, i), key(w, i))
			if err != nil {
				return err
			}
			leave()
			return nil
		}},
	}
	for _, c := range checks {
		b.logf("limit: %s, one check after another for %s", c.name, b.duration)
		before := b.cpuNow()
		r := drive(ctx, "limit: "+c.name, 1, b.duration, c.check)
		r.cpu = b.cpuNow().minus(before)
		b.results = append(b.results, r)
		b.logf("limit: %s at %d goroutines for %s", c.name, b.concurrency, b.duration)
		b.results = append(b.results, b.phase(ctx, fmt.Sprintf("limit: %s ×%d", c.name, b.concurrency), c.check))
	}

	keys, accountIDs, err := b.createKeys(ctx)
	if err != nil {
		return err
	}
	for _, servers := range []int{1, 3} {
		if err := b.replicaRound(ctx, servers, keys, accountIDs); err != nil {
			return err
		}
	}
	b.serverPID = 0
	return nil
}

// productionRate names the check of the production-shaped bucket.
const productionRate = "rate (Postgres, 60 a key and one a second)"

// allowEach returns a check that spends one request of rate's bucket of
// key(w, i), which must never be refused.
func allowEach(rate arbiter.RateLimit, key func(w, i int) string) func(w, i int) error {
	return func(w, i int) error {
		ok, _, err := rate.Allow(context.Background(), key(w, i))
		if err == nil && !ok {
			err = fmt.Errorf("a bucket the check never empties refused")
		}
		return err
	}
}

// replicaRound starts n `arbiter serve --worker=false` processes on the
// bench's database, on the bench's port and the ones after it, and
// measures creates and gets spread over them.
func (b *bench) replicaRound(ctx context.Context, n int, keys, accountIDs []string) error {
	host, port, err := net.SplitHostPort(b.addr)
	if err != nil {
		return err
	}
	first, err := strconv.Atoi(port)
	if err != nil {
		return err
	}
	var bases []string
	var pids []int
	for i := range n {
		addr := net.JoinHostPort(host, strconv.Itoa(first+i))
		logFile, err := os.CreateTemp("", "arbiter-bench-replica-*.log")
		if err != nil {
			return err
		}
		defer logFile.Close()
		cmd := exec.Command(b.bin, "serve", "--worker=false")
		cmd.Env = b.env("ARBITER_ADDR="+addr, "ARBITER_MIGRATE=off")
		cmd.Stdout, cmd.Stderr = logFile, logFile
		if err := cmd.Start(); err != nil {
			return err
		}
		defer func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
		}()
		base := "http://" + addr
		if err := waitReady(ctx, base+"/readyz"); err != nil {
			return fmt.Errorf("%w (server log: %s)", err, logFile.Name())
		}
		bases, pids = append(bases, base), append(pids, cmd.Process.Pid)
	}
	b.serverPIDs = pids
	defer func() { b.serverPIDs = nil }()
	label := fmt.Sprintf("%d server", n)
	if n > 1 {
		label += "s"
	}
	client := b.httpClient()
	ids := b.createOverHTTP(ctx, label, client, bases, keys, accountIDs)
	if err := vacuum(ctx, b.databaseURL); err != nil {
		return err
	}
	b.getOverHTTP(ctx, label, client, bases, ids)
	return nil
}

// httpClient returns a client that keeps -concurrency connections.
func (b *bench) httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		MaxIdleConns: b.concurrency, MaxIdleConnsPerHost: b.concurrency, MaxConnsPerHost: b.concurrency,
		DialContext: (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext,
	}}
}

// createOverHTTP measures POST /v1/tasks as the phase "create (HTTP,
// label)", connection w sending to bases[w % len(bases)], and returns the
// tasks each connection created (up to 100,000 each).
func (b *bench) createOverHTTP(ctx context.Context, label string, client *http.Client, bases, keys, accountIDs []string) [][]idAt {
	ids := make([][]idAt, b.concurrency)
	b.logf("POST /v1/tasks, %s", label)
	b.results = append(b.results, b.phase(ctx, "create (HTTP, "+label+")", func(w, i int) error {
		a := (w + i*b.concurrency) % len(keys)
		req, _ := http.NewRequestWithContext(ctx, "POST", bases[w%len(bases)]+"/v1/tasks", bytes.NewReader(taskBody))
		req.Header.Set("Authorization", "Bearer "+keys[a])
		req.Header.Set("Content-Type", "application/json")
		var task struct{ ID string }
		if err := do(client, req, &task); err != nil {
			return err
		}
		if len(ids[w]) < 100_000 {
			ids[w] = append(ids[w], idAt{id: task.ID, accountID: accountIDs[a], key: keys[a]})
		}
		return nil
	}))
	return ids
}

// getOverHTTP measures GET /v1/tasks/{id} of the tasks ids as the phase
// "get (HTTP, label)", each connection reading its own tasks from
// bases[w % len(bases)].
func (b *bench) getOverHTTP(ctx context.Context, label string, client *http.Client, bases []string, ids [][]idAt) {
	b.logf("GET /v1/tasks/{id}, %s", label)
	b.results = append(b.results, b.phase(ctx, "get (HTTP, "+label+")", func(w, i int) error {
		mine := ids[w]
		if len(mine) == 0 {
			return fmt.Errorf("connection %d created no task", w)
		}
		t := mine[(i*7919)%len(mine)]
		req, _ := http.NewRequestWithContext(ctx, "GET", bases[w%len(bases)]+"/v1/tasks/"+t.id, nil)
		req.Header.Set("Authorization", "Bearer "+t.key)
		return do(client, req, nil)
	}))
}

// printReplicas writes the replicas phases' targets and ratios.
func printReplicas(w io.Writer, byName map[string]result) {
	for _, c := range []struct{ check, label string }{
		{"rate (Postgres)", "shared rate limit"},
		{productionRate, "shared rate, 60/key"},
		{"slot (Postgres)", "shared slot limit"},
	} {
		if r, ok := byName["limit: "+c.check]; ok && r.hist != nil {
			p50, p99 := float64(r.hist.ValueAtQuantile(50))/1000, float64(r.hist.ValueAtQuantile(99))/1000
			fmt.Fprintf(w, "%-22s p50 %.3f ms, p99 %.3f ms a check (target p99 < 0.2 ms) %s\n", c.label,
				p50, p99, verdict(r.errors == 0 && r.ops > 0 && p99 < 0.2))
		}
	}
	for _, op := range []string{"create", "get"} {
		one, three := byName[op+" (HTTP, 1 server)"], byName[op+" (HTTP, 3 servers)"]
		if one.perSec == 0 || three.perSec == 0 {
			continue
		}
		fmt.Fprintf(w, "%-22s %.2f × 1 server (%.0f against %.0f req/s; CPU µs a request, servers + Postgres: %d against %d)\n",
			op+", 3 servers", three.perSec/one.perSec, three.perSec, one.perSec,
			(three.cpu.server+three.cpu.postgres).Microseconds()/max(three.ops, 1),
			(one.cpu.server+one.cpu.postgres).Microseconds()/max(one.ops, 1))
	}
}

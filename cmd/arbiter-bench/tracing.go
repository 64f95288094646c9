package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// The tracing phase measures what traces cost the hot path: `arbiter serve
// --worker=false` answering creates and gets with tracing off, then on
// (OTEL_EXPORTER_OTLP_ENDPOINT, the sampler left at its default,
// parentbased_always_on, which samples every request that brings no
// traceparent: each request's span and its store call's, and the create's
// trace context kept on the task's row, exported by OTLP over HTTP to a
// receiver that reads and discards them), each for -duration at
// -concurrency connections, alternating off, on, off, on so that the
// database's growth weighs on both alike. The figure to read is the
// server's CPU a request, on against off over both rounds (printTracing),
// which the issue wants under 10% more: on a shared machine throughput is
// noise.

// measureTracing runs the tracing phase.
func (b *bench) measureTracing(ctx context.Context) error {
	keys, accountIDs, err := b.createKeys(ctx)
	if err != nil {
		return err
	}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer receiver.Close()
	for round := 1; round <= 2; round++ {
		for _, on := range []bool{false, true} {
			env := b.env()
			label := "traces off"
			if on {
				label = "traces on"
				env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+receiver.URL)
			}
			if err := b.tracingRound(ctx, env, fmt.Sprintf("%s, round %d", label, round), keys, accountIDs); err != nil {
				return err
			}
		}
	}
	return nil
}

// tracingRound starts serve with env and measures its creates and gets.
func (b *bench) tracingRound(ctx context.Context, env []string, label string, keys, accountIDs []string) error {
	logFile, err := os.CreateTemp("", "arbiter-bench-tracing-*.log")
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(b.bin, "serve", "--worker=false")
	cmd.Env = env
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
	ids := b.createOverHTTP(ctx, label, client, []string{base}, keys, accountIDs)
	b.getOverHTTP(ctx, label, client, []string{base}, ids)
	return nil
}

// printTracing writes the tracing phase's cost: the server's CPU a create
// and a get with traces on against off, each side summed over its rounds.
func printTracing(w io.Writer, results []result) {
	for _, op := range []string{"create", "get"} {
		var on, off result
		for _, r := range results {
			side := &off
			switch {
			case strings.HasPrefix(r.name, op+" (HTTP, traces on,"):
				side = &on
			case !strings.HasPrefix(r.name, op+" (HTTP, traces off,"):
				continue
			}
			side.ops += r.ops
			side.errors += r.errors
			side.cpu.server += r.cpu.server
			side.elapsed += r.elapsed
		}
		if on.ops == 0 || off.ops == 0 {
			continue
		}
		onUS := float64(on.cpu.server.Microseconds()) / float64(on.ops)
		offUS := float64(off.cpu.server.Microseconds()) / float64(off.ops)
		change := (onUS/offUS - 1) * 100
		fmt.Fprintf(w, "%-22s %+.0f%% server CPU a request with traces on, default sampler (%.0f against %.0f µs; %.0f against %.0f req/s) (target < +10%%) %s\n",
			"traces: "+op, change, onUS, offUS, float64(on.ops)/on.elapsed.Seconds(), float64(off.ops)/off.elapsed.Seconds(),
			verdict(on.errors == 0 && off.errors == 0 && change < 10))
	}
}

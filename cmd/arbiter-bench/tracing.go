package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
)

// The tracing phase measures what traces cost the hot path: `arbiter serve
// --worker=false` answering creates and gets with tracing off, on at 100%
// (OTEL_TRACES_SAMPLER=parentbased_always_on: each request's span and its
// store call's, and the create's trace context kept on the task's row,
// exported by OTLP over HTTP to a receiver that reads and discards them),
// and on at Arbiter's default sampler (no OTEL_TRACES_SAMPLER:
// parentbased_traceidratio at telemetry.DefaultSampleRatio), each for
// -duration at -concurrency connections, alternating off, 100%, default
// twice so that the database's growth weighs on all alike. The figure to
// read is the server's CPU a request, each sampler against off over both
// rounds (printTracing): the issue wants the cost at 100% stated, and
// under 10% more at the default sampler. On a shared machine throughput
// is noise.

// tracingSamplers are the tracing phase's settings: a label and the
// OTEL_TRACES_SAMPLER it runs serve with ("" leaves the default, "-"
// turns tracing off).
var tracingSamplers = []struct{ label, sampler string }{
	{"traces off", "-"},
	{"traces at 100%", "parentbased_always_on"},
	{"traces at the default sampler", ""},
}

// measureTracing runs the tracing phase.
func (b *bench) measureTracing(ctx context.Context) error {
	// A phase before may have sealed secrets (the chat phases) that a
	// server started without their key refuses to start over.
	if err := b.resetDatabase(ctx); err != nil {
		return err
	}
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
		for _, s := range tracingSamplers {
			// The bench's own environment names no sampler or endpoint:
			// each round sets its own.
			env := slices.DeleteFunc(b.env(), func(kv string) bool { return strings.HasPrefix(kv, "OTEL_") })
			if s.sampler != "-" {
				env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+receiver.URL)
			}
			if s.sampler != "-" && s.sampler != "" {
				env = append(env, "OTEL_TRACES_SAMPLER="+s.sampler)
			}
			if err := b.tracingRound(ctx, env, fmt.Sprintf("%s, round %d", s.label, round), keys, accountIDs); err != nil {
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
// and a get with traces at 100% and at the default sampler against off,
// each side summed over its rounds; the target, under 10% more, is the
// default sampler's.
func printTracing(w io.Writer, results []result) {
	for _, op := range []string{"create", "get"} {
		sum := func(label string) result {
			var side result
			for _, r := range results {
				if strings.HasPrefix(r.name, op+" (HTTP, "+label+",") {
					side.ops += r.ops
					side.errors += r.errors
					side.cpu.server += r.cpu.server
					side.elapsed += r.elapsed
				}
			}
			return side
		}
		off := sum(tracingSamplers[0].label)
		if off.ops == 0 {
			continue
		}
		offUS := float64(off.cpu.server.Microseconds()) / float64(off.ops)
		for _, s := range tracingSamplers[1:] {
			on := sum(s.label)
			if on.ops == 0 {
				continue
			}
			onUS := float64(on.cpu.server.Microseconds()) / float64(on.ops)
			change := (onUS/offUS - 1) * 100
			line := fmt.Sprintf("%-22s %+.0f%% server CPU a request, %s (%.0f against %.0f µs; %.0f against %.0f req/s)",
				"traces: "+op, change, s.label, onUS, offUS, float64(on.ops)/on.elapsed.Seconds(), float64(off.ops)/off.elapsed.Seconds())
			if s.sampler == "" {
				line += " (target < +10%) " + verdict(on.errors == 0 && off.errors == 0 && change < 10)
			} else if on.errors > 0 {
				line += fmt.Sprintf(" (%d errors)", on.errors)
			}
			fmt.Fprintln(w, line)
		}
	}
}

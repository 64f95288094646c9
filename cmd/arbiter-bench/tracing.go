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
// -tracing-duration at -concurrency connections, in -tracing-rounds
// rounds of the three, each round in another order, so that the
// database's growth and the machine's other load weigh on all alike. The
// figure to read is the server's CPU a request (its own /proc stat), each
// sampler against off in the same round: the verdict is the median of
// the rounds' changes, which one noisy round cannot move (printTracing).
// The issue wants the cost at 100% stated, and under 10% more at the
// default sampler. On a shared machine throughput is noise.

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
	duration := b.duration
	b.duration = b.tracingDuration
	defer func() { b.duration = duration }()
	b.tracingLoad[0] = loadAverage()
	for round := 1; round <= b.tracingRounds; round++ {
		for i := range tracingSamplers {
			s := tracingSamplers[(i+round-1)%len(tracingSamplers)]
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
	b.tracingLoad[1] = loadAverage()
	return nil
}

// loadAverage returns the machine's load average over the last minute,
// from /proc/loadavg ("?" where it is unreadable).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if fields := strings.Fields(string(b)); err == nil && len(fields) > 0 {
		return fields[0]
	}
	return "?"
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
// and a get with traces at 100% and at the default sampler against off
// in the same round, the median of the rounds' changes and each round's,
// with the pooled µs a request and the load average before and after;
// the target, under 10% more, is the default sampler's median.
func printTracing(w io.Writer, results []result, rounds int, load [2]string) {
	for _, op := range []string{"create", "get"} {
		of := func(label string, round int) (result, bool) {
			for _, r := range results {
				if r.name == fmt.Sprintf("%s (HTTP, %s, round %d)", op, label, round) {
					return r, r.ops > 0
				}
			}
			return result{}, false
		}
		perOp := func(r result) float64 { return float64(r.cpu.server.Microseconds()) / float64(r.ops) }
		for _, s := range tracingSamplers[1:] {
			var changes []float64
			var on, off result
			for round := 1; round <= rounds; round++ {
				a, okA := of(s.label, round)
				z, okZ := of(tracingSamplers[0].label, round)
				if !okA || !okZ {
					continue
				}
				changes = append(changes, (perOp(a)/perOp(z)-1)*100)
				on.ops, on.errors, on.cpu.server = on.ops+a.ops, on.errors+a.errors, on.cpu.server+a.cpu.server
				off.ops, off.errors, off.cpu.server = off.ops+z.ops, off.errors+z.errors, off.cpu.server+z.cpu.server
			}
			if len(changes) == 0 {
				continue
			}
			each := make([]string, len(changes))
			for i, c := range changes {
				each[i] = fmt.Sprintf("%+.0f%%", c)
			}
			change := median(changes)
			line := fmt.Sprintf("%-22s %+.0f%% server CPU a request, %s (median of %d rounds: %s; pooled %.0f against %.0f µs; load %s → %s)",
				"traces: "+op, change, s.label, len(changes), strings.Join(each, " "), perOp(on), perOp(off), load[0], load[1])
			if s.sampler == "" {
				line += " (target < +10%) " + verdict(on.errors == 0 && off.errors == 0 && change < 10)
			} else if on.errors > 0 {
				line += fmt.Sprintf(" (%d errors)", on.errors)
			}
			fmt.Fprintln(w, line)
		}
	}
}

// median returns the middle of xs (the mean of the middle two for an even
// count); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

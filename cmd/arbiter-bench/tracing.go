package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"syscall"
)

// The tracing phase measures what traces cost the hot path: `arbiter serve
// --worker=false` answering creates and gets with tracing off, then on
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_SAMPLER=always_on: every
// request's span and its store call's, exported by OTLP over HTTP to a
// receiver that reads and discards them), each for -duration at
// -concurrency connections, alternating off, on, off, on so that the
// database's growth weighs on both alike. The figure to read is the
// change in creates and gets a second, which the issue wants under 10%.

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
				env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+receiver.URL, "OTEL_TRACES_SAMPLER=always_on")
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

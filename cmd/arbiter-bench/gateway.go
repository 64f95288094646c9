package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/arbiterhq/arbiter/internal/mcptest"
)

// The gateway phase (issue 47) measures what `arbiter gateway` adds to a
// tool call that no rule holds: the Go SDK's client calls the echo tool
// of mcptest's bank, a process of its own on stdio (this binary, started
// with envBenchUpstream set), first straight, then through `arbiter
// gateway --upstream-cmd` with a policy that allows echo, one call at a
// time, -gateway-calls calls each, in two alternating rounds so that the
// machine's drift weighs on both alike. The figure to read is the p99
// through the gateway less the upstream's own, which the issue wants
// under 2 ms. The server column of the table is the CPU of the process
// the client speaks to: the bank alone, the gateway through it.

// envBenchUpstream, set, makes this binary the bank on stdin and stdout.
const envBenchUpstream = "ARBITER_BENCH_UPSTREAM"

// gatewayWarmup are the calls of each connection before the measured ones.
const gatewayWarmup = 200

// serveBenchUpstream serves the bank on stdio when this process is it,
// and reports whether it was.
func serveBenchUpstream() bool {
	if os.Getenv(envBenchUpstream) == "" {
		return false
	}
	if err := (&mcptest.Upstream{}).Serve(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "arbiter-bench upstream:", err)
		os.Exit(1)
	}
	return true
}

// measureGateway runs the gateway phase.
func (b *bench) measureGateway(ctx context.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "arbiter-bench-gateway-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte("rules:\n  - tool: echo\n    allow: true\n"), 0o600); err != nil {
		return err
	}
	alone := result{name: "gateway: upstream alone", unitName: "calls/s", hist: hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)}
	through := result{name: "gateway: pass-through", unitName: "calls/s", hist: hdrhistogram.New(1, int64(10*time.Second/time.Microsecond), 3)}
	b.logf("calling echo %d times on the bank alone and through arbiter gateway, in two rounds", 2*b.gatewayCalls)
	for range 2 {
		upstream := exec.Command(self)
		upstream.Env = append(os.Environ(), envBenchUpstream+"=1")
		if err := b.callEcho(ctx, upstream, &alone); err != nil {
			return fmt.Errorf("the upstream alone: %w", err)
		}
		gw := exec.Command(b.bin, "gateway", "--upstream-cmd", "env "+envBenchUpstream+"=1 '"+self+"'", "--policy", policy,
			"--state", filepath.Join(dir, "state.json"), "--api-key", "bench", "--arbiter-url", "http://"+b.addr)
		if err := b.callEcho(ctx, gw, &through); err != nil {
			return fmt.Errorf("through the gateway: %w", err)
		}
	}
	b.results = append(b.results, alone, through)
	return nil
}

// callEcho connects to the MCP server cmd runs and adds the latency of
// -gateway-calls echo calls, after the warm-up, to r.
func (b *bench) callEcho(ctx context.Context, cmd *exec.Cmd, r *result) error {
	cmd.Stderr = io.Discard
	c := mcp.NewClient(&mcp.Implementation{Name: "arbiter-bench", Version: "1"}, nil)
	session, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return err
	}
	defer session.Close()
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "a message of a few words"}}
	pid := strconv.Itoa(cmd.Process.Pid)
	start := time.Now()
	var genCPU, serverCPU time.Duration
	for i := range gatewayWarmup + b.gatewayCalls {
		t0 := time.Now()
		res, err := session.CallTool(ctx, params)
		if err == nil && res.IsError {
			err = fmt.Errorf("echo answered an error: %+v", res.Content)
		}
		if err != nil {
			r.errors++
			if r.errors == 1 {
				fmt.Fprintf(b.log, "· %s: %v\n", r.name, err)
			}
			continue
		}
		if i == gatewayWarmup {
			start = time.Now()
			genCPU, serverCPU = procCPU("self"), procCPU(pid)
		}
		if i >= gatewayWarmup {
			_ = r.hist.RecordValue(time.Since(t0).Microseconds())
		}
	}
	r.elapsed += time.Since(start)
	r.cpu.generator += procCPU("self") - genCPU
	r.cpu.server += procCPU(pid) - serverCPU
	r.ops = r.hist.TotalCount()
	r.perSec = float64(r.ops) / r.elapsed.Seconds()
	return nil
}

// printGateway writes the gateway phase's verdict: the pass-through p99
// over the upstream's own.
func printGateway(w io.Writer, byName map[string]result) {
	alone, ok1 := byName["gateway: upstream alone"]
	through, ok2 := byName["gateway: pass-through"]
	if !ok1 || !ok2 || alone.ops == 0 || through.ops == 0 {
		return
	}
	p99Alone := float64(alone.hist.ValueAtQuantile(99)) / 1000
	p99Through := float64(through.hist.ValueAtQuantile(99)) / 1000
	added := p99Through - p99Alone
	fmt.Fprintf(w, "%-22s p99 %.2f ms over the upstream's %.2f ms: %+.2f ms (target < 2 ms) %s\n", "gateway pass-through",
		p99Through, p99Alone, added, verdict(alone.errors == 0 && through.errors == 0 && added < 2))
	p50Added := float64(through.hist.ValueAtQuantile(50)-alone.hist.ValueAtQuantile(50)) / 1000
	fmt.Fprintf(w, "%-22s p50 %+.2f ms; the gateway's CPU %d µs a call (the server column: the gateway through it, the bank alone) (for reference)\n",
		"gateway pass-through", p50Added, through.cpu.server.Microseconds()/through.ops)
}

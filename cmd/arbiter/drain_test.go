package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/config"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// TestServe_DrainingIsNotReadyAtOnce stops serve, as SIGTERM does, with
// ARBITER_DRAIN_DELAY set and a request in flight: /readyz answers 503 at
// once while /livez stays 200 and new requests are still served; when the
// drain ends, the request in flight is answered and serve returns.
func TestServe_DrainingIsNotReadyAtOnce(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			getenv := env(map[string]string{"ARBITER_DATABASE_URL": dbtest.URL(t, dialect), "ARBITER_DRAIN_DELAY": "1h"})
			cfg, err := config.FromEnv(getenv, serveScopes...)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Addr = "127.0.0.1:0"
			logs := &testutil.SyncBuffer{}
			endDrain := make(chan struct{})
			s := &server{cfg: cfg, api: true, worker: true, stderr: io.Discard,
				logger: slog.New(slog.NewTextHandler(logs, nil)), endDrain: endDrain}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				defer s.Close()
				done <- s.Run(ctx)
			}()
			base := "http://" + logged(t, logs, `msg=listening addr=(\S+)`)
			key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))
			waitProbe(t, base+"/readyz", http.StatusOK)
			status, created := testutil.APICall(t, "POST", base+"/v1/tasks", key, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"]}`)
			id, _ := created["id"].(string)
			if status != 200 || id == "" {
				t.Fatalf("create = %d %v", status, created)
			}
			// A request in flight through the drain: a wait for the task,
			// which the none backend hands to a person.
			conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, "GET /v1/tasks/"+id+"?wait=60&status=completed HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+key+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}

			cancel()
			res, err := http.Get(base + "/readyz")
			if err != nil {
				t.Fatalf("/readyz while draining: %v", err)
			}
			var ready map[string]any
			json.NewDecoder(res.Body).Decode(&ready)
			res.Body.Close()
			if res.StatusCode != http.StatusServiceUnavailable || ready["error"] != "This process is shutting down." {
				t.Errorf("/readyz at once after the stop signal = %d %v, want 503 shutting down", res.StatusCode, ready)
			}
			if status := probeStatus(t, base+"/livez"); status != http.StatusOK {
				t.Errorf("/livez while draining = %d, want 200", status)
			}
			if status, task := testutil.APICall(t, "POST", base+"/v1/tasks", key, `{"prompt":"Another?","allowed_verdicts":["approve","reject"]}`); status != 200 {
				t.Errorf("a create while draining = %d %v, want it served", status, task)
			}
			select {
			case err := <-done:
				t.Fatalf("serve returned during the drain delay: %v", err)
			default:
			}

			close(endDrain)
			_ = conn.SetReadDeadline(testutil.Patience(t))
			answer, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("the request in flight after the drain: %v", err)
			}
			var task map[string]any
			json.NewDecoder(answer.Body).Decode(&task)
			answer.Body.Close()
			if answer.StatusCode != http.StatusOK || task["id"] != id {
				t.Errorf("the request in flight after the drain = %d %v", answer.StatusCode, task)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("serve returned %v", err)
				}
			case <-time.After(time.Until(testutil.Patience(t))):
				t.Fatal("serve did not stop after the drain's end")
			}
			if !strings.Contains(logs.String(), "msg=draining delay=1h0m0s") {
				t.Errorf("serve did not log its drain:\n%s", logs)
			}
		})
	}
}

// TestWorker_ProbesOnTheMetricsListener: `arbiter worker`, which serves no
// HTTP else, answers /livez and /readyz beside /metrics, ready once its
// worker has beaten.
func TestWorker_ProbesOnTheMetricsListener(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{"ARBITER_DATABASE_URL": dbtest.URL(t, "sqlite"), "ARBITER_METRICS_ADDR": "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"worker"}, getenv, nil, io.Discard, logs) }()
	base := "http://" + logged(t, logs, `msg="metrics listening[^"]*" addr=(\S+)`)
	if status := probeStatus(t, base+"/livez"); status != http.StatusOK {
		t.Errorf("worker /livez = %d, want 200", status)
	}
	waitProbe(t, base+"/readyz", http.StatusOK)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("worker returned %v", err)
	}
}

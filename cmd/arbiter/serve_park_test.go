package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// TestServe_ParkedWaiterAnsweredAtShutdown stops arbiter serve, as SIGTERM
// does, while a request waiting for its task is parked: it is answered at
// once with the task as it is and its connection closed, and serve
// returns without error, having waited for it.
func TestServe_ParkedWaiterAnsweredAtShutdown(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			serverEnv := env(map[string]string{"ARBITER_DATABASE_URL": dbtest.URL(t, dialect), "ARBITER_PPROF_ADDR": "127.0.0.1:0"})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			logs := &testutil.SyncBuffer{}
			done := make(chan error, 1)
			go func() {
				done <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0"}, serverEnv, nil, &bytes.Buffer{}, logs)
			}()
			addr := logged(t, logs, `msg=listening addr=(\S+)`)
			profiler := logged(t, logs, `msg="profiler listening" addr=(\S+)`)
			key := strings.TrimSpace(runOK(t, serverEnv, "admin", "create-key", "--email", "ops@example.com"))

			req, _ := http.NewRequest("POST", "http://"+addr+"/v1/tasks",
				strings.NewReader(`{"prompt":"Approve this refund?","allowed_verdicts":["approve","reject"]}`))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var task map[string]any
			json.NewDecoder(res.Body).Decode(&task)
			res.Body.Close()
			id, _ := task["id"].(string)
			if res.StatusCode != http.StatusOK || id == "" {
				t.Fatalf("create: %d %v", res.StatusCode, task)
			}

			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, "GET /v1/tasks/"+id+"?wait=60 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+key+"\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			// Parked: its goroutine is the parking lot's.
			for deadline := testutil.Patience(t); !strings.Contains(goroutines(t, profiler), "web.(*ParkingLot).wait"); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the waiting request was never parked")
				}
			}

			stopped := time.Now()
			cancel()
			_ = conn.SetReadDeadline(testutil.Patience(t))
			r := bufio.NewReader(conn)
			res, err = http.ReadResponse(r, nil)
			if err != nil {
				t.Fatalf("the parked request at shutdown: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			task = nil
			if json.Unmarshal(body, &task) != nil || res.StatusCode != http.StatusOK || task["id"] != id || !res.Close {
				t.Fatalf("the parked request at shutdown: %d %v %s", res.StatusCode, res.Header, body)
			}
			if _, err := r.ReadByte(); err != io.EOF {
				t.Errorf("after the answer at shutdown: %v, want EOF", err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("serve returned %v", err)
				}
			case <-time.After(time.Until(testutil.Patience(t))):
				t.Fatal("serve did not stop")
			}
			if d := time.Since(stopped); d > 30*time.Second {
				t.Errorf("serve stopped %s after it was asked to", d)
			}
		})
	}
}

// logged waits for a line of logs matching pattern and returns its first
// group.
func logged(t *testing.T, logs *testutil.SyncBuffer, pattern string) string {
	t.Helper()
	re := regexp.MustCompile(pattern)
	for deadline := testutil.Patience(t); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no %s in the log:\n%s", pattern, logs.String())
	return ""
}

// goroutines returns the goroutine profile the profiler at addr serves.
func goroutines(t *testing.T, addr string) string {
	t.Helper()
	res, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

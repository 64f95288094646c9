package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/openapi/openapitest"
)

// waited is the answer to one GET /v1/tasks/{id}?wait=N.
type waited struct {
	status  int
	task    map[string]any
	body    string
	elapsed time.Duration
	err     error
}

// getWaiting reads the task with ?wait=seconds through client, validating
// the answer against the OpenAPI document. It does not fail the test, so
// goroutines may call it.
func getWaiting(t *testing.T, client *http.Client, base, key, id string, seconds int) waited {
	req, err := http.NewRequest("GET", fmt.Sprintf("%s/v1/tasks/%s?wait=%d", base, id, seconds), nil)
	if err != nil {
		return waited{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	start := time.Now()
	res, err := client.Do(req)
	if err != nil {
		return waited{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	w := waited{status: res.StatusCode, body: string(b), elapsed: time.Since(start), err: err}
	if err == nil && res.StatusCode == http.StatusOK {
		w.err = json.Unmarshal(b, &w.task)
	}
	openapitest.ValidateResponse(t, req, res.StatusCode, res.Header, b)
	return w
}

// waitForWatchers waits until the store has n watches open: the waiting
// requests are past their first read. It waits as long as the test may
// (testutil.Patience): a thousand first reads on a loaded machine may take
// minutes.
func waitForWatchers(t *testing.T, store *db.DB, n int) {
	t.Helper()
	deadline := testutil.Patience(t)
	for store.Waiting() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests are waiting", store.Waiting(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// decider returns the store decisions are made through: on Postgres a
// second store on the same database, as another server process would be,
// so that only LISTEN/NOTIFY can carry the decision to the waiting server;
// on SQLite, which serves one process, the server's own store.
func decider(t *testing.T, a *api) *db.DB {
	if a.store.Dialect() == db.Postgres {
		return dbtest.OpenURL(t, a.url, db.Options{})
	}
	return a.store
}

// sendToHuman claims every pending task of the store and sends it to a
// person, as a worker with the none agent would.
func sendToHuman(t *testing.T, store *db.DB) {
	t.Helper()
	for {
		claimed, err := store.ClaimTasks(ctx, "test-worker", 500, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(claimed) == 0 {
			return
		}
		for _, task := range claimed {
			if err := store.FinishAgentAttempt(ctx, "test-worker", task.ID, arbiter.AgentStep{
				Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: 1}, Next: arbiter.StatusHumanNeeded,
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestTaskGet_WaitErrors(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		for _, q := range []string{"wait=61", "wait=-1", "wait=1.5", "wait=", "wait=abc", "wait=%2B5", "wait=%205",
			"wait=1&wait=2", "wait=99999999999999999999", "wait=1e1", "wait=%zz"} {
			start := time.Now()
			status, h, b := a.do("GET", "/v1/tasks/"+id+"?"+q, key, "")
			if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, "wait") && !strings.Contains(msg, "query") {
				t.Errorf("?%s: %q does not say what is wrong", q, msg)
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("?%s was refused only after %s", q, time.Since(start))
			}
		}
		// The limits themselves are fine.
		for _, q := range []string{"wait=0", "wait=60"} {
			if q == "wait=60" {
				decideNow(t, a, id)
			}
			if status, _, b := a.do("GET", "/v1/tasks/"+id+"?"+q, key, ""); status != http.StatusOK {
				t.Errorf("?%s = %d %s", q, status, b)
			}
		}
		// An unknown task is 404 at once, as without wait.
		status, h, b := a.do("GET", "/v1/tasks/tsk_0123456789abcdef?wait=60", key, "")
		wantError(t, status, h, b, http.StatusNotFound)
		if a.store.Waiting() != 0 {
			t.Errorf("%d watches left open", a.store.Waiting())
		}
	})
}

// decideNow has a reviewer decide the task through the server's store.
func decideNow(t *testing.T, a *api, id string) {
	t.Helper()
	sendToHuman(t, a.store)
	account, err := a.store.FindAccountByEmail(ctx, "a@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.store.DecideTask(ctx, account.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
		t.Fatal(err)
	}
}

func TestTaskGet_WaitAnswersAfterNSecondsWhenNothingHappens(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		w := getWaiting(t, a.srv.Client(), a.srv.URL, key, id, 1)
		if w.err != nil || w.status != http.StatusOK || w.task["status"] != "pending" || w.task["id"] != id {
			t.Fatalf("wait=1 = %d %s (%v)", w.status, w.body, w.err)
		}
		if w.elapsed < time.Second {
			t.Errorf("wait=1 answered after %s, before its second was up", w.elapsed)
		}
		if a.store.Waiting() != 0 {
			t.Errorf("%d watches left open", a.store.Waiting())
		}
	})
}

func TestTaskGet_WaitAnswersAFinalTaskAtOnce(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		decideNow(t, a, id)
		w := getWaiting(t, a.srv.Client(), a.srv.URL, key, id, 60)
		if w.err != nil || w.task["status"] != "completed" || w.elapsed > 30*time.Second {
			t.Fatalf("wait=60 on a completed task = %d %s after %s (%v)", w.status, w.body, w.elapsed, w.err)
		}
	})
}

// TestTaskGet_WaitReturnsOnADecision decides a task while a request waits
// for it with wait=30: the request answers with the completed task, which
// it can only have heard of through the store's wake-up (on Postgres, from
// another process's NOTIFY).
func TestTaskGet_WaitReturnsOnADecision(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		account, _ := a.store.FindAccountByEmail(ctx, "a@example.com")
		other := decider(t, a)
		const rounds = 10
		var latencies []time.Duration
		for range rounds {
			id := createTask(t, a, key, goodTask)["id"].(string)
			sendToHuman(t, other)
			answer := make(chan waited, 1)
			go func() { answer <- getWaiting(t, a.srv.Client(), a.srv.URL, key, id, 30) }()
			waitForWatchers(t, a.store, 1)

			if _, err := other.DecideTask(ctx, account.ID, id, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
			decided := time.Now()
			w := <-answer
			latencies = append(latencies, time.Since(decided))
			if w.err != nil || w.status != http.StatusOK || w.task["status"] != "completed" || w.task["final_verdict"] != "reject" {
				t.Fatalf("the waiting request answered %d %s (%v)", w.status, w.body, w.err)
			}
			// The wait was cut short by the decision, not by its 30 s.
			if w.elapsed >= 20*time.Second {
				t.Fatalf("the waiting request answered after %s", w.elapsed)
			}
			waitForWatchers(t, a.store, 0)
		}
		var sum time.Duration
		for _, l := range latencies {
			sum += l
		}
		t.Logf("%s: answered %s on average (max %s) after the decision's commit, over %d decisions",
			a.store.Dialect(), sum/rounds, maxOf(latencies), rounds)
	})
}

func maxOf(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// TestTaskGet_ThousandWaitersOnEightConnections has 1,000 requests wait at
// once on a store of 8 connections: waiting holds none, and when the tasks
// complete every request is answered with its completed task. Each asks
// again when its 60 seconds pass first, as a client's long-poll loop does
// (on a loaded machine a thousand first reads, and the completions, may
// take longer than one wait): the test waits for the tasks' state, never
// for a length of time.
func TestTaskGet_ThousandWaitersOnEightConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a thousand waiters take tens of seconds; make test runs it")
	}
	// Not parallel: it measures the process's heap and the store's open
	// connections.
	const n = 1000
	// A thousand first reads queue for eight connections; on a busy
	// machine that queue may take longer than the store's usual bound,
	// which is not what this test measures.
	eachAPI(t, db.Options{MaxOpenConns: 8, DailyTaskCap: 2 * n, Timeout: time.Minute}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		account, _ := a.store.FindAccountByEmail(ctx, "a@example.com")
		ids := make([]string, n)
		for i := range ids {
			task, err := a.store.CreateTask(ctx, account.ID, arbiter.TaskCreate{Prompt: "p", AllowedVerdicts: []string{"approve"},
				ConfidenceThreshold: 0.5, TaskType: "decide", Touchpoint: "chat"})
			if err != nil {
				t.Fatal(err)
			}
			ids[i] = task.ID
		}
		// The key has been used before, as a client's key has by the time
		// it waits for its tasks: a key's first uses are limited while
		// its check is in flight.
		if status, _, b := a.do("GET", "/v1/tasks/"+ids[0], key, ""); status != http.StatusOK {
			t.Fatalf("read: %d %s", status, b)
		}
		var before, waiting runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
		defer client.CloseIdleConnections()
		answers := make(chan waited, n)
		var wg sync.WaitGroup
		var early atomic.Int32 // answers before any task completed
		var completing atomic.Bool
		for _, id := range ids {
			wg.Go(func() {
				for {
					w := getWaiting(t, client, a.srv.URL, key, id, 60)
					timedOut := w.err == nil && w.status == http.StatusOK && w.task["status"] != "completed" && w.elapsed >= 60*time.Second
					if timedOut {
						continue // the wait's time is up: ask again
					}
					if !completing.Load() && early.Add(1) <= 3 {
						t.Errorf("a request answered before its task completed and before its wait ended: %d after %s %.200s (%v)",
							w.status, w.elapsed, w.body, w.err)
					}
					answers <- w
					return
				}
			})
		}
		waitForWatchers(t, a.store, n)
		completing.Store(true)
		runtime.GC()
		runtime.ReadMemStats(&waiting)
		// Both ends of each connection live in this process.
		t.Logf("%s: %d KiB of heap and stacks per waiting request, client side included", a.store.Dialect(),
			(waiting.HeapInuse+waiting.StackInuse-before.HeapInuse-before.StackInuse)/n/1024)
		if open := a.store.OpenConnections(); open > 8 {
			t.Errorf("%d connections open while %d requests wait", open, n)
		}

		// The agent completes every task, through another process on
		// Postgres.
		other := decider(t, a)
		for {
			claimed, err := other.ClaimTasks(ctx, "w", 500, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if len(claimed) == 0 {
				break
			}
			for _, task := range claimed {
				verdict, confidence := "approve", 0.9
				if err := other.FinishAgentAttempt(ctx, "w", task.ID, arbiter.AgentStep{Next: arbiter.StatusCompleted,
					Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence, StartedAt: 1}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		wg.Wait()
		close(answers)
		completed := 0
		for w := range answers {
			if w.err == nil && w.status == http.StatusOK && w.task["status"] == "completed" {
				completed++
			} else if completed == 0 {
				t.Errorf("a waiting request answered %d %.200s (%v)", w.status, w.body, w.err)
			}
		}
		if completed != n {
			t.Fatalf("%d of %d waiting requests answered with their completed task", completed, n)
		}
	})
}

// TestTaskGet_WaitAnsweredAtShutdown shuts the server down, as SIGTERM does
// in arbiter serve, while a request waits: it is answered at once with the
// task as it is, and the shutdown does not wait out the request's minute.
func TestTaskGet_WaitAnsweredAtShutdown(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		answer := make(chan waited, 1)
		go func() { answer <- getWaiting(t, a.srv.Client(), a.srv.URL, key, id, 60) }()
		waitForWatchers(t, a.store, 1)

		shutdownCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := a.srv.Config.Shutdown(shutdownCtx); err != nil {
			t.Fatalf("shutdown: %v", err)
		}
		w := <-answer
		if w.err != nil || w.status != http.StatusOK || w.task["status"] != "pending" || w.elapsed > 30*time.Second {
			t.Fatalf("the waiting request answered %d %s after %s (%v)", w.status, w.body, w.elapsed, w.err)
		}
	})
}

// TestTaskGet_WaitOutlastsTheServerTimeouts serves with read and write
// timeouts shorter than the wait, as arbiter serve's 30 s are shorter than
// a minute's wait: the request waits its whole time and its answer arrives
// whole.
func TestTaskGet_WaitOutlastsTheServerTimeouts(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id := createTask(t, a, key, goodTask)["id"].(string)
		srv := httptest.NewUnstartedServer(a.srv.Config.Handler)
		srv.Config.ReadTimeout = 500 * time.Millisecond
		srv.Config.WriteTimeout = 500 * time.Millisecond
		srv.Start()
		defer srv.Close()
		w := getWaiting(t, srv.Client(), srv.URL, key, id, 2)
		if w.err != nil || w.status != http.StatusOK || w.task["status"] != "pending" {
			t.Fatalf("wait=2 behind 500 ms timeouts = %d %s (%v)", w.status, w.body, w.err)
		}
		if w.elapsed < 2*time.Second {
			t.Errorf("wait=2 behind a 500 ms read timeout answered after %s", w.elapsed)
		}
	})
}

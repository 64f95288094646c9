package client_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/db"
)

// TestClient_WaitTask_LongPolls waits for a task that a reviewer decides
// while the client's request is held by the server: one request carries the
// whole wait and brings the decision.
func TestClient_WaitTask_LongPolls(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		var mu sync.Mutex
		var queries []string
		c := client.New(client.WithAPIKey(s.key), client.WithBaseURL(s.url), client.WithHTTPClient(&http.Client{
			Timeout: 30 * time.Second,
			Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
				mu.Lock()
				queries = append(queries, r.URL.RawQuery)
				mu.Unlock()
				return http.DefaultTransport.RoundTrip(r)
			}),
		}))
		task, err := c.CreateTask(ctx, refund)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		queries = nil
		mu.Unlock()

		done := make(chan *client.Task, 1)
		go func() {
			waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			t, err := c.WaitTask(waitCtx, task.ID, nil)
			if err != nil {
				t = nil
			}
			done <- t
		}()
		for s.store.Waiting() == 0 {
			time.Sleep(time.Millisecond)
		}
		s.decide(t, task.ID, "approve")
		got := <-done
		if got == nil || got.Status != client.StatusCompleted || *got.FinalVerdict != "approve" || !got.Final() {
			t.Fatalf("WaitTask = %+v", got)
		}
		mu.Lock()
		defer mu.Unlock()
		// 20 s, the default, fits the client's 30 s timeout with its margin.
		if len(queries) != 1 || queries[0] != "wait=20" {
			t.Errorf("WaitTask sent %q, want one long-poll of 20 s", queries)
		}
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestClient_WaitTask_PollsAServerThatIgnoresWait talks to a server that
// answers at once whatever the wait asks: the client reads again after its
// poll interval, doubling, until the task is completed.
func TestClient_WaitTask_PollsAServerThatIgnoresWait(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	var times []time.Time
	url, calls := fake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries, times = append(queries, r.URL.RawQuery), append(times, time.Now())
		mu.Unlock()
		if n < 4 {
			answerJSON(w, http.StatusOK, strings.Replace(taskJSON, `"status":"completed"`, `"status":"pending"`, 1))
			return
		}
		answerJSON(w, http.StatusOK, taskJSON)
	})
	got, err := fakeClient(url).WaitTask(ctx, "tsk_0123456789abcdef", &client.WaitOptions{PollInterval: 40 * time.Millisecond})
	if err != nil || got.Status != client.StatusCompleted {
		t.Fatalf("WaitTask = %+v, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls.Load() != 4 {
		t.Fatalf("%d requests, want 4", calls.Load())
	}
	for i, q := range queries {
		if q != "wait=20" {
			t.Errorf("request %d asked %q, want wait=20", i, q)
		}
	}
	// 40 ms, then 80, then 160 between the reads.
	for i, want := range []time.Duration{40, 80, 160} {
		if gap := times[i+1].Sub(times[i]); gap < want*time.Millisecond {
			t.Errorf("read %d came %s after the one before, want at least %d ms", i+2, gap, want)
		}
	}
}

// TestClient_WaitTask_LongPollFitsTheTimeouts asks for no longer than the
// HTTP client's timeout, less its margin, and the context allow.
func TestClient_WaitTask_LongPollFitsTheTimeouts(t *testing.T) {
	var mu sync.Mutex
	var queries []string
	url, _ := fake(t, func(n int, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		answerJSON(w, http.StatusOK, taskJSON)
	})
	c := fakeClient(url, client.WithHTTPClient(&http.Client{Timeout: 12 * time.Second}))
	for _, tc := range []struct {
		opts    *client.WaitOptions
		timeout time.Duration
		want    string
	}{
		{nil, time.Hour, "wait=7"},
		{&client.WaitOptions{LongPoll: 3 * time.Second}, time.Hour, "wait=3"},
		{nil, 4500 * time.Millisecond, "wait=4"},
		{nil, 500 * time.Millisecond, ""},
		{&client.WaitOptions{LongPoll: -1}, time.Hour, ""},
	} {
		mu.Lock()
		queries = nil
		mu.Unlock()
		waitCtx, cancel := context.WithTimeout(ctx, tc.timeout)
		_, err := c.WaitTask(waitCtx, "tsk_0123456789abcdef", tc.opts)
		cancel()
		mu.Lock()
		if err != nil || len(queries) != 1 || queries[0] != tc.want {
			t.Errorf("%+v within %s: asked %q (%v), want %q", tc.opts, tc.timeout, queries, err, tc.want)
		}
		mu.Unlock()
	}
	big := fakeClient(url, client.WithHTTPClient(&http.Client{}))
	mu.Lock()
	queries = nil
	mu.Unlock()

	_, err := big.WaitTask(ctx, "tsk_0123456789abcdef", &client.WaitOptions{LongPoll: 5 * time.Minute})
	mu.Lock()
	defer mu.Unlock()
	if err != nil || len(queries) != 1 || queries[0] != "wait=60" {
		t.Errorf("a 5-minute long-poll without a client timeout asked %q (%v), want wait=60", queries, err)
	}
}

// TestClient_WaitTask_Expired waits for a task whose deadline passes first:
// WaitTask returns it, expired, without an error.
func TestClient_WaitTask_Expired(t *testing.T) {
	// The store's clock runs two minutes behind, so a minute's deadline
	// has passed when the task is made.
	eachServer(t, db.Options{Now: func() time.Time { return time.Now().Add(-2 * time.Minute) }}, func(t *testing.T, s *server) {
		c := s.client()
		task, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve"}, DeadlineSeconds: 60})
		if err != nil {
			t.Fatal(err)
		}
		if task.DeadlineAt == nil || !task.DeadlineAt.Equal(task.CreatedAt.Add(time.Minute)) || task.ExpiredAt != nil {
			t.Fatalf("created = %+v", task)
		}
		done := make(chan *client.Task, 1)
		go func() {
			got, err := c.WaitTask(ctx, task.ID, nil)
			if err != nil {
				t.Error(err)
			}
			done <- got
		}()
		for s.store.Waiting() == 0 {
			time.Sleep(time.Millisecond)
		}
		if _, err := s.store.ExpireTasks(ctx, 10); err != nil {
			t.Fatal(err)
		}
		got := <-done
		if got == nil || got.Status != client.StatusExpired || !got.Final() || got.ExpiredAt == nil || got.FinalVerdict != nil || got.CompletedAt != nil {
			t.Fatalf("WaitTask = %+v", got)
		}
	})
}

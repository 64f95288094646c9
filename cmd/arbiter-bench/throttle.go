package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

// The provider phases (-phases=provider) run `arbiter worker` with the
// openai backend against a fake OpenAI-compatible server in this process,
// on loopback. Their scale is set by flags; the throttled phase's time may
// be scaled down as a whole (-provider-latency with -throttle-rpm: 60 ms and
// 8,000 a minute keep the default's ratios, though not the limiter's own
// times, so a scaled run is a smoke test):
//
//   - throttle: a provider that answers in -provider-latency and allows
//     -throttle-rpm requests a minute, answering 429 with Retry-After
//     beyond; -throttle-tasks tasks are decided at ≥ 95% of its limit, none
//     sent to a person for throttling, and ≤ 1% of the calls made once the
//     limiter settled are answered 429.
//   - busy: a provider that answers in -busy-latency (2 s) and never
//     throttles; ARBITER_WORKERS (-workers) slots keep it busy: throughput
//     = slots / latency within 10%.

// providerResult is what a provider phase measured.
type providerResult struct {
	name       string
	tasks      int
	elapsed    time.Duration
	perSec     float64 // tasks decided a second
	target     float64 // the throughput the phase is measured against
	calls      int64   // calls the provider received
	throttled  int64   // of which it answered 429
	settled    int64   // calls received after the settling time
	settled429 int64   // of which it answered 429
	humans     int     // tasks sent to a person
	slots      int
	latency    time.Duration
	rpm        float64
}

// fakeProvider is an OpenAI-compatible Chat Completions server that
// answers every call in latency with a confident "approve", and allows rpm
// calls a minute when rpm is above zero: a token bucket of a second's
// calls, refilled continuously. A call beyond it is answered at once with
// 429 and a Retry-After in seconds (whole seconds at scale 1), the wait
// until the bucket has a token again, at least a second.
type fakeProvider struct {
	srv     *httptest.Server
	latency time.Duration
	scale   float64 // the time scale: 1 at an 800 ms latency
	bucket  *rate.Limiter

	mu                sync.Mutex
	settleAt          time.Time
	calls, throttled  int64
	settled, settled4 int64
}

// providerAnswer is the body of every successful call.
var providerAnswer = func() []byte {
	content := `{"verdict":"approve","confidence":0.99,"rationale":"bench"}`
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion", "model": "bench",
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": content}}},
	})
	return b
}()

func startFakeProvider(latency time.Duration, rpm float64) *fakeProvider {
	p := &fakeProvider{latency: latency, scale: float64(latency) / float64(800*time.Millisecond)}
	if rpm > 0 {
		perSec := rpm / 60
		p.bucket = rate.NewLimiter(rate.Limit(perSec), max(1, int(perSec)))
	}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

func (p *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	now := time.Now()
	allowed, wait := true, time.Duration(0)
	if p.bucket != nil {
		res := p.bucket.ReserveN(now, 1)
		if d := res.DelayFrom(now); d > 0 {
			res.CancelAt(now)
			allowed, wait = false, d
		}
	}
	p.mu.Lock()
	p.calls++
	after := !p.settleAt.IsZero() && now.After(p.settleAt)
	if after {
		p.settled++
	}
	if !allowed {
		p.throttled++
		if after {
			p.settled4++
		}
	}
	p.mu.Unlock()
	if !allowed {
		// Whole seconds, as an HTTP Retry-After says, on the phase's
		// time scale.
		secs := math.Max(1, math.Ceil(wait.Seconds()/p.scale)) * p.scale
		w.Header().Set("Retry-After", strconv.FormatFloat(secs, 'f', -1, 64))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`)
		return
	}
	select {
	case <-time.After(p.latency):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(providerAnswer)
}

// settleFrom starts counting the calls made once the limiter settled.
func (p *fakeProvider) settleFrom(at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settleAt = at
}

func (p *fakeProvider) counts() (calls, throttled, settled, settled429 int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls, p.throttled, p.settled, p.settled4
}

// measureProvider runs the throttle and busy phases.
func (b *bench) measureProvider(ctx context.Context) error {
	if b.throttleTasks > 0 {
		r, err := b.runProvider(ctx, "provider: throttled", b.throttleTasks, b.providerLatency, b.throttleRPM, b.throttleWorkers)
		if err != nil {
			return err
		}
		r.target = r.rpm / 60
		b.provider = append(b.provider, r)
	}
	if b.busyTasks > 0 {
		r, err := b.runProvider(ctx, "provider: busy", b.busyTasks, b.busyLatency, 0, b.workers)
		if err != nil {
			return err
		}
		r.target = float64(r.slots) / b.busyLatency.Seconds()
		b.provider = append(b.provider, r)
	}
	return nil
}

// runProvider creates n pending tasks, each with a deadline far enough for
// the whole run at the provider's limit, starts `arbiter worker` with the
// openai backend on a fake provider of latency and rpm at
// ARBITER_WORKERS=slots, and times it until the last task is final.
func (b *bench) runProvider(ctx context.Context, name string, n int, latency time.Duration, rpm float64, slots int) (providerResult, error) {
	if err := b.resetDatabase(ctx); err != nil {
		return providerResult{}, err
	}
	store, err := db.Open(ctx, b.databaseURL, db.Options{DailyTaskCap: 100_000_000})
	if err != nil {
		return providerResult{}, err
	}
	defer store.Close()
	account, err := store.FindOrCreateAccountByEmail(ctx, "bench-provider@example.com")
	if err != nil {
		return providerResult{}, err
	}
	// The run takes n / (rpm/60) seconds at the limit; the deadline is
	// twice that and two minutes more, so that a task only goes to a
	// person for throttling when the limiter loses much of the limit.
	expected := float64(n) * latency.Seconds() / float64(slots)
	if rpm > 0 {
		expected = max(expected, float64(n)/(rpm/60))
	}
	in, err := arbiter.ParseTaskCreate(taskBody)
	if err != nil {
		return providerResult{}, err
	}
	in.DeadlineSeconds = int(2*expected) + 120
	b.logf("creating %d pending tasks with a deadline of %d s", n, in.DeadlineSeconds)
	for made := 0; made < n; {
		creates := make([]arbiter.TaskCreate, min(batchSize, n-made))
		for i := range creates {
			creates[i] = in
		}
		created, err := store.CreateTasks(ctx, account.ID, creates)
		if err != nil {
			return providerResult{}, err
		}
		for _, c := range created {
			if c.Err != nil {
				return providerResult{}, c.Err
			}
			made++
		}
	}
	completed, stopListening, err := listenCompletions(b.databaseURL)
	if err != nil {
		return providerResult{}, err
	}
	defer stopListening()

	provider := startFakeProvider(latency, rpm)
	defer provider.srv.Close()
	dir, err := os.MkdirTemp("", "arbiter-bench-provider")
	if err != nil {
		return providerResult{}, err
	}
	defer os.RemoveAll(dir)
	limit := "no limit"
	if rpm > 0 {
		limit = fmt.Sprintf("%.0f requests a minute", rpm)
	}
	b.logf("arbiter worker with the openai backend on a provider answering in %s, %s, %d slots", latency, limit, slots)
	w, err := b.startWorker(ctx, dir, "ARBITER_AGENT=openai", "ARBITER_AGENT_BASE_URL="+provider.srv.URL+"/v1",
		"ARBITER_AGENT_MODEL=bench", "ARBITER_WORKERS="+strconv.Itoa(slots))
	if err != nil {
		return providerResult{}, err
	}
	defer w.stop()
	select {
	case <-w.started:
	case <-ctx.Done():
		return providerResult{}, ctx.Err()
	case <-time.After(30 * time.Second):
		return providerResult{}, errors.New("the worker did not start within 30 s")
	}
	start := time.Now()
	// The limiter has settled once it has been through a few rounds of
	// calls and Retry-Afters: 30 s at the default scale.
	provider.settleFrom(start.Add(time.Duration(30 * float64(time.Second) * provider.scale)))
	// A task sent to a person announces nothing: the human queue is
	// counted every second instead.
	seen, humans, last := make(map[string]bool, n), 0, time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for len(seen)+humans < n {
		select {
		case id := <-completed:
			seen[id], last = true, time.Now()
		case <-tick.C:
			if humans, err = store.CountHumanQueue(ctx, account.ID, ""); err != nil {
				return providerResult{}, err
			}
			if time.Since(last) > 2*time.Minute {
				return providerResult{}, fmt.Errorf("the worker decided %d of %d tasks, then nothing for two minutes", len(seen), n)
			}
		case <-ctx.Done():
			return providerResult{}, ctx.Err()
		}
	}
	elapsed := time.Since(start)
	r := providerResult{name: name, tasks: n, elapsed: elapsed, perSec: float64(len(seen)) / elapsed.Seconds(),
		slots: slots, latency: latency, rpm: rpm, humans: humans}
	r.calls, r.throttled, r.settled, r.settled429 = provider.counts()
	return r, nil
}

// printProvider writes the provider phases' figures and targets.
func printProvider(w io.Writer, results []providerResult) {
	for _, r := range results {
		share := r.perSec / r.target
		switch r.rpm {
		case 0:
			fmt.Fprintf(w, "%-22s %d tasks in %.1f s: %.2f tasks/s at %d slots × %s = %.2f/s: %.2f× (target 0.90–1.10) %s\n",
				r.name, r.tasks, r.elapsed.Seconds(), r.perSec, r.slots, r.latency, r.target, share,
				verdict(r.humans == 0 && share >= 0.9 && share <= 1.1))
		default:
			settled := 0.0
			if r.settled > 0 {
				settled = float64(r.settled429) / float64(r.settled)
			}
			fmt.Fprintf(w, "%-22s %d tasks in %.1f s: %.2f tasks/s at a limit of %.0f/min, %s, %d slots: %.1f%% of the limit (target ≥ 95%%) %s\n",
				r.name, r.tasks, r.elapsed.Seconds(), r.perSec, r.rpm, r.latency, r.slots, 100*share, verdict(share >= 0.95))
			fmt.Fprintf(w, "%-22s %d sent to a person (target 0) %s; %d of %d calls answered 429, %d of %d (%.2f%%) once settled (target ≤ 1%%) %s\n",
				r.name, r.humans, verdict(r.humans == 0), r.throttled, r.calls, r.settled429, r.settled, 100*settled,
				verdict(r.settled > 0 && settled <= 0.01))
		}
	}
}

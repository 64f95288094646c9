package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/handlers"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/web"
)

// sendAs sends a request to base as the client ip (the servers trust the
// loopback peer's X-Forwarded-For) and returns its status (0 when it
// could not be sent). It may run in any goroutine.
func sendAs(t *testing.T, ip, method, target, contentType, body string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	req.Header.Set("X-Forwarded-For", ip)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, res.Body)
	if res.StatusCode == http.StatusTooManyRequests && res.Header.Get("Retry-After") == "" {
		t.Errorf("%s %s: 429 without Retry-After", method, target)
	}
	return res.StatusCode
}

// limitRun is what a run of requests against one rate limit got: how
// many passed (status ok), how many were refused (429), and how long the
// run took.
type limitRun struct {
	passed, refused, other int
	took                   time.Duration
}

// sendersAtOnce is how many requests sendAlternating has in flight.
const sendersAtOnce = 8

// sendAlternating sends n requests, sendersAtOnce at a time, alternating between the
// servers, and counts those answered ok, those answered 429 and the
// others.
func sendAlternating(n, ok int, bases []string, send func(i int, base string) int) limitRun {
	var mu sync.Mutex
	var run limitRun
	next := make(chan int, n)
	for i := range n {
		next <- i
	}
	close(next)
	began := time.Now()
	var wg sync.WaitGroup
	for range sendersAtOnce {
		wg.Go(func() {
			for i := range next {
				status := send(i, bases[i%len(bases)])
				mu.Lock()
				switch status {
				case ok:
					run.passed++
				case http.StatusTooManyRequests:
					run.refused++
				default:
					run.other++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	run.took = time.Since(began)
	return run
}

// checkHeld fails t unless run, of n requests sent to servers processes
// against a rate limit of burst requests and one more every every, let
// through what one limit lets: the burst, plus what refilled while the run
// went on, and refused the rest; past is how many more a limit may let
// through by design each time it has a request to spend (requests in
// flight that found it there). Limits of each process's own would have
// let through servers times the burst: n is more than that.
func checkHeld(t *testing.T, what string, run limitRun, n, servers, burst, past int, every time.Duration) {
	t.Helper()
	refilled := int(run.took / every)
	most := burst + (refilled+1)*(1+past) + past
	if n <= servers*burst || most >= servers*burst {
		t.Fatalf("%s: %d requests in %v cannot tell one limit of %d from two", what, n, run.took, burst)
	}
	if run.other != 0 || run.passed < burst || run.passed > most || run.refused != n-run.passed {
		t.Errorf("%s: %d passed, %d refused, %d other in %v; want %d to %d passed (the burst of %d and what refilled), the rest refused",
			what, run.passed, run.refused, run.other, run.took.Round(time.Millisecond), burst, most, burst)
	}
}

// TestReplicas_LimitsHoldAcrossServers: two `arbiter serve` processes on
// one Postgres hold every limit stated per client, key or account to its
// value, not to twice it: sign-in links, demo verdicts and failed key
// checks per client address, MCP calls per account at once, waits per
// key at once.
func TestReplicas_LimitsHoldAcrossServers(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.URL(t, db.Postgres)
	getenv := env(map[string]string{"ARBITER_DATABASE_URL": dbURL, "ARBITER_TRUSTED_PROXIES": "127.0.0.0/8",
		"ARBITER_MAX_WAITERS_PER_KEY": strconv.Itoa(waitersPerKeyAcross)})
	bases := []string{serve(t, getenv), serve(t, getenv)}
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))
	checkLimitsAcross(t, bases, bases, key, dbURL)
}

// waitersPerKeyAcross is the bound on one key's waits at once
// (ARBITER_MAX_WAITERS_PER_KEY) of the servers checkLimitsAcross checks:
// more than handlers.MaxMCPCalls, the MCP calls it holds waiting, and
// than the three hosts' load can hold (12 waits, and a killed replica's
// until its lease lapses, each replica holding up to two blocks of 12
// more reserved).
const waitersPerKeyAcross = 96

// checkLimitsAcross checks, in subtests, that the server processes at
// replicas, reached through bases (the processes themselves, or a balancer
// in front of them), hold every per-client, per-key and per-account limit
// to its value: sign-in links, demo verdicts and failed key checks per
// client address, MCP calls per account at once, and waits per key at
// once (the servers bound at waitersPerKeyAcross). key is an API key of an
// account of the database at dbURL. The MCP calls and the waits go to the
// replicas themselves: their test ends them by leaving, which a balancer
// such as HAProxy does not pass on to a replica until the wait ends.
func checkLimitsAcross(t *testing.T, bases, replicas []string, key, dbURL string) {
	servers := len(replicas)
	t.Run("SignInLinksPerClient", func(t *testing.T) {
		n := 20*servers + 10
		run := sendAlternating(n, http.StatusOK, bases, func(i int, base string) int {
			form := url.Values{"email": {fmt.Sprintf("person%d@example.com", i)}}.Encode()
			return sendAs(t, "198.51.100.1", "POST", base+"/signin/email", "application/x-www-form-urlencoded", form, nil)
		})
		checkHeld(t, "sign-in links asked by one client of several servers", run, n, servers, 20, 0, 30*time.Second)
	})

	t.Run("DemoVerdictsPerClient", func(t *testing.T) {
		res, err := http.Get(bases[0] + "/demo/tasks")
		if err != nil {
			t.Fatal(err)
		}
		var demo struct {
			Tasks []struct {
				ID              string   `json:"id"`
				AllowedVerdicts []string `json:"allowed_verdicts"`
			} `json:"tasks"`
		}
		err = json.NewDecoder(res.Body).Decode(&demo)
		res.Body.Close()
		if err != nil || len(demo.Tasks) == 0 {
			t.Fatalf("demo tasks: %v, %v", demo, err)
		}
		task := demo.Tasks[0]
		n := 10*servers + 10
		run := sendAlternating(n, http.StatusOK, bases, func(i int, base string) int {
			body := fmt.Sprintf(`{"task_id":%q,"verdict":%q,"anon_session_id":"anon_%d"}`, task.ID, task.AllowedVerdicts[0], i)
			return sendAs(t, "198.51.100.2", "POST", base+"/demo/verdicts", "application/json", body, nil)
		})
		checkHeld(t, "demo verdicts of one client to several servers", run, n, servers, 10, 0, 2*time.Second)
	})

	t.Run("FailedKeyChecksPerClient", func(t *testing.T) {
		// The client's valid key, seen active by every server, is never
		// held back by its guesses.
		valid := map[string]string{"Authorization": "Bearer " + key}
		for range servers {
			for _, base := range bases {
				if s := sendAs(t, "198.51.100.3", "GET", base+"/v1/tasks", "", "", valid); s != http.StatusOK {
					t.Fatalf("a valid key = %d", s)
				}
			}
		}
		n := servers*web.FailedKeyChecksBurst + 50
		run := sendAlternating(n, http.StatusUnauthorized, bases, func(i int, base string) int {
			guess := fmt.Sprintf("svc_live_%028x", i)
			return sendAs(t, "198.51.100.3", "GET", base+"/v1/tasks", "", "", map[string]string{"Authorization": "Bearer " + guess})
		})
		// A guess spends its check once its lookup has failed, so guesses in
		// flight when the budget ran out are looked up too (KeyChecker).
		checkHeld(t, "guessed keys from one client to several servers", run, n, servers, web.FailedKeyChecksBurst, sendersAtOnce-1, web.FailedKeyCheckEvery)
		for _, base := range bases {
			if s := sendAs(t, "198.51.100.3", "GET", base+"/v1/tasks", "", "", valid); s != http.StatusOK {
				t.Errorf("a valid key after the guesses = %d", s)
			}
		}
	})

	t.Run("MCPCallsPerAccount", func(t *testing.T) {
		ctx, leave := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		defer func() { leave(); wg.Wait() }()
		admin, err := sql.Open("postgres", dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		// A call admitted creates its task and waits for a person until
		// it leaves; one refused is answered 429 at once.
		var launched int
		var refused, other atomic.Int64
		call := func(base string) {
			launched++
			wg.Go(func() {
				req, _ := http.NewRequestWithContext(ctx, "POST", base+"/v1/mcp", strings.NewReader(askForAPerson))
				req.Header.Set("Authorization", "Bearer "+key)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					return
				}
				res.Body.Close()
				switch {
				case res.StatusCode == http.StatusTooManyRequests:
					refused.Add(1)
				case ctx.Err() == nil:
					other.Add(1)
				}
			})
		}
		// The replicas reserve the account's slots in blocks, so one may
		// hold a few unused for a moment while another refuses a call the
		// bound had room for: the calls refused are sent again, to each
		// replica in turn, until the account's MaxMCPCalls run.
		running := func() int {
			var n int
			_ = admin.QueryRow(`SELECT count(*) FROM task_bodies WHERE prompt = 'Refund order ord_9?'`).Scan(&n)
			return n
		}
		for i := range handlers.MaxMCPCalls {
			call(replicas[i%servers])
		}
		for deadline, next := time.Now().Add(time.Minute), 0; ; time.Sleep(10 * time.Millisecond) {
			n := running()
			if time.Now().After(deadline) || other.Load() != 0 || n > handlers.MaxMCPCalls {
				t.Fatalf("%d MCP calls of the account run (%d refused, %d answered otherwise of %d sent), want %d",
					n, refused.Load(), other.Load(), launched, handlers.MaxMCPCalls)
			}
			if n == handlers.MaxMCPCalls {
				break
			}
			if n+int(refused.Load()) == launched { // every call answered or waiting
				for range handlers.MaxMCPCalls - n {
					call(replicas[next%servers])
					next++
				}
			}
		}
		t.Logf("%d MCP calls sent until %d ran at once", launched, handlers.MaxMCPCalls)
		for _, base := range replicas {
			status, h, b := postMCP(t, base, "POST", map[string]string{"Authorization": "Bearer " + key}, askCall(1))
			if msg := apiErrorSentence(t, status, h, b, http.StatusTooManyRequests); !strings.Contains(msg, "at once") {
				t.Errorf("%q does not say that too many calls run at once", msg)
			}
		}
		if n := running(); n != handlers.MaxMCPCalls {
			t.Errorf("%d MCP calls of the account ran at once, want %d", n, handlers.MaxMCPCalls)
		}
		leave()
		wg.Wait()
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
			status, _, b := postMCP(t, replicas[servers-1], "POST", map[string]string{"Authorization": "Bearer " + key}, askCall(2))
			if status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the account's call after its waits ended answered %d %s", status, b)
			}
		}
	})

	t.Run("WaitersPerKey", func(t *testing.T) {
		admin, err := sql.Open("postgres", dbURL)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close()
		// held waits until the key's row holds want slots, reserved by
		// processes many (0: any number of them).
		held := func(want, processes int) {
			t.Helper()
			for deadline := testutil.Patience(t); ; time.Sleep(10 * time.Millisecond) {
				var n, holders int
				_ = admin.QueryRow(`SELECT coalesce(sum(held), 0), coalesce(sum((SELECT count(*) FROM jsonb_object_keys(holders))), 0)
FROM limit_slots WHERE key LIKE 'waiters-key:%'`).Scan(&n, &holders)
				if n == want && (processes == 0 || holders == processes) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("the key's row holds %d slots of %d processes, want %d of %d", n, holders, want, processes)
				}
			}
		}
		held(0, 0) // the MCP calls' waits have ended, their blocks given back
		// Tasks that wait for a person (the three hosts' verifier is
		// unsure of orders "ord_…").
		ids := make([]string, waitersPerKeyAcross)
		for i := range ids {
			body := fmt.Sprintf(`{"prompt":"Refund order ord_w%d?","allowed_verdicts":["approve","reject"]}`, i)
			status, task, err := apiSend("POST", bases[i%len(bases)]+"/v1/tasks", key, "", body)
			if ids[i], _ = task["id"].(string); err != nil || status != http.StatusOK || ids[i] == "" {
				t.Fatalf("create %d = %d %v %v", i, status, task, err)
			}
		}
		// A long-poll that ends when its caller leaves (leave); answered
		// is its status when the server answered it before.
		type longPoll struct {
			leave    context.CancelFunc
			ended    chan struct{}
			answered int
		}
		open := func(base, id string) *longPoll {
			ctx, leave := context.WithCancel(context.Background())
			p := &longPoll{leave: leave, ended: make(chan struct{})}
			go func() {
				defer close(p.ended)
				req, _ := http.NewRequestWithContext(ctx, "GET", base+"/v1/tasks/"+id+"?wait=60", nil)
				req.Header.Set("Authorization", "Bearer "+key)
				if res, err := http.DefaultClient.Do(req); err == nil {
					p.answered = res.StatusCode
					res.Body.Close()
				}
			}()
			return p
		}
		end := func(p *longPoll) {
			p.leave()
			<-p.ended
			if p.answered != 0 {
				t.Errorf("a wait the bound had room for was answered %d before its caller left", p.answered)
			}
		}
		refused := func(replicas ...string) {
			t.Helper()
			for _, base := range replicas {
				req, _ := http.NewRequest("GET", base+"/v1/tasks/"+ids[0]+"?wait=60", nil)
				req.Header.Set("Authorization", "Bearer "+key)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				msg := apiErrorSentence(t, res.StatusCode, res.Header, b, http.StatusTooManyRequests)
				if !strings.Contains(msg, fmt.Sprintf("API key are waiting for tasks at once (at most %d)", waitersPerKeyAcross)) || res.Header.Get("Retry-After") == "" {
					t.Errorf("%q (Retry-After %q) does not say that too many waits of the key run at once", msg, res.Header.Get("Retry-After"))
				}
			}
		}
		// The bound's waits on one server reserve the key's whole budget:
		// the next wait on any other server is refused.
		polls := make([]*longPoll, waitersPerKeyAcross)
		for i := range polls {
			polls[i] = open(replicas[0], ids[i])
		}
		held(waitersPerKeyAcross, 1)
		refused(replicas[1:]...)
		// One ends (its caller left): its slot goes back to the row once
		// the first server's block has lingered, a wait on another server
		// takes it, and the bound is whole again, on every server.
		end(polls[0])
		held(waitersPerKeyAcross-1, 1)
		polls[0] = open(replicas[1], ids[0])
		held(waitersPerKeyAcross, 2)
		refused(replicas...)
		// Every wait that ends gives its slots back.
		for _, p := range polls {
			end(p)
		}
		held(0, 0)
	})

}

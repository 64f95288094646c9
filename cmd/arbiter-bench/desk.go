package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/web"
)

// deskConcurrency is how many reviewers' requests the desk phases send at
// once: a few people at a desk, not a load test.
const deskConcurrency = 4

// twoVoteBody is taskBody asking two people to vote, both agreeing
// (issue 34).
var twoVoteBody = func() []byte {
	var body map[string]any
	_ = json.Unmarshal(taskBody, &body)
	body["reviews_required"], body["consensus"] = 2, arbiter.ConsensusUnanimous
	out, _ := json.Marshal(body)
	return out
}()

// measureDesk measures the reviewer site over b.deskTasks waiting tasks
// that ask one review ("desk: …"), then over as many that ask two votes
// ("desk (2 votes): …"), each on a fresh database.
func (b *bench) measureDesk(ctx context.Context) error {
	if err := b.measureDeskOf(ctx, "desk", taskBody); err != nil {
		return err
	}
	return b.measureDeskOf(ctx, "desk (2 votes)", twoVoteBody)
}

// measureDeskOf fills one account's human queue with b.deskTasks tasks of
// body and times the reviewer site over it with signed-in reviewers: the
// queue page (/review), a task's page and the answer to a decision or a
// vote (POST /review/tasks/{id}, not following its redirect), each for
// b.duration at deskConcurrency. The phases' names begin with name.
func (b *bench) measureDeskOf(ctx context.Context, name string, body []byte) error {
	if err := b.resetDatabase(ctx); err != nil {
		return err
	}
	store, err := db.Open(ctx, b.databaseURL, db.Options{DailyTaskCap: 100_000_000})
	if err != nil {
		return err
	}
	defer store.Close()
	const email = "bench-desk@example.com"
	account, err := store.FindOrCreateAccountByEmail(ctx, email)
	if err != nil {
		return err
	}
	owner, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{
		Provider: arbiter.SignInEmail, Subject: email, Email: email, EmailVerified: true})
	if err != nil {
		return err
	}
	b.logf("filling the human queue of one account with %d tasks", b.deskTasks)
	in, err := arbiter.ParseTaskCreate(body)
	if err != nil {
		return err
	}
	ids, err := createPendingOf(ctx, store, account.ID, b.deskTasks, in)
	if err != nil {
		return err
	}
	conn, err := sql.Open("postgres", b.databaseURL)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `UPDATE task_states SET status = 'human_needed' WHERE account_id = $1`, account.ID); err != nil {
		return err
	}
	if err := vacuum(ctx, b.databaseURL); err != nil {
		return err
	}
	// deskConcurrency reviewers, each invited to the account and signed
	// in: people at their own desks, each holding their own task.
	cookies := make([]*http.Cookie, deskConcurrency)
	for w := range cookies {
		reviewer := fmt.Sprintf("bench-reviewer-%d@example.com", w)
		_, token, err := store.CreateInvitation(ctx, account.ID, reviewer, arbiter.RoleReviewer,
			arbiter.Actor{Email: email, PersonID: owner.ID})
		if err != nil {
			return err
		}
		person, err := store.SignInWithIdentity(ctx, arbiter.ExternalIdentity{
			Provider: arbiter.SignInEmail, Subject: reviewer, Email: reviewer, EmailVerified: true})
		if err != nil {
			return err
		}
		if _, err := store.AcceptInvitation(ctx, token, person.ID, arbiter.Client{}); err != nil {
			return err
		}
		if cookies[w], err = sessionCookie(ctx, store, person.ID); err != nil {
			return err
		}
	}

	dir, err := os.MkdirTemp("", "arbiter-bench-desk")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	server := exec.Command(b.bin, "serve", "--worker=false")
	server.Env = b.env()
	server.Stdout, server.Stderr = logFile, logFile
	if err := server.Start(); err != nil {
		return err
	}
	defer func() {
		_ = server.Process.Signal(syscall.SIGTERM)
		_ = server.Wait()
	}()
	b.serverPID = server.Process.Pid
	base := "http://" + b.addr
	if err := waitReady(ctx, base+"/demo/tasks"); err != nil {
		return fmt.Errorf("%w (server log: %s)", err, logFile.Name())
	}
	client := &http.Client{
		Transport:     &http.Transport{MaxIdleConnsPerHost: deskConcurrency},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	page := func(w int, method, path string, form url.Values, want int) (location string, err error) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, _ := http.NewRequestWithContext(ctx, method, base+path, body)
		req.AddCookie(cookies[w])
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		page, err := io.ReadAll(res.Body)
		if err != nil {
			return "", err
		}
		if res.StatusCode != want {
			return "", fmt.Errorf("%s %s: %d, want %d: %.200s", method, path, res.StatusCode, want, page)
		}
		return res.Header.Get("Location"), nil
	}
	get := func(w int, path string) error {
		_, err := page(w, "GET", path, nil, http.StatusOK)
		return err
	}
	phase := func(name string, fn func(w, i int) error) {
		before := b.cpuNow()
		r := drive(ctx, name, deskConcurrency, b.duration, fn)
		r.cpu = b.cpuNow().minus(before)
		b.results = append(b.results, r)
	}
	b.logf("the reviewer site over %d waiting tasks, %d at a time, for %s each", b.deskTasks, deskConcurrency, b.duration)
	phase(name+": /review", func(w, _ int) error { return get(w, "/review") })
	phase(name+": task page", func(w, i int) error {
		return get(w, "/review/tasks/"+ids[(i*deskConcurrency+w)*7919%len(ids)])
	})
	// Each reviewer opens a task of their own, which holds it (or, for a
	// task that asks several votes, a slot of it) for them, and then
	// decides the task the desk sends them to next, which it holds for
	// them, as a reviewer working down the queue does. The tasks they
	// start on are the newest, far from the oldest the desk offers; after
	// a failure a reviewer starts again on another, so that one task
	// refused does not become an error a request.
	current := make([]string, deskConcurrency)
	var started atomic.Int64
	start := func(w int) error {
		current[w] = "/review/tasks/" + ids[len(ids)-1-int(started.Add(1))%len(ids)]
		return get(w, current[w])
	}
	for w := range current {
		if err := start(w); err != nil {
			return err
		}
	}
	decide := name + ": decide"
	if in.Review != nil && in.Review.Multi() {
		decide = name + ": vote"
	}
	phase(decide, func(w, _ int) error {
		if !strings.HasPrefix(current[w], "/review/tasks/") {
			return errStop // the queue is empty
		}
		next, err := page(w, "POST", current[w], url.Values{"verdict": {"approve"}}, http.StatusSeeOther)
		if err != nil {
			_ = start(w)
			return err
		}
		current[w] = next
		return nil
	})
	return nil
}

// sessionCookie signs the person in as the reviewer site would, and returns
// the session cookie it sets.
func sessionCookie(ctx context.Context, store *db.DB, personID string) (*http.Cookie, error) {
	secret, err := store.SessionSecret(ctx)
	if err != nil {
		return nil, err
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "http://localhost/", nil).WithContext(ctx)
	if err := web.NewSessions(store, secret, false, "").SignIn(rec, req, personID, arbiter.SignInEmail); err != nil {
		return nil, err
	}
	for _, c := range rec.Result().Cookies() {
		if c.Name == "arbiter_session" {
			return c, nil
		}
	}
	return nil, fmt.Errorf("signing in set no session cookie")
}

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// taskServer boots `arbiter serve` on the store at url and returns a getenv
// for the task commands, with a fresh key of ops@example.com.
func taskServer(t *testing.T, url string) func(string) string {
	t.Helper()
	serverEnv := env(map[string]string{"ARBITER_DATABASE_URL": url})
	base := serve(t, serverEnv)
	key := strings.TrimSpace(runOK(t, serverEnv, "admin", "create-key", "--email", "ops@example.com"))
	return env(map[string]string{"SVC_BASE_URL": base, "SVC_API_KEY": key})
}

// decodeTask reads the task a command printed.
func decodeTask(t *testing.T, out string) map[string]any {
	t.Helper()
	var task map[string]any
	if err := json.Unmarshal([]byte(out), &task); err != nil {
		t.Fatalf("the output is not a JSON task: %v\n%s", err, out)
	}
	return task
}

func TestRun_TaskCreateWaitGet(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: on SQLite it waits out a 20 s long-poll; make test runs it")
	}
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			getenv := taskServer(t, url)
			store := dbtest.OpenURL(t, url, db.Options{})
			account, err := store.FindAccountByEmail(context.Background(), "ops@example.com")
			if err != nil {
				t.Fatal(err)
			}
			contextFile := filepath.Join(t.TempDir(), "order.json")
			os.WriteFile(contextFile, []byte(`{"order": "ord_1", "amount": 42.5}`), 0o600)

			type result struct {
				stdout, stderr string
				err            error
			}
			done := make(chan result, 1)
			go func() {
				var stdout, stderr bytes.Buffer
				err := run(context.Background(), []string{"task", "create",
					"--prompt", "Approve this refund?", "--verdict", "approve", "--verdict", "reject",
					"--context", "@" + contextFile, "--threshold", "0.9", "--task-type", "refund",
					"--touchpoint", "email", "--source", "cli", "--wait", "--timeout", "30s",
				}, getenv, nil, &stdout, &stderr)
				done <- result{stdout.String(), stderr.String(), err}
			}()

			// The default agent decides nothing, so the in-process worker
			// hands the task to a person, who decides it here.
			var id string
			for deadline := testutil.Patience(t); id == ""; time.Sleep(20 * time.Millisecond) {
				queue, _, err := store.ListHumanQueue(context.Background(), account.ID, arbiter.QueueView{}, 10)
				if err != nil {
					t.Fatal(err)
				}
				if len(queue) > 0 {
					id = queue[0].ID
				} else if time.Now().After(deadline) {
					t.Fatal("the task never reached a person")
				}
			}
			if _, err := store.DecideTask(context.Background(), account.ID, id, arbiter.HumanDecision{
				Verdict: "approve", Rationale: "Within policy.", Reviewer: "reviewer@example.com",
			}); err != nil {
				t.Fatal(err)
			}

			// On Postgres the decision wakes the server's waiting request
			// at once (LISTEN/NOTIFY); SQLite serves one process, so the
			// server sees a decision made by another process when its
			// long-poll of 20 s ends.
			var res result
			select {
			case res = <-done:
			case <-time.After(time.Until(testutil.Patience(t))):
				t.Fatal("task create --wait did not return after the decision")
			}
			if res.err != nil {
				t.Fatalf("task create --wait: %v\n%s", res.err, res.stderr)
			}
			created := decodeTask(t, res.stdout)
			if created["id"] != id || created["status"] != "completed" || created["final_verdict"] != "approve" ||
				created["final_tier"] != "human" || created["confidence_threshold"] != 0.9 ||
				created["task_type"] != "refund" || created["touchpoint"] != "email" || created["source"] != "cli" {
				t.Errorf("task create --wait printed %s", res.stdout)
			}
			if _, ok := created["created_at"].(float64); !ok {
				t.Errorf("created_at = %v, want epoch seconds", created["created_at"])
			}
			if !strings.Contains(res.stdout, "\n  \"status\": \"completed\"") {
				t.Errorf("the output is not indented JSON:\n%s", res.stdout)
			}
			stored, _ := store.FindTaskByID(context.Background(), account.ID, id)
			if stored == nil || string(stored.Context) != `{"order":"ord_1","amount":42.5}` {
				t.Errorf("stored context = %+v", stored)
			}

			got := decodeTask(t, runOK(t, getenv, "task", "get", id))
			if got["id"] != id || got["status"] != "completed" || got["final_verdict"] != "approve" {
				t.Errorf("task get printed %v", got)
			}
			if attempts, _ := got["attempts"].([]any); len(attempts) != 2 {
				t.Errorf("attempts = %v, want the agent's and the reviewer's", got["attempts"])
			}
		})
	}
}

func TestRun_TaskErrors(t *testing.T) {
	t.Parallel()
	getenv := taskServer(t, "sqlite:"+filepath.Join(t.TempDir(), "a.db"))
	withEnv := func(k, v string) func(string) string {
		return func(name string) string {
			if name == k {
				return v
			}
			return getenv(name)
		}
	}
	created := decodeTask(t, runOK(t, getenv, "task", "create", "--prompt", "Refund?", "--verdict", "approve",
		"--context", `{"amount": 12}`))
	if created["status"] != "pending" {
		t.Fatalf("task create printed %v", created)
	}

	runOK(t, getenv, "task", "create", "--prompt", "Refund?", "--verdict", "a", "--idempotency-key", "k1")
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"The database did not answer in time; try again shortly.","code":"unavailable"}`))
	}))
	defer failing.Close()

	for _, c := range []struct {
		name   string
		getenv func(string) string
		args   []string
		want   string // in stderr or the error
		exit   int
	}{
		{"NoPrompt", getenv, []string{"create", "--verdict", "approve"}, "--prompt is required", exitUsage},
		{"NoVerdict", getenv, []string{"create", "--prompt", "Refund?"}, "--verdict is required", exitUsage},
		{"BadContext", getenv, []string{"create", "--prompt", "Refund?", "--verdict", "a", "--context", "{bad"}, "not valid JSON", exitUsage},
		{"MissingContextFile", getenv, []string{"create", "--prompt", "Refund?", "--verdict", "a", "--context", "@/nonexistent.json"}, "no such file", exitUsage},
		{"ThresholdOutOfRange", getenv, []string{"create", "--prompt", "Refund?", "--verdict", "a", "--threshold", "2"},
			"task create: confidence_threshold must be a number between 0 and 1.", exitUsage},
		{"LimitZero", getenv, []string{"list", "--limit", "0"}, "1 to 100", exitUsage},
		{"LimitTooLarge", getenv, []string{"list", "--limit", "101"}, "1 to 100", exitUsage},
		{"UnknownKey", withEnv("SVC_API_KEY", "svc_live_0000000000000000000000000000"),
			[]string{"create", "--prompt", "Refund?", "--verdict", "a"}, "task create: The API key is not valid.", exitFailure},
		{"NoKey", withEnv("SVC_API_KEY", ""), []string{"get", created["id"].(string)}, "SVC_API_KEY is not set", exitFailure},
		{"UnknownTask", getenv, []string{"get", "tsk_0000000000000000"}, "task get: ", exitNotFound},
		{"KeyUsedForAnotherTask", getenv, []string{"create", "--prompt", "Other?", "--verdict", "a", "--idempotency-key", "k1"},
			"different request", exitConflict},
		{"ServerFails", withEnv("SVC_BASE_URL", failing.URL), []string{"create", "--prompt", "Refund?", "--verdict", "a"}, "did not answer", exitServer},
		{"WaitTimesOut", getenv, []string{"create", "--prompt", "Refund?", "--verdict", "a", "--wait", "--timeout", "300ms"},
			"after 300ms", exitFailure},
		{"NoServer", withEnv("SVC_BASE_URL", "http://127.0.0.1:1"), []string{"get", created["id"].(string)}, "connect", exitFailure},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), append([]string{"task"}, c.args...), c.getenv, nil, &stdout, &stderr)
			said := stderr.String()
			if err != nil {
				said += err.Error()
			}
			if err == nil || !strings.Contains(said, c.want) {
				t.Fatalf("arbiter task %s = %v (stderr %q), want an error with %q", strings.Join(c.args, " "), err, stderr.String(), c.want)
			}
			if got := exitCode(err); got != c.exit {
				t.Errorf("arbiter task %s exits %d, want %d", strings.Join(c.args, " "), got, c.exit)
			}
			if stdout.Len() != 0 {
				t.Errorf("wrote to stdout: %q", stdout.String())
			}
			if c.name == "UnknownTask" && !client.IsNotFound(err) {
				t.Errorf("err = %v, want the server's 404", err)
			}
			if c.name == "WaitTimesOut" && !regexp.MustCompile(`task tsk_[0-9a-f]{16} is pending; waiting up to 300ms`).MatchString(stderr.String()) {
				t.Errorf("--wait said %q on stderr, want which task it waits for", stderr.String())
			}
		})
	}

	var help bytes.Buffer
	if err := run(context.Background(), []string{"task", "list", "--help"}, getenv, nil, &help, &help); err != nil ||
		!strings.Contains(help.String(), "Exit status:") || !strings.Contains(help.String(), "3  not found") {
		t.Errorf("task list --help = %v:\n%s\nwant the exit statuses", err, help.String())
	}

	for _, args := range [][]string{{"task"}, {"task", "frobnicate"}, {"task", "get"}, {"task", "get", "a", "b"}, {"task", "create", "--wait=maybe"}} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, getenv, nil, &stdout, &stderr); err != errUsage || stderr.Len() == 0 {
			t.Errorf("arbiter %s = %v with stderr %q, want usage", strings.Join(args, " "), err, stderr.String())
		}
	}
}

func TestRun_TaskCreateIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			getenv := taskServer(t, dbtest.URL(t, dialect))
			create := []string{"task", "create", "--prompt", "Approve this refund?", "--verdict", "approve",
				"--verdict", "reject", "--idempotency-key", "refund/ord_1"}
			first := decodeTask(t, runOK(t, getenv, create...))
			again := decodeTask(t, runOK(t, getenv, create...))
			if again["id"] != first["id"] {
				t.Fatalf("the same create with one key made %v and %v", first["id"], again["id"])
			}

			var stdout, stderr bytes.Buffer
			other := append(append([]string{}, create[:3]...), append([]string{"Refund everything?"}, create[4:]...)...)
			err := run(context.Background(), other, getenv, nil, &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), "different request") {
				t.Fatalf("another task with the key: %v, want the server's 422 sentence", err)
			}
		})
	}
}

// TestRun_TaskCreateVotesChannelsAndGold: task create sends a review
// requirement, Slack channels and a gold verdict, and prints the task as
// the API answers it.
func TestRun_TaskCreateVotesChannelsAndGold(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			getenv := taskServer(t, dbtest.URL(t, dialect))
			created := decodeTask(t, runOK(t, getenv, "task", "create", "--prompt", "Release the payment?", "--verdict", "approve",
				"--verdict", "reject", "--reviews", "3", "--consensus", "quorum", "--quorum", "2", "--veto", "reject",
				"--requested-by", "CFO@example.com", "--exclude-requester", "--tiebreak", "role:admin", "--notify", "slack:#payments"))
			review, _ := json.Marshal(created["review"])
			if want := `{"consensus":"quorum","exclude_requester":true,"quorum":2,"requested_by":"cfo@example.com","reviews_required":3,"tiebreak":"role:admin","veto":["reject"]}`; string(review) != want {
				t.Errorf("review = %s, want %s", review, want)
			}
			gold := decodeTask(t, runOK(t, getenv, "task", "create", "--prompt", "Ship?", "--verdict", "ship", "--verdict", "hold",
				"--gold-verdict", "hold"))
			if read := decodeTask(t, runOK(t, getenv, "task", "get", gold["id"].(string))); read["gold_verdict"] != "hold" ||
				read["status"] != arbiter.StatusHumanNeeded {
				t.Errorf("a gold task reads %v", read)
			}
			for flag, field := range map[string]string{"--notify": "notify", "--gold-verdict": "gold_verdict"} {
				if _, stderr, err := runCmd(getenv, "task", "create", "--prompt", "Ship?", "--verdict", "ship", flag, "#payments"); err == nil ||
					!strings.Contains(stderr, field) {
					t.Errorf("%s #payments: %v, %q; want the server's refusal of %s", flag, err, stderr, field)
				}
			}
		})
	}
}

// TestRun_TaskCreateDeadline creates a task with --deadline and waits for
// it with --wait: when the deadline passes (moved into the past here) the
// server's worker expires the task, and the command prints it and fails.
func TestRun_TaskCreateDeadline(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			getenv := taskServer(t, url)
			store := dbtest.OpenURL(t, url, db.Options{})
			account, err := store.FindAccountByEmail(context.Background(), "ops@example.com")
			if err != nil {
				t.Fatal(err)
			}
			created := decodeTask(t, runOK(t, getenv, "task", "create", "--prompt", "Refund?", "--verdict", "a", "--deadline", "90s"))
			if created["deadline_at"].(float64)-created["created_at"].(float64) != 90 || created["expired_at"] != nil {
				t.Errorf("--deadline 90s made %v", created)
			}
			if _, stderr, err := runCmd(getenv, "task", "create", "--prompt", "Refund?", "--verdict", "a", "--deadline", "30s"); err == nil ||
				!strings.Contains(stderr, "deadline_seconds") {
				t.Errorf("--deadline 30s: %v, %q; want the server's refusal", err, stderr)
			}
			if _, stderr, err := runCmd(getenv, "task", "create", "--prompt", "Refund?", "--verdict", "a", "--deadline", "1.5m1ms"); err == nil ||
				!strings.Contains(stderr, "whole seconds") {
				t.Errorf("--deadline 1.5m1ms: %v, %q", err, stderr)
			}

			type result struct {
				stdout, stderr string
				err            error
			}
			done := make(chan result, 1)
			go func() {
				stdout, stderr, err := runCmd(getenv, "task", "create", "--prompt", "Too late?", "--verdict", "a",
					"--deadline", "1h", "--wait", "--timeout", "50s")
				done <- result{stdout, stderr, err}
			}()
			var id string
			for deadline := testutil.Patience(t); id == ""; time.Sleep(20 * time.Millisecond) {
				page, err := store.ListTasks(context.Background(), account.ID, arbiter.TaskFilter{Limit: 1})
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Tasks) > 0 && page.Tasks[0].Prompt == "Too late?" {
					id = page.Tasks[0].ID
				} else if time.Now().After(deadline) {
					t.Fatal("the task was never created")
				}
			}
			moveDeadlineIntoThePast(t, dialect, url, id)

			res := <-done
			if res.err == nil || !strings.Contains(res.stderr, "expired") {
				t.Fatalf("task create --wait on a task that expired: %v, stderr %q", res.err, res.stderr)
			}
			if task := decodeTask(t, res.stdout); task["id"] != id || task["status"] != "expired" || task["expired_at"] == nil {
				t.Errorf("printed %s", res.stdout)
			}
		})
	}
}

// moveDeadlineIntoThePast sets the task's deadline to long ago, straight in
// the store at url, as if it had been created with a deadline that ended.
func moveDeadlineIntoThePast(t *testing.T, dialect, url, id string) {
	t.Helper()
	conn, query := rawStore(t, dialect, url), `UPDATE task_states SET deadline_at = 1 WHERE id = $1`
	if dialect == db.SQLite {
		query = `UPDATE task_states SET deadline_at = 1 WHERE id = ?`
	}
	if res, err := conn.Exec(query, id); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("moved %d deadlines", n)
	}
}

// rawStore opens the store at url with database/sql alone, for a test that
// reads or edits it behind the server's back; it is closed when the test
// ends.
func rawStore(t *testing.T, dialect, url string) *sql.DB {
	t.Helper()
	driver, dsn := "postgres", url
	if dialect == db.SQLite {
		driver, dsn = "sqlite", "file:"+strings.TrimPrefix(url, "sqlite:")+"?_pragma=busy_timeout(10000)"
	}
	conn, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// runCmd runs a command to completion and returns its stdout, and its
// stderr followed by the error it returned.
func runCmd(getenv func(string) string, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(context.Background(), args, getenv, nil, &out, &errOut)
	if err != nil {
		errOut.WriteString(err.Error())
	}
	return out.String(), errOut.String(), err
}

// TestRun_TaskList lists the account's tasks through a running server: a
// page as the API answers it, every task with --all, and the server's
// refusals.
func TestRun_TaskList(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			getenv := taskServer(t, dbtest.URL(t, dialect))
			var created []string
			for _, source := range []string{"bot", "crm", "bot", "bot", "crm"} {
				task := decodeTask(t, runOK(t, getenv, "task", "create", "--prompt", "Refund?", "--verdict", "a", "--source", source))
				created = append(created, task["id"].(string))
			}

			// Every task, newest first (tasks made in one millisecond
			// are in id order).
			out := runOK(t, getenv, "task", "list", "--all", "--limit", "2", "--created-after", "2000-01-01T00:00:00Z")
			var all, bots []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				task := decodeTask(t, line)
				all = append(all, task["id"].(string))
				if task["source"] == "bot" {
					bots = append(bots, task["id"].(string))
				}
			}
			if !slices.Equal(slices.Sorted(slices.Values(all)), slices.Sorted(slices.Values(created))) {
				t.Fatalf("task list --all printed %v, want the 5 tasks", all)
			}

			var page struct {
				Tasks []struct {
					ID string `json:"id"`
				} `json:"tasks"`
				HasMore bool `json:"has_more"`
			}
			out = runOK(t, getenv, "task", "list", "--source", "bot", "--limit", "2")
			if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Tasks) != 2 || !page.HasMore ||
				page.Tasks[0].ID != bots[0] || page.Tasks[1].ID != bots[1] {
				t.Fatalf("task list --source bot --limit 2 printed %s, want %v first", out, bots)
			}
			out = runOK(t, getenv, "task", "list", "--source", "bot", "--limit", "2", "--starting-after", bots[1])
			if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Tasks) != 1 || page.HasMore || page.Tasks[0].ID != bots[2] {
				t.Fatalf("the next page printed %s", out)
			}

			if _, stderr, err := runCmd(getenv, "task", "list", "--status", "done"); err == nil || !strings.Contains(stderr, "status") {
				t.Errorf("--status done: %v, %q; want the server's refusal", err, stderr)
			}
			if _, stderr, err := runCmd(getenv, "task", "list", "--created-after", "yesterday"); err == nil || !strings.Contains(stderr, "RFC 3339") {
				t.Errorf("--created-after yesterday: %v, %q", err, stderr)
			}
		})
	}
}

// TestRun_TaskCalibration creates a task with its own audit rate, has it
// audited against the verifier, and reads the report through the CLI.
func TestRun_TaskCalibration(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			// No worker in the server: this test answers as the verifier.
			serverEnv := env(map[string]string{"ARBITER_DATABASE_URL": url})
			base := serve(t, serverEnv, "--worker=false")
			key := strings.TrimSpace(runOK(t, serverEnv, "admin", "create-key", "--email", "ops@example.com"))
			getenv := env(map[string]string{"SVC_BASE_URL": base, "SVC_API_KEY": key})
			store := dbtest.OpenURL(t, url, db.Options{})
			account, err := store.FindAccountByEmail(context.Background(), "ops@example.com")
			if err != nil {
				t.Fatal(err)
			}
			task := decodeTask(t, runOK(t, getenv, "task", "create", "--prompt", "Refund?", "--verdict", "approve", "--verdict", "reject",
				"--task-type", "refund", "--audit-rate", "1"))
			id := task["id"].(string)
			stored, err := store.FindTaskByID(context.Background(), account.ID, id)
			if err != nil || stored.AuditRate == nil || *stored.AuditRate != 1 {
				t.Fatalf("stored audit rate %v, %v", stored, err)
			}
			if _, stderr, err := runCmd(getenv, "task", "create", "--prompt", "p", "--verdict", "a", "--audit-rate", "2"); err == nil || !strings.Contains(stderr, "audit_rate") {
				t.Errorf("--audit-rate 2: %v, %q; want the server's refusal", err, stderr)
			}
			verdict, confidence := "approve", 0.97
			claimed, err := store.ClaimTasks(context.Background(), "cli-test", 10, time.Minute)
			if err != nil || len(claimed) != 1 {
				t.Fatalf("claimed %d: %v", len(claimed), err)
			}
			if err := store.FinishAgentAttempt(context.Background(), "cli-test", id, arbiter.AgentStep{Attempt: arbiter.Attempt{
				Tier: arbiter.TierAgent, Verdict: &verdict, Confidence: &confidence}, Next: arbiter.StatusCompleted}); err != nil {
				t.Fatal(err)
			}
			if _, err := store.DecideTask(context.Background(), account.ID, id, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
			var report struct {
				N              int `json:"n"`
				Recommendation struct {
					TargetErrorRate float64 `json:"target_error_rate"`
					Message         string  `json:"message"`
				} `json:"recommendation"`
			}
			out := runOK(t, getenv, "task", "calibration", "--task-type", "refund", "--target", "0.05", "--created-after", "2000-01-01T00:00:00Z")
			if err := json.Unmarshal([]byte(out), &report); err != nil || report.N != 1 || report.Recommendation.TargetErrorRate != 0.05 ||
				report.Recommendation.Message == "" {
				t.Errorf("task calibration printed %s (%v)", out, err)
			}
			// The pair's agent answer carried no version label.
			out = runOK(t, getenv, "task", "calibration", "--task-type", "refund", "--version", "prompt-7")
			if err := json.Unmarshal([]byte(out), &report); err != nil || report.N != 0 {
				t.Errorf("task calibration --version prompt-7 printed %s (%v); want no pairs", out, err)
			}
			if _, stderr, err := runCmd(getenv, "task", "calibration", "--target", "3"); err == nil || !strings.Contains(stderr, "target_error_rate") {
				t.Errorf("--target 3: %v, %q; want the server's refusal", err, stderr)
			}
		})
	}
}

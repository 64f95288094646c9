package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
)

func TestTaskCreate_Deadline(t *testing.T) {
	t.Parallel()
	eachAPI(t, db.Options{}, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		task := createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["a"],"deadline_seconds":3600}`)
		created, deadline := task["created_at"].(float64), task["deadline_at"].(float64)
		if fmt.Sprintf("%.3f", deadline) != fmt.Sprintf("%.3f", created+3600) || task["expired_at"] != nil {
			t.Errorf("deadline_at = %v for created_at %v and 3600 s; expired_at %v", deadline, created, task["expired_at"])
		}
		// 60.0 is the whole number 60, as JSON Schema's integer has it.
		whole := createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["a"],"deadline_seconds":60.0}`)
		if fmt.Sprintf("%.3f", whole["deadline_at"].(float64)) != fmt.Sprintf("%.3f", whole["created_at"].(float64)+60) {
			t.Errorf("deadline_seconds 60.0: deadline_at %v for created_at %v", whole["deadline_at"], whole["created_at"])
		}
		if plain := createTask(t, a, key, goodTask); plain["deadline_at"] != nil || plain["expired_at"] != nil {
			t.Errorf("a task without a deadline: deadline_at %v, expired_at %v", plain["deadline_at"], plain["expired_at"])
		}
		for _, bad := range []string{`59`, `2592001`, `0`, `-1`, `60.5`, `"3600"`, `null,"deadline_seconds":60`} {
			status, h, b := a.do("POST", "/v1/tasks", key, `{"prompt":"p","allowed_verdicts":["a"],"deadline_seconds":`+bad+`}`)
			if msg := wantError(t, status, h, b, http.StatusBadRequest); !strings.Contains(msg, "deadline_seconds") {
				t.Errorf("deadline_seconds %s: %q", bad, msg)
			}
		}
		// A batch's tasks carry their own.
		status, _, b := a.do("POST", "/v1/tasks/batch", key, `{"tasks":[{"prompt":"p","allowed_verdicts":["a"],"deadline_seconds":60},
			{"prompt":"p","allowed_verdicts":["a"],"deadline_seconds":30}]}`)
		if status != http.StatusOK || !strings.Contains(string(b), `"deadline_at":`) || !strings.Contains(string(b), `"status":400`) {
			t.Errorf("batch with deadlines = %d %s", status, b)
		}
	})
}

// TestTaskGet_WaitReturnsOnExpiry waits for a task whose deadline has
// passed (its creation is two minutes back by the store's clock) until a
// sweep, in another process on Postgres, expires it.
func TestTaskGet_WaitReturnsOnExpiry(t *testing.T) {
	t.Parallel()
	opts := db.Options{Now: func() time.Time { return time.Now().Add(-2 * time.Minute) }}
	eachAPI(t, opts, func(t *testing.T, a *api) {
		key := a.newKey("a@example.com")
		id := createTask(t, a, key, `{"prompt":"p","allowed_verdicts":["a"],"deadline_seconds":60}`)["id"].(string)
		answer := make(chan waited, 1)
		go func() { answer <- getWaiting(t, a.srv.Client(), a.srv.URL, key, id, 30) }()
		waitForWatchers(t, a.store, 1)

		if expired, err := decider(t, a).ExpireTasks(ctx, 10); err != nil || len(expired) != 1 || expired[0] != id {
			t.Fatalf("expired %v (%v)", expired, err)
		}
		w := <-answer
		if w.err != nil || w.status != http.StatusOK || w.elapsed >= 20*time.Second {
			t.Fatalf("the waiting request answered %d %s after %s (%v)", w.status, w.body, w.elapsed, w.err)
		}
		task := w.task
		if task["status"] != "expired" || task["expired_at"] == nil || task["final_verdict"] != nil || task["final_tier"] != nil ||
			task["final_confidence"] != nil || task["completed_at"] != nil {
			t.Errorf("the expired task = %s", w.body)
		}
		if l := a.list(key, "status=expired"); len(l.Tasks) != 1 || l.Tasks[0].ID != id {
			t.Errorf("status=expired lists %v", l.ids())
		}
	})
}

// TestReview_ExpiredTask shows a reviewer a task that expired, and refuses
// the verdict the reviewer sends on it anyway.
func TestReview_ExpiredTask(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		alice := d.browser()
		alice.signIn("alice@example.com")
		acct, _ := d.store.FindAccountByEmail(ctx, "alice@example.com")
		// Created two minutes ago with a minute to live.
		d.clock.Advance(-2 * time.Minute)
		task, err := d.store.CreateTask(ctx, acct.ID, arbiter.TaskCreate{Prompt: "Too late?", AllowedVerdicts: []string{"approve", "reject"},
			ConfidenceThreshold: 0.8, TaskType: "refund", Touchpoint: "email", DeadlineSeconds: 60})
		d.clock.Advance(2 * time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if expired, err := d.store.ExpireTasks(ctx, 10); err != nil || len(expired) != 1 {
			t.Fatalf("expired %v (%v)", expired, err)
		}

		r := alice.get("/review/tasks/" + task.ID)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="expired"`) || strings.Contains(r.body, `value="approve"`) {
			t.Errorf("the expired task's page offers a verdict or does not say it expired:\n%.2000s", r.body)
		}
		if r := alice.get("/review/queue"); strings.Contains(r.body, "Too late?") {
			t.Error("the expired task is still in the queue")
		}

		r = alice.post("/review/tasks/"+task.ID, url.Values{"verdict": {"approve"}})
		wantStatus(t, r, http.StatusConflict)
		if !strings.Contains(r.body, "The task expired at") {
			t.Errorf("a late verdict's page does not say the task expired:\n%.2000s", r.body)
		}
		r = alice.do("POST", "/review/tasks/"+task.ID, url.Values{"verdict": {"approve"}}, map[string]string{"HX-Request": "true"})
		if r.status != http.StatusOK || !strings.Contains(r.body, "The task expired at") {
			t.Errorf("a late verdict through htmx = %d:\n%.2000s", r.status, r.body)
		}
		if got, _ := d.store.FindTaskByID(ctx, acct.ID, task.ID); got.Status != arbiter.StatusExpired || got.FinalVerdict != nil || len(got.Attempts) != 0 {
			t.Errorf("the late verdict changed the task: %+v", got)
		}
	})
}

package db_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// withOutcome is a create with a deadline and the on-expiry outcome o.
func withOutcome(prompt string, o arbiter.OnExpiry) arbiter.TaskCreate {
	in := withDeadline(prompt, 60)
	in.OnExpiry = o
	return in
}

// toHuman claims the task and records the agent's answer (nil verdict: a
// decline) below the task's threshold, so that it waits for a person.
func answeredToHuman(t *testing.T, d *db.DB, taskID string, verdict *string, confidence float64) {
	t.Helper()
	claimed, err := d.ClaimTasks(ctx, "w", 100, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		a := arbiter.Attempt{Tier: arbiter.TierAgent, StartedAt: 1}
		if c.ID == taskID && verdict != nil {
			conf := confidence
			a.Verdict, a.Confidence = verdict, &conf
		}
		if err := d.FinishAgentAttempt(ctx, "w", c.ID, arbiter.AgentStep{Attempt: a, Next: arbiter.StatusHumanNeeded}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestQueueService_ExpireTasks_OnExpiryOutcomes(t *testing.T) {
	// The store's clock, which stamps completions; the deadlines are
	// moved into the past by the database's.
	c := &clock{now: time.Now().Truncate(time.Millisecond)}
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		endpoint := newWebhookEndpoint(t, d, acct.ID)
		floor := 0.9
		agent := func(fallback string) arbiter.OnExpiry {
			return arbiter.OnExpiry{Outcome: arbiter.OnExpiryAgentVerdict, AgentFloor: &floor, Fallback: fallback}
		}
		approve := "approve"
		type want struct {
			status, verdict string
			confidence      *float64
		}
		cases := []struct {
			name       string
			onExpiry   arbiter.OnExpiry
			agent      *string
			confidence float64
			want       want
		}{
			{"a fixed verdict", arbiter.OnExpiry{Outcome: "verdict:reject"}, &approve, 0.99, want{arbiter.StatusCompleted, "reject", nil}},
			{"the agent above the floor", agent("verdict:reject"), &approve, 0.95, want{arbiter.StatusCompleted, "approve", ptr(0.95)}},
			{"the agent at the floor", agent("verdict:reject"), &approve, 0.9, want{arbiter.StatusCompleted, "approve", ptr(0.9)}},
			{"the agent below the floor", agent("verdict:reject"), &approve, 0.89, want{arbiter.StatusCompleted, "reject", nil}},
			{"below the floor, fallback expire", agent("expire"), &approve, 0.5, want{arbiter.StatusExpired, "", nil}},
			{"no agent verdict", agent("verdict:reject"), nil, 0, want{arbiter.StatusCompleted, "reject", nil}},
			{"expire", arbiter.OnExpiry{}, &approve, 0.99, want{arbiter.StatusExpired, "", nil}},
		}
		tasks := make([]*arbiter.Task, len(cases))
		for i, tc := range cases {
			in := withOutcome(tc.name, tc.onExpiry)
			in.ConfidenceThreshold = 1
			task, err := d.CreateTask(ctx, acct.ID, in)
			if err != nil {
				t.Fatal(err)
			}
			answeredToHuman(t, d, task.ID, tc.agent, tc.confidence)
			tasks[i] = task
		}
		// One the agent is still answering when its deadline passes.
		running, err := d.CreateTask(ctx, acct.ID, withOutcome("running", arbiter.OnExpiry{Outcome: "verdict:approve"}))
		if err != nil {
			t.Fatal(err)
		}
		if claimed, err := d.ClaimTasks(ctx, "late-agent", 1, time.Minute); err != nil || len(claimed) != 1 || claimed[0].ID != running.ID {
			t.Fatalf("claimed %v (%v)", claimed, err)
		}
		if err := d.MoveDeadline(ctx, running.ID, past); err != nil {
			t.Fatal(err)
		}
		err = d.FinishAgentAttempt(ctx, "late-agent", running.ID, decided("reject", 0.99))
		if wantCode(t, err, arbiter.ECONFLICT); !strings.Contains(arbiter.ErrorMessage(err), "on-expiry outcome decides it (approve)") {
			t.Errorf("the agent's answer after the deadline, before the sweep: %v", err)
		}
		notDue, err := d.CreateTask(ctx, acct.ID, withOutcome("not due", arbiter.OnExpiry{Outcome: "verdict:reject"}))
		if err != nil {
			t.Fatal(err)
		}
		decidedFirst, err := d.CreateTask(ctx, acct.ID, withOutcome("decided first", arbiter.OnExpiry{Outcome: "verdict:reject"}))
		if err != nil {
			t.Fatal(err)
		}
		answeredToHuman(t, d, decidedFirst.ID, nil, 0)
		if _, err := d.DecideTask(ctx, acct.ID, decidedFirst.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
		waiting := tasks[0]
		wake, stop := d.WatchTask(waiting.ID)
		defer stop()
		listening(t, d, wake)
		for _, task := range append(tasks, decidedFirst) {
			if err := d.MoveDeadline(ctx, task.ID, past); err != nil {
				t.Fatal(err)
			}
		}
		// Before the sweep, a late reviewer is told what will happen.
		_, err = d.DecideTask(ctx, acct.ID, waiting.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"})
		if wantCode(t, err, arbiter.ECONFLICT); !strings.Contains(arbiter.ErrorMessage(err), "on-expiry outcome decides it (reject)") {
			t.Errorf("a verdict after the deadline, before the sweep: %v", err)
		}

		c.Add(time.Minute)
		swept, err := d.ExpireTasks(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(swept) != len(cases)+1 {
			t.Errorf("swept %d tasks, want %d", len(swept), len(cases)+1)
		}
		woken(t, wake, "when the outcome decided the task")
		now := arbiter.TimestampOf(c.Now())
		for i, tc := range cases {
			got := mustFind(t, d, acct.ID, tasks[i].ID)
			var last *arbiter.Attempt
			if n := len(got.Attempts); n > 0 {
				last = &got.Attempts[n-1]
			}
			switch {
			case got.Status != tc.want.status:
				t.Errorf("%s: status %s, want %s", tc.name, got.Status, tc.want.status)
			case tc.want.status == arbiter.StatusExpired:
				if got.FinalTier != nil || got.ExpiredAt == nil || len(got.Attempts) != 1 {
					t.Errorf("%s: expired as %+v", tc.name, got)
				}
			case *got.FinalVerdict != tc.want.verdict || *got.FinalTier != arbiter.TierFallback ||
				(tc.want.confidence == nil) != (got.FinalConfidence == nil) ||
				(tc.want.confidence != nil && *got.FinalConfidence != *tc.want.confidence) ||
				got.CompletedAt == nil || *got.CompletedAt != now:
				t.Errorf("%s: final %v %v %v at %v, want %s by fallback with confidence %v at %v", tc.name,
					*got.FinalVerdict, *got.FinalTier, got.FinalConfidence, got.CompletedAt, tc.want.verdict, tc.want.confidence, now)
			case len(got.Attempts) != 2 || last.Tier != arbiter.TierFallback || *last.Verdict != tc.want.verdict ||
				!strings.Contains(last.Rationale, "on_expiry"):
				t.Errorf("%s: attempts %+v, want the agent's and one fallback attempt", tc.name, got.Attempts)
			}
		}
		if got := mustFind(t, d, acct.ID, notDue.ID); got.Final() {
			t.Errorf("a task before its deadline: %s", got.Status)
		}
		if got := mustFind(t, d, acct.ID, decidedFirst.ID); *got.FinalTier != arbiter.TierHuman || len(got.Attempts) != 2 {
			t.Errorf("the sweep changed a task a person decided first: %+v", got)
		}
		if page, err := d.ListTasks(ctx, acct.ID, arbiter.TaskFilter{FinalTier: arbiter.TierFallback}); err != nil || len(page.Tasks) != 6 {
			t.Errorf("final_tier=fallback lists %d tasks (%v), want the 6 decided so", len(page.Tasks), err)
		}
		if again, err := d.ExpireTasks(ctx, 100); err != nil || len(again) != 0 {
			t.Errorf("a second sweep: %v (%v)", again, err)
		}

		// One webhook event per task, as for any completion or expiry.
		msgs, err := d.ListWebhookMessages(ctx, acct.ID, endpoint.ID, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		events := map[string][]string{}
		for _, m := range msgs {
			events[m.TaskID] = append(events[m.TaskID], m.EventType)
		}
		for i, tc := range cases {
			want := arbiter.EventTaskCompleted
			if tc.want.status == arbiter.StatusExpired {
				want = arbiter.EventTaskExpired
			}
			got := events[tasks[i].ID]
			if len(got) != 2 || got[0] != want && got[1] != want {
				t.Errorf("%s: events %v, want task.human_needed and %s once", tc.name, got, want)
			}
		}

		// A late agent and a late reviewer are told how it ended.
		err = d.FinishAgentAttempt(ctx, "late-agent", running.ID, decided("reject", 0.99))
		if wantCode(t, err, arbiter.ECONFLICT); !strings.Contains(arbiter.ErrorMessage(err), "decided by its on-expiry outcome (approve)") {
			t.Errorf("the agent's answer after the outcome: %v", err)
		}
		if got := mustFind(t, d, acct.ID, running.ID); *got.FinalTier != arbiter.TierFallback || *got.FinalVerdict != "approve" || len(got.Attempts) != 1 {
			t.Errorf("the running task: %+v", got)
		}
		_, err = d.DecideTask(ctx, acct.ID, waiting.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"})
		if wantCode(t, err, arbiter.ECONFLICT); !strings.Contains(arbiter.ErrorMessage(err), "on-expiry outcome (reject)") {
			t.Errorf("a verdict after the outcome: %v", err)
		}
	})
}

// TestQueueService_ExpireTasks_OutcomesOncePerTaskWithManyWorkers: four
// workers sweep 200 due tasks, in small batches; each task is decided or
// expired exactly once, with one fallback attempt at most and one event.
func TestQueueService_ExpireTasks_OutcomesOncePerTaskWithManyWorkers(t *testing.T) {
	// Created two minutes back by the store's clock: their 60 s deadlines
	// have passed by the database's.
	opts := db.Options{Now: func() time.Time { return time.Now().Add(-2 * time.Minute) }}
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			d := dbtest.OpenURL(t, url, opts)
			acct := newAccount(t, d, "a@example.com")
			endpoint := newWebhookEndpoint(t, d, acct.ID)
			floor := 0.5
			outcomes := []arbiter.OnExpiry{{Outcome: "verdict:approve"}, {},
				{Outcome: arbiter.OnExpiryAgentVerdict, AgentFloor: &floor, Fallback: "verdict:reject"},
				{Outcome: arbiter.OnExpiryAgentVerdict, AgentFloor: &floor}}
			const n = 200
			var ins []arbiter.TaskCreate
			for i := range n {
				ins = append(ins, withOutcome(fmt.Sprint(i), outcomes[i%len(outcomes)]))
			}
			for i := 0; i < n; i += arbiter.MaxBatchTasks {
				if _, err := d.CreateTasks(ctx, acct.ID, ins[i:i+arbiter.MaxBatchTasks]); err != nil {
					t.Fatal(err)
				}
			}
			// Each worker its own store on Postgres, as separate processes.
			workers := make([]*db.DB, 4)
			for i := range workers {
				workers[i] = d
				if dialect == db.Postgres {
					workers[i] = dbtest.OpenURL(t, url, opts)
				}
			}
			var mu sync.Mutex
			seen := map[string]int{}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for _, w := range workers {
				wg.Go(func() {
					<-start
					for {
						ids, err := w.ExpireTasks(ctx, 7)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						for _, id := range ids {
							seen[id]++
						}
						mu.Unlock()
						if len(ids) == 0 {
							return
						}
					}
				})
			}
			close(start)
			wg.Wait()
			if len(seen) != n {
				t.Fatalf("%d of %d tasks swept", len(seen), n)
			}
			for id, times := range seen {
				if times != 1 {
					t.Fatalf("task %s swept %d times", id, times)
				}
			}
			counts := map[string]int{}
			for id := range seen {
				task := mustFind(t, d, acct.ID, id)
				fallbacks := 0
				for _, a := range task.Attempts {
					if a.Tier == arbiter.TierFallback {
						fallbacks++
					}
				}
				tier := ""
				if task.FinalTier != nil {
					tier = *task.FinalTier + " " + *task.FinalVerdict
				}
				counts[task.Status+" "+tier]++
				if (task.Status == arbiter.StatusCompleted) != (fallbacks == 1) || fallbacks > 1 {
					t.Errorf("task %s is %s with %d fallback attempts", task.ID, task.Status, fallbacks)
				}
			}
			want := map[string]int{"completed fallback approve": 50, "expired ": 100, "completed fallback reject": 50}
			if fmt.Sprint(counts) != fmt.Sprint(want) {
				t.Errorf("outcomes %v, want %v", counts, want)
			}
			msgs, err := d.ListWebhookMessages(ctx, acct.ID, endpoint.ID, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			perTask := map[string]int{}
			for _, m := range msgs {
				perTask[m.TaskID]++
			}
			if len(perTask) != n {
				t.Errorf("events for %d tasks, want %d", len(perTask), n)
			}
			for id, k := range perTask {
				if k != 1 {
					t.Errorf("task %s has %d events", id, k)
				}
			}
		})
	}
}

// TestQueueService_DecisionRacingTheOutcome: a person decides tasks just
// as their deadlines pass while another worker sweeps. Each task ends the
// person's or the fallback's, never both: one final attempt, one event,
// and a refused person is told how it ended.
func TestQueueService_DecisionRacingTheOutcome(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			url := dbtest.URL(t, dialect)
			d := dbtest.OpenURL(t, url, db.Options{})
			sweeper := d
			if dialect == db.Postgres {
				sweeper = dbtest.OpenURL(t, url, db.Options{})
			}
			acct := newAccount(t, d, "a@example.com")
			endpoint := newWebhookEndpoint(t, d, acct.ID)
			const n = 30
			ids := make([]string, n)
			for i := range n {
				in := withOutcome(fmt.Sprint(i), arbiter.OnExpiry{Outcome: "verdict:reject"})
				in.DeadlineSeconds = 3600
				task, err := d.CreateTask(ctx, acct.ID, in)
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = task.ID
			}
			answeredToHuman(t, d, "", nil, 0)
			// The deadlines pass one every 10 ms from 200 ms on, by the
			// database's clock (this machine's), while the person decides.
			base := time.Now().Add(200 * time.Millisecond)
			for i, id := range ids {
				if err := d.MoveDeadline(ctx, id, arbiter.TimestampOf(base.Add(time.Duration(10*i)*time.Millisecond))); err != nil {
					t.Fatal(err)
				}
			}

			done := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					if _, err := sweeper.ExpireTasks(ctx, 5); err != nil {
						t.Error(err)
						return
					}
					select {
					case <-done:
						return
					default:
					}
				}
			})
			refused := map[string]error{}
			for _, id := range ids {
				if _, err := d.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: "approve", Reviewer: "r@example.com"}); err != nil {
					refused[id] = err
				}
			}
			// Every deadline passes; the sweep takes the rest.
			deadline := time.Now().Add(30 * time.Second)
			for {
				page, err := d.ListTasks(ctx, acct.ID, arbiter.TaskFilter{Status: arbiter.StatusHumanNeeded, Limit: n})
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Tasks) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d tasks still wait for a person", len(page.Tasks))
				}
				time.Sleep(10 * time.Millisecond)
			}
			close(done)
			wg.Wait()

			msgs, err := d.ListWebhookMessages(ctx, acct.ID, endpoint.ID, "", 1000)
			if err != nil {
				t.Fatal(err)
			}
			completions := map[string]int{}
			for _, m := range msgs {
				if m.EventType == arbiter.EventTaskCompleted {
					completions[m.TaskID]++
				}
			}
			var byPerson, byFallback int
			for _, id := range ids {
				task := mustFind(t, d, acct.ID, id)
				finals := 0
				for _, a := range task.Attempts {
					if a.Tier == arbiter.TierHuman || a.Tier == arbiter.TierFallback {
						finals++
					}
				}
				err := refused[id]
				switch {
				case task.Status != arbiter.StatusCompleted || finals != 1 || completions[id] != 1:
					t.Errorf("task %s: %s with %d final attempts and %d completion events", id, task.Status, finals, completions[id])
				case *task.FinalTier == arbiter.TierHuman && err == nil && *task.FinalVerdict == "approve":
					byPerson++
				case *task.FinalTier == arbiter.TierFallback && arbiter.ErrorCode(err) == arbiter.ECONFLICT &&
					*task.FinalVerdict == "reject" && strings.Contains(arbiter.ErrorMessage(err), "on-expiry outcome"):
					byFallback++
				default:
					t.Errorf("task %s: final %s %s, the person's answer %v", id, *task.FinalTier, *task.FinalVerdict, err)
				}
			}
			t.Logf("%d decided by the person, %d by the fallback", byPerson, byFallback)
		})
	}
}

// TestQueueService_DecideDueTasksUsesTheIndex: the sweep finds the due
// tasks with an outcome by tasks_deadline_outcome, not by reading the
// tasks table.
func TestQueueService_DecideDueTasksUsesTheIndex(t *testing.T) {
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		if err := d.InsertTasks(ctx, acct.ID, 20000, 1763805600000); err != nil {
			t.Fatal(err)
		}
		for i := range 20 {
			if _, err := d.CreateTask(ctx, acct.ID, withOutcome(fmt.Sprint(i), arbiter.OnExpiry{Outcome: "verdict:approve"})); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Analyze(ctx); err != nil {
			t.Fatal(err)
		}
		plan, err := d.ExplainDecideDueTasks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(plan, "tasks_deadline_outcome") || strings.Contains(plan, "Seq Scan on tasks") ||
			strings.Contains(plan, "SCAN tasks\n") || strings.Contains(plan, "Sort Key") {
			t.Errorf("the sweep does not find due outcomes by tasks_deadline_outcome:\n%s", plan)
		}
		if plan, err := d.ExplainExpireTasks(ctx); err != nil || !strings.Contains(plan, "tasks_deadline") || strings.Contains(plan, "Seq Scan on tasks") {
			t.Errorf("the expiry no longer uses tasks_deadline (%v):\n%s", err, plan)
		}
	})
}

// A sweep's batch is decided a chunk of tasks per transaction: the batch
// still takes every due task up to its max, no more, each once.
func TestQueueService_ExpireTasks_OutcomesInChunks(t *testing.T) {
	t.Parallel()
	opts := db.Options{Now: func() time.Time { return time.Now().Add(-2 * time.Minute) }}
	dbtest.Each(t, opts, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		const n = 230
		var ins []arbiter.TaskCreate
		for i := range n {
			ins = append(ins, withOutcome(fmt.Sprint(i), arbiter.OnExpiry{Outcome: "verdict:approve"}))
		}
		for i := 0; i < n; i += arbiter.MaxBatchTasks {
			if _, err := d.CreateTasks(ctx, acct.ID, ins[i:min(n, i+arbiter.MaxBatchTasks)]); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]int{}
		for _, max := range []int{150, 500, 500} {
			ids, err := d.ExpireTasks(ctx, max)
			if err != nil {
				t.Fatal(err)
			}
			if want := min(max, n-len(seen)); len(ids) != want {
				t.Fatalf("a sweep of at most %d took %d tasks, want %d", max, len(ids), want)
			}
			for _, id := range ids {
				seen[id]++
			}
		}
		if len(seen) != n {
			t.Fatalf("%d tasks decided, want %d", len(seen), n)
		}
		for id, times := range seen {
			if times != 1 {
				t.Errorf("task %s swept %d times", id, times)
			}
			if task, err := d.FindTaskByID(ctx, acct.ID, id); err != nil || task.FinalTier == nil || *task.FinalTier != arbiter.TierFallback {
				t.Fatalf("task %s: %+v, %v; want completed by the fallback", id, task, err)
			}
		}
	})
}

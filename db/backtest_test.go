package db_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/agent"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// verifierFunc is a verifier answering as the function does.
type verifierFunc func(context.Context, *arbiter.Task) (arbiter.Verification, error)

func (f verifierFunc) Verify(ctx context.Context, t *arbiter.Task) (arbiter.Verification, error) {
	return f(ctx, t)
}

// labelledTask creates a task of taskType that the agent answers at
// confidence (completing it above 0.9, routing it to a person below) and
// a person then decides approve: a routed decision or, at audit rate 1, a
// blind audit.
func labelledTask(t *testing.T, d *db.DB, accountID, taskType string, confidence float64) *arbiter.Task {
	t.Helper()
	in := taskCreate("Refund order 12?")
	in.TaskType = taskType
	task, err := d.CreateTask(ctx, accountID, in)
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := d.ClaimTasks(ctx, "w", 1, time.Minute)
	if err != nil || len(claimed) != 1 || claimed[0].ID != task.ID {
		t.Fatalf("claim: %v, %v", claimed, err)
	}
	step := decided("reject", confidence)
	if confidence < in.ConfidenceThreshold {
		step.Next = arbiter.StatusHumanNeeded
	}
	if err := d.FinishAgentAttempt(ctx, "w", task.ID, step); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DecideTask(ctx, accountID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "rev@example.com"}); err != nil {
		t.Fatal(err)
	}
	return task
}

// TestBacktestService_ChangesNoTask reads the labelled history a backtest
// replays (newest first, by type, span and limit), asks a verifier on it,
// stores the run, and finds every task, attempt and label as it was; the
// run reads back whole, only in its account, and goes with the account.
func TestBacktestService_ChangesNoTask(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "bt@example.com")
		other := newAccount(t, d, "other@example.com")
		if err := d.SetAuditRate(ctx, acct.ID, 1); err != nil {
			t.Fatal(err)
		}
		labelledTask(t, d, acct.ID, "refund", 0.5) // older than the span
		c.Add(40 * 24 * time.Hour)
		var ids []string
		for i, conf := range []float64{0.5, 0.95, 0.6, 0.97} {
			c.Add(time.Second)
			ids = append(ids, labelledTask(t, d, acct.ID, []string{"refund", "refund", "refund", "payout"}[i], conf).ID)
		}
		unlabelled, err := d.CreateTask(ctx, acct.ID, taskCreate("never decided"))
		if err != nil {
			t.Fatal(err)
		}

		f := arbiter.NewBacktestFilter("large")
		cases, err := d.BacktestCases(ctx, acct.ID, f)
		if err != nil {
			t.Fatal(err)
		}
		if got := caseIDs(cases); !slices.Equal(got, []string{ids[3], ids[2], ids[1], ids[0]}) {
			t.Fatalf("cases %v, want the four of the last 30 days, newest first: %v", got, ids)
		}
		for _, c := range cases {
			if c.Task == nil || c.Task.ID != c.Pair.TaskID || len(c.Task.Attempts) != 2 || c.Pair.HumanVerdict != "approve" || c.Pair.AgentVerdict != "reject" {
				t.Fatalf("case %+v", c)
			}
			if c.Pair.Audit != (c.Pair.Confidence > 0.9) || c.Pair.Weight != 1 {
				t.Errorf("case %s: audit %v at %v, weight %v", c.Task.ID, c.Pair.Audit, c.Pair.Confidence, c.Pair.Weight)
			}
		}
		f.TaskType, f.Limit = "refund", 2
		if cases, _ := d.BacktestCases(ctx, acct.ID, f); !slices.Equal(caseIDs(cases), []string{ids[2], ids[1]}) {
			t.Errorf("refund, limit 2: %v", caseIDs(cases))
		}
		if cases, _ := d.BacktestCases(ctx, other.ID, arbiter.NewBacktestFilter("large")); len(cases) != 0 {
			t.Errorf("another account reads %d cases", len(cases))
		}
		bad := arbiter.NewBacktestFilter("large")
		bad.Limit = arbiter.MaxBacktestTasks + 1
		_, err = d.BacktestCases(ctx, acct.ID, bad)
		wantCode(t, err, arbiter.EINVALID)

		// Every task as it stands, and the rows of what a decision writes.
		snapshot := func() (string, [3]int) {
			var tasks []*arbiter.Task
			for _, id := range append(ids, unlabelled.ID) {
				task, err := d.FindTaskByID(ctx, acct.ID, id)
				if err != nil {
					t.Fatal(err)
				}
				tasks = append(tasks, task)
			}
			b, _ := json.Marshal(tasks)
			var n [3]int
			for i, q := range []string{`SELECT COUNT(*) FROM attempts`, `SELECT COUNT(*) FROM labelled_pairs`, `SELECT COUNT(*) FROM task_states`} {
				if n[i], err = d.Count(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			return string(b), n
		}
		tasksBefore, rowsBefore := snapshot()

		cases, _ = d.BacktestCases(ctx, acct.ID, arbiter.NewBacktestFilter("large"))
		spec := arbiter.VerifierSpec{Name: "large", Model: "m-2", Version: "v2", Price: arbiter.Price{InputPerMillion: 3, OutputPerMillion: 15}}
		asked := 0
		v := verifierFunc(func(_ context.Context, task *arbiter.Task) (arbiter.Verification, error) {
			asked++
			if task.ID == ids[0] {
				return arbiter.Verification{}, &arbiter.VerifierError{Reason: arbiter.VerifierUnreadable}
			}
			return arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 0.99, Usage: arbiter.Usage{InputTokens: 1000, OutputTokens: 100}}, nil
		})
		run := &arbiter.BacktestRun{AccountID: acct.ID, Filter: arbiter.NewBacktestFilter("large"), StartedAt: 1, FinishedAt: 2}
		run.Calls = agent.Backtest(ctx, v, spec, cases, time.Second)
		run.Report = arbiter.Backtest(spec, cases, run.Calls, 0.02, 0.95)
		if asked != 4 || len(run.Calls) != 4 || run.Report.Failed != 1 || run.Report.Candidate.Answered != 3 {
			t.Fatalf("asked %d, calls %+v, report %+v", asked, run.Calls, run.Report)
		}
		if call := run.Calls[1]; call.Cost != 0.0045 || *call.Verdict != "approve" {
			t.Errorf("a call %+v, want 1000 × 3 + 100 × 15 per million = 0.0045", call)
		}
		id, err := d.SaveBacktestRun(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if tasksAfter, rowsAfter := snapshot(); tasksAfter != tasksBefore || rowsAfter != rowsBefore {
			t.Fatalf("the backtest changed tasks:\n%s\nwas\n%s\nrows %v, were %v", tasksAfter, tasksBefore, rowsAfter, rowsBefore)
		}

		got, err := d.FindBacktestRun(ctx, acct.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		wantJSON, _ := json.Marshal(run.Calls)
		gotJSON, _ := json.Marshal(got.Calls)
		wantReport, _ := json.Marshal(run.Report)
		gotReport, _ := json.Marshal(got.Report)
		if string(gotJSON) != string(wantJSON) || string(gotReport) != string(wantReport) || got.Filter.Since != arbiter.DefaultBacktestSince {
			t.Errorf("read back %s %s %+v\nwant %s %s", gotJSON, gotReport, got.Filter, wantJSON, wantReport)
		}
		_, err = d.FindBacktestRun(ctx, other.ID, id)
		wantCode(t, err, arbiter.ENOTFOUND)

		if err := d.DeleteAccount(ctx, acct.ID, acct.Email, actor(personOf(t, d, acct.Email))); err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{`SELECT COUNT(*) FROM backtest_runs`, `SELECT COUNT(*) FROM backtest_calls`} {
			if n, err := d.Count(ctx, q); err != nil || n != 0 {
				t.Errorf("%s after the account's deletion: %d, %v", q, n, err)
			}
		}
	})
}

func caseIDs(cases []arbiter.BacktestCase) []string {
	var out []string
	for _, c := range cases {
		out = append(out, c.Pair.TaskID)
	}
	return out
}

// TestBacktestService_OneRunningRunPerAccount: a run started in the
// background holds its account's one run until it is finished, or until
// it has been running MaxBacktestRunTime (its process stopped: it reads
// interrupted); another account is not held; a finish lands once, on its
// own account's running run only; the list is the newest first.
func TestBacktestService_OneRunningRunPerAccount(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) { oneRunningRunPerAccount(t, dialect) })
	}
}

func oneRunningRunPerAccount(t *testing.T, dialect string) {
	c := newClock()
	d := dbtest.Open(t, dialect, db.Options{Now: c.Now})
	acct := newAccount(t, d, "one@example.com")
	other := newAccount(t, d, "two@example.com")
	start := func(accountID string) (string, error) {
		t.Helper()
		return d.StartBacktestRun(ctx, &arbiter.BacktestRun{AccountID: accountID, Filter: arbiter.NewBacktestFilter("large"),
			StartedAt: arbiter.TimestampOf(c.Now())})
	}
	first, err := start(acct.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := start(acct.ID); err != arbiter.ErrBacktestRunning {
		t.Fatalf("a second start while the first runs: %v, want ErrBacktestRunning", err)
	}
	if _, err := start(other.ID); err != nil {
		t.Fatalf("another account's start: %v", err)
	}
	verdict := "approve"
	finish := &arbiter.BacktestRun{ID: first, AccountID: other.ID, FinishedAt: arbiter.TimestampOf(c.Now()),
		Calls: []arbiter.BacktestCall{{TaskID: "tsk_1", Verdict: &verdict}}, Report: arbiter.BacktestReport{Verifier: "large", Tasks: 1}}
	if err := d.FinishBacktestRun(ctx, finish); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
		t.Fatalf("finishing another account's run: %v, want ENOTFOUND", err)
	}
	finish.AccountID = acct.ID
	if err := d.FinishBacktestRun(ctx, finish); err != nil {
		t.Fatal(err)
	}
	if err := d.FinishBacktestRun(ctx, finish); arbiter.ErrorCode(err) != arbiter.ENOTFOUND {
		t.Fatalf("finishing a done run again: %v, want ENOTFOUND", err)
	}
	run, err := d.FindBacktestRun(ctx, acct.ID, first)
	if err != nil || run.Status != arbiter.BacktestDone || len(run.Calls) != 1 || run.Report.Tasks != 1 {
		t.Fatalf("the finished run: %+v, %v", run, err)
	}

	c.Add(time.Minute)
	second, err := start(acct.ID)
	if err != nil {
		t.Fatalf("a start after the first finished: %v", err)
	}
	c.Add(arbiter.MaxBacktestRunTime + time.Minute)
	list, err := d.ListBacktestRuns(ctx, acct.ID, 10)
	if err != nil || len(list) != 2 || list[0].ID != second || list[1].ID != first || len(list[0].Calls) != 0 {
		t.Fatalf("the list: %+v, %v", list, err)
	}
	if got := list[0].StatusAt(c.Now()); got != arbiter.BacktestInterrupted {
		t.Errorf("a run running past MaxBacktestRunTime reads %q, want interrupted", got)
	}
	if _, err := start(acct.ID); err != nil {
		t.Errorf("an interrupted run still holds the account: %v", err)
	}
}

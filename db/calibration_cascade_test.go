package db_test

import (
	"math"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestCalibrationData_Cascade reads the report's cascade on both stores:
// who decided the window's tasks of the type, what small's calls cost,
// and the audits of small's own decisions (not those of tasks it passed
// on), and the report composes them.
func TestCalibrationData_Cascade(t *testing.T) {
	t.Parallel()
	dbtest.Each(t, db.Options{}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "cascade@example.com")
		if err := d.SetAuditRate(ctx, acct.ID, 1); err != nil {
			t.Fatal(err)
		}
		small, version := "small", "v3"
		// answer has small answer a task of taskType at confidence,
		// deciding at 0.9 or passing it to people, and a person say
		// approve.
		answer := func(taskType string, confidence float64, verdict string) {
			in := taskCreate("Refund?")
			in.TaskType = taskType
			task, err := d.CreateTask(ctx, acct.ID, in)
			if err != nil {
				t.Fatal(err)
			}
			if claimed, err := d.ClaimTasks(ctx, "w", 1, time.Minute); err != nil || len(claimed) != 1 {
				t.Fatalf("claim: %v, %v", claimed, err)
			}
			step := decided(verdict, confidence)
			cost, in1, out1 := 0.01, 100, 10
			step.Attempt.Verifier, step.Attempt.Version, step.Attempt.Cost = &small, &version, &cost
			step.Attempt.InputTokens, step.Attempt.OutputTokens = &in1, &out1
			if confidence < 0.9 {
				step.Next = arbiter.StatusHumanNeeded
			}
			if err := d.FinishAgentAttempt(ctx, "w", task.ID, step); err != nil {
				t.Fatal(err)
			}
			if _, err := d.DecideTask(ctx, acct.ID, task.ID, arbiter.HumanDecision{Verdict: "approve", Reviewer: "rev@example.com"}); err != nil {
				t.Fatal(err)
			}
		}
		answer("refund", 0.95, "approve")
		answer("refund", 0.97, "approve")
		answer("refund", 0.93, "reject") // an audit that disagrees
		answer("refund", 0.5, "reject")  // passed to people: labels small, is no audit of its decision
		answer("refund", 0.6, "approve")
		answer("payout", 0.99, "approve") // another type
		if _, err := d.CreateTask(ctx, acct.ID, taskCreate("unfinished")); err != nil {
			t.Fatal(err)
		}

		f := arbiter.CalibrationFilter{TaskType: "refund", TargetErrorRate: 0.02, Confidence: 0.95}
		data, err := d.CalibrationData(ctx, acct.ID, f)
		if err != nil {
			t.Fatal(err)
		}
		c := data.Cascade
		deciders := map[string]int{}
		for _, n := range c.Deciders {
			deciders[n.Tier+"/"+n.Verifier] += n.Tasks
		}
		if len(deciders) != 2 || deciders["agent/small"] != 3 || deciders["human/"] != 2 || c.Capped {
			t.Errorf("deciders %v, capped %v", deciders, c.Capped)
		}
		if len(c.Spend) != 1 || c.Spend[0].Verifier != "small" || c.Spend[0].Calls != 5 || math.Abs(c.Spend[0].Cost-0.05) > 1e-9 {
			t.Errorf("spend %+v", c.Spend)
		}
		wrong := 0
		for _, a := range c.Audits {
			if a.Verifier != "small" || a.Version != version || a.Weight != 1 {
				t.Errorf("audit %+v", a)
			}
			if !a.Correct {
				wrong++
			}
		}
		if len(c.Audits) != 3 || wrong != 1 {
			t.Errorf("audits %+v, want small's 3 decisions, 1 wrong", c.Audits)
		}
		if c.Since >= data.ComputedAt || data.ComputedAt.Time().Sub(c.Since.Time()) != arbiter.CascadeWindow {
			t.Errorf("window since %v, computed %v", c.Since, data.ComputedAt)
		}

		r := arbiter.NewCalibrationReport(data, 0.02, 0.95).Cascade
		if r.Tasks != 5 || len(r.Deciders) != 2 || r.Deciders[0].Decider != "small" || r.Deciders[1].Decider != arbiter.DeciderPeople {
			t.Fatalf("report %+v", r)
		}
		s := r.Deciders[0]
		if s.Share != 0.6 || s.Audits != 3 || s.AuditErrors != 1 || s.CostPerDecided == nil || math.Abs(*s.CostPerDecided-0.05/3) > 1e-9 ||
			s.Drift == nil || s.Drift.Version != version || s.Drift.Drifted {
			t.Errorf("small %+v drift %+v", s, s.Drift)
		}
		want := 0.6 * arbiter.ClopperPearsonUpper(1, 3, 0.95)
		if r.ErrorBound == nil || math.Abs(*r.ErrorBound-want) > 1e-9 {
			t.Errorf("bound %v, want %v", r.ErrorBound, want)
		}

		// Another account's report sees none of it; a window that ends
		// before the tasks, nothing.
		other := newAccount(t, d, "other-cascade@example.com")
		if data, _ := d.CalibrationData(ctx, other.ID, f); len(data.Cascade.Deciders) != 0 || len(data.Cascade.Spend) != 0 {
			t.Errorf("another account's cascade %+v", data.Cascade)
		}
		before := arbiter.Timestamp(1)
		f.CreatedBefore = &before
		if data, _ := d.CalibrationData(ctx, acct.ID, f); len(data.Cascade.Deciders) != 0 {
			t.Errorf("a window before the tasks: %+v", data.Cascade)
		}
	})
}

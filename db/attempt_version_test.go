package db_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// withVersion returns step with the verifier version label set; "" sets
// none.
func withVersion(step arbiter.AgentStep, version string) arbiter.AgentStep {
	if version != "" {
		step.Attempt.Version = &version
	}
	return step
}

// TestQueueService_AttemptsCarryTheVersion records agent attempts with and
// without a verifier version label, alone and (on Postgres) as one grouped
// statement: each task's attempts show the label they were recorded with,
// a person's attempt shows none, and the pair a person's answer makes
// carries the label of the agent's answer.
func TestQueueService_AttemptsCarryTheVersion(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			d := dbtest.Open(t, dialect, db.Options{})
			acct := newAccount(t, d, "a@example.com")
			// Alone: a labelled answer and an unlabelled one; grouped
			// (Postgres): two labelled answers and an unlabelled one.
			versions := []string{"prompt-1", ""}
			if dialect == db.Postgres {
				versions = append(versions, "prompt-2", "prompt-2", "")
			}
			var ids []string
			for i := range versions {
				task, err := d.CreateTask(ctx, acct.ID, taskCreate(fmt.Sprintf("task %d", i)))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, task.ID)
			}
			if claimed, err := d.ClaimTasks(ctx, "w", len(ids), time.Minute); err != nil || len(claimed) != len(ids) {
				t.Fatalf("claimed %d (%v)", len(claimed), err)
			}
			// Below the threshold: each goes to a person.
			unsure := func(v string) arbiter.AgentStep {
				step := decided("approve", 0.5)
				step.Next = arbiter.StatusHumanNeeded
				return withVersion(step, v)
			}
			for i := range 2 {
				if err := d.FinishAgentAttempt(ctx, "w", ids[i], unsure(versions[i])); err != nil {
					t.Fatal(err)
				}
			}
			if len(ids) > 2 {
				var group []db.Finish
				for i := 2; i < len(ids); i++ {
					group = append(group, db.Finish{Owner: "w", TaskID: ids[i], Step: unsure(versions[i])})
				}
				before := d.GroupedFinishes()
				for _, err := range d.FinishGroup(ctx, group) {
					if err != nil {
						t.Fatal(err)
					}
				}
				if d.GroupedFinishes() == before {
					t.Fatal("the finishes were not grouped")
				}
			}
			for i, id := range ids {
				if _, err := d.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
					t.Fatal(err)
				}
				task, err := d.FindTaskByID(ctx, acct.ID, id)
				if err != nil {
					t.Fatal(err)
				}
				if len(task.Attempts) != 2 {
					t.Fatalf("%s: %d attempts, want the agent's and the person's", id, len(task.Attempts))
				}
				if got := deref(task.Attempts[0].Version); got != versions[i] || (versions[i] == "") != (task.Attempts[0].Version == nil) {
					t.Errorf("task %d: the agent's attempt has version %q, want %q", i, got, versions[i])
				}
				if task.Attempts[1].Version != nil {
					t.Errorf("task %d: the person's attempt has version %q, want none", i, *task.Attempts[1].Version)
				}
			}

			// The pairs carry the labels: the report filters by them, and
			// splits by them.
			count := func(version string) int {
				t.Helper()
				data, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{Version: version, TargetErrorRate: 0.02, Confidence: 0.95})
				if err != nil {
					t.Fatal(err)
				}
				return arbiter.NewCalibrationReport(data, 0.02, 0.95).N
			}
			want := map[string]int{}
			for _, v := range versions {
				want[v]++
			}
			if got := count(""); got != len(ids) {
				t.Errorf("every version: %d pairs, want %d", got, len(ids))
			}
			for v, n := range want {
				if v != "" {
					if got := count(v); got != n {
						t.Errorf("version %q: %d pairs, want %d", v, got, n)
					}
				}
			}
			if got := count("no-such-version"); got != 0 {
				t.Errorf("an unknown version: %d pairs, want none", got)
			}
			data, err := d.CalibrationData(ctx, acct.ID, arbiter.CalibrationFilter{TargetErrorRate: 0.02, Confidence: 0.95})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int{}
			for _, s := range arbiter.NewCalibrationReport(data, 0.02, 0.95).Strata {
				if s.Dimension == arbiter.StratumVersion {
					got[s.Value] = s.N
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("version strata %v, want %v", got, want)
			}
		})
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

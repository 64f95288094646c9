package db_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db"
	"github.com/arbiterhq/arbiter/db/dbtest"
)

// TestMigrate_BackfillsTheLabelledPairsOfEarlierDecisions: migration 00014
// makes, for the decisions of a store from before 00011, exactly the pairs
// the decisions make now (arbiter.LabelledPairOf), field for field; it
// makes none where a decision makes none, and keeps the pairs stored
// already.
func TestMigrate_BackfillsTheLabelledPairsOfEarlierDecisions(t *testing.T) {
	t.Parallel()
	c := newClock()
	dbtest.Each(t, db.Options{Now: c.Now}, func(t *testing.T, d *db.DB) {
		acct := newAccount(t, d, "a@example.com")
		// route claims the one pending task and records the agent's steps
		// on it, the last of which sends it to a person.
		route := func(steps ...arbiter.AgentStep) {
			t.Helper()
			for _, step := range steps {
				claimed, err := d.ClaimTasks(ctx, "w", 1, time.Minute)
				if err != nil || len(claimed) != 1 {
					t.Fatalf("claim = %v, %v", claimed, err)
				}
				if err := d.FinishAgentAttempt(ctx, "w", claimed[0].ID, step); err != nil {
					t.Fatal(err)
				}
				c.Add(time.Second)
			}
		}
		unsure := func(verdict string, confidence float64, model string) arbiter.AgentStep {
			s := decided(verdict, confidence)
			s.Next = arbiter.StatusHumanNeeded
			s.Attempt.Model = &model
			if model == "" {
				s.Attempt.Model = nil
			}
			return s
		}
		failed := arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent, Error: ptr("timeout")},
			Next: arbiter.StatusPending}
		declined := arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}
		decide := func(id, verdict string) {
			t.Helper()
			c.Add(time.Minute)
			if _, err := d.DecideTask(ctx, acct.ID, id, arbiter.HumanDecision{Verdict: verdict, Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
		}
		create := func(in arbiter.TaskCreate) string {
			t.Helper()
			task, err := d.CreateTask(ctx, acct.ID, in)
			if err != nil {
				t.Fatal(err)
			}
			return task.ID
		}

		agreed := create(taskCreate("agreed"))
		route(failed, unsure("approve", 0.57, "test-model"))
		decide(agreed, "approve")
		disagreed := create(arbiter.TaskCreate{Prompt: "disagreed", AllowedVerdicts: []string{"approve", "reject"},
			ConfidenceThreshold: 0.9, TaskType: "refund", Source: "bot", Touchpoint: "chat"})
		route(unsure("reject", 0.3, ""))
		decide(disagreed, "approve")
		edge := create(taskCreate("a confidence of 1, below a threshold of 1"))
		route(unsure("reject", 1, "other-model"))
		decide(edge, "reject")
		noAnswer := create(taskCreate("the agent declined"))
		route(declined)
		decide(noAnswer, "reject")
		one := 1.0
		audit := taskCreate("audited")
		audit.AuditRate = &one
		audited := create(audit)
		completeAll(t, d, "approve", 0.95)
		decide(audited, "reject")
		create(taskCreate("the agent decided"))
		completeAll(t, d, "approve", 0.99)
		create(taskCreate("still waiting"))
		route(unsure("approve", 0.2, "test-model"))

		made := labelledPairs(t, d, acct.ID)
		if len(made) != 4 {
			t.Fatalf("the decisions made %d pairs, want 4 (agreed, disagreed, edge, audited):\n%s", len(made), strings.Join(made, "\n"))
		}
		// The store as it was before 00011 stored pairs: the routed
		// decisions' pairs are missing; the audit's, from after, stays.
		if err := d.Exec(ctx, `DELETE FROM labelled_pairs WHERE task_id <> ?`, audited); err != nil {
			t.Fatal(err)
		}
		if err := d.UndoMigrationForTest(ctx, 14); err != nil {
			t.Fatal(err)
		}
		if err := d.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if got := labelledPairs(t, d, acct.ID); strings.Join(got, "\n") != strings.Join(made, "\n") {
			t.Errorf("the backfilled pairs:\n%s\nwant the decisions':\n%s", strings.Join(got, "\n"), strings.Join(made, "\n"))
		}
	})
}

// labelledPairs returns the account's pairs, every column, one line each,
// in task order.
func labelledPairs(t *testing.T, d *db.DB, accountID string) []string {
	t.Helper()
	rows, err := d.Rows(ctx, `SELECT task_id, account_id, task_type, source, model, confidence, bucket, agent_verdict,
		human_verdict, correct, audit, weight, created_at, labelled_at FROM labelled_pairs WHERE account_id = ? ORDER BY task_id`, accountID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprintf("%v", r))
	}
	return out
}

func ptr[T any](v T) *T { return &v }

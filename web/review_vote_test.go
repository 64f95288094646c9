package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
)

// TestReview_AVoterSeesTheirVoteNotTheVerdicts: once a reviewer has voted
// on a task that asks two votes, their desk shows their vote and what the
// task waits for, with no verdict to press and nothing to skip, and the
// task leaves their queue and its count; the admin, who has not voted,
// still finds it waiting, verdicts and all.
func TestReview_AVoterSeesTheirVoteNotTheVerdicts(t *testing.T) {
	t.Parallel()
	eachDash(t, nil, func(t *testing.T, d *dash) {
		owner, admin, reviewer := d.team()
		acctID := mustAccount(t, d, "owner@example.com")
		review := arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: arbiter.ConsensusUnanimous}
		task, err := d.store.CreateTask(ctx, acctID, arbiter.TaskCreate{Prompt: "Release 12,000 EUR?", AllowedVerdicts: []string{"approve", "reject"},
			ConfidenceThreshold: 0.8, TaskType: "payout", Touchpoint: "email", Review: &review})
		if err != nil {
			t.Fatal(err)
		}
		claimed, err := d.store.ClaimTasks(ctx, "wrk_test", 10, time.Minute)
		if err != nil || len(claimed) != 1 {
			t.Fatalf("claim = %v, %v", claimed, err)
		}
		if err := d.store.FinishAgentAttempt(ctx, "wrk_test", task.ID, arbiter.AgentStep{
			Attempt: arbiter.Attempt{Tier: arbiter.TierAgent}, Next: arbiter.StatusHumanNeeded}); err != nil {
			t.Fatal(err)
		}
		desk := "/review/tasks/" + task.ID
		if r := reviewer.get(desk); !strings.Contains(r.body, `data-testid="verdict-form"`) {
			t.Fatalf("before voting the desk offers no verdicts:\n%.3000s", r.body)
		}
		if r := reviewer.post(desk, url.Values{"verdict": {"approve"}}); r.status != http.StatusSeeOther {
			t.Fatalf("vote = %d\n%.2000s", r.status, r.body)
		}

		r := reviewer.get(desk)
		wantStatus(t, r, http.StatusOK)
		if !strings.Contains(r.body, `data-testid="voted-banner"`) || !strings.Contains(r.body, "You voted &#34;approve&#34;. Waiting for 1 more vote.") {
			t.Errorf("the voter's desk does not say what the task waits for:\n%.3000s", r.body)
		}
		for _, gone := range []string{`data-testid="verdict-form"`, `data-testid="verdict"`, `data-testid="skip"`, `data-testid="vote-banner"`} {
			if strings.Contains(r.body, gone) {
				t.Errorf("the voter's desk still shows %s", gone)
			}
		}
		if r := reviewer.get("/review/count"); strings.TrimSpace(r.body) != "" {
			t.Errorf("the voter's count = %q, want none", r.body)
		}
		if r := reviewer.get("/review"); strings.Contains(r.body, task.ID) || !strings.Contains(r.body, `data-testid="queue-count">0<`) {
			t.Errorf("the voter's queue still lists the task:\n%.3000s", r.body)
		}

		if r := admin.get("/review/count"); strings.TrimSpace(r.body) != "1" {
			t.Errorf("the admin's count = %q, want 1", r.body)
		}
		if r := admin.get(desk); !strings.Contains(r.body, `data-testid="verdict-form"`) || strings.Contains(r.body, `data-testid="voted-banner"`) {
			t.Errorf("the admin, who has not voted, is not offered the verdicts:\n%.3000s", r.body)
		}
		// The audit log calls the vote a vote, not a decision.
		if r := owner.get("/audit"); !strings.Contains(r.body, ">Voted<") || strings.Contains(r.body, "Decided a task") {
			t.Errorf("the audit log does not say the reviewer voted:\n%.4000s", r.body)
		}
	})
}

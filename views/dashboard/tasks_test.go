package dashboard

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/views/layouts"
)

// TestTaskDetail_ShowsTheVoteCountNotTheVotes: while a task waits for
// votes its owners and admins see "1 of 2 votes", and a vote's verdict
// only once the task is decided.
func TestTaskDetail_ShowsTheVoteCountNotTheVotes(t *testing.T) {
	verdict, confidence, reviewer := "escalate-to-legal", 1.0, "ann@example.com"
	task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusHumanNeeded, Prompt: "Release?",
		AllowedVerdicts: []string{"approve", "reject"},
		Review:          &arbiter.ReviewRequirement{ReviewsRequired: 2, Consensus: arbiter.ConsensusUnanimous},
		Attempts: []arbiter.Attempt{{Tier: arbiter.TierHuman, Verdict: &verdict, Confidence: &confidence, Reviewer: &reviewer,
			PersonID: "per_ann"}}}
	render := func() string {
		var b bytes.Buffer
		if err := TaskDetail(layouts.Page{Title: "Task"}, TaskView{Task: task, Now: time.Now()}).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	html := render()
	if !strings.Contains(html, "1 of 2 votes") || strings.Contains(html, verdict) || !strings.Contains(html, "vote recorded") {
		t.Errorf("an open vote's page: count shown %v, verdict shown %v", strings.Contains(html, "1 of 2 votes"), strings.Contains(html, verdict))
	}
	task.Status = arbiter.StatusCompleted
	if html := render(); !strings.Contains(html, verdict) {
		t.Error("a decided task's page hides its votes")
	}
}

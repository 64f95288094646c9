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

// TestTaskDetail_SaysWhoDecidedAsTheDeskDoes: the task page names a
// deadline's outcome "Deadline outcome", a gold task's verdict "Gold
// answer (the reviewer said …)", and the verifier none's empty answer "no
// decision", as the desk does, never a bare tier or "– (–)".
func TestTaskDetail_SaysWhoDecidedAsTheDeskDoes(t *testing.T) {
	str := func(s string) *string { return &s }
	num := func(f float64) *float64 { return &f }
	tier := func(s string) *string { return &s }
	for _, tc := range []struct {
		name   string
		task   *arbiter.Task
		want   []string
		unsaid []string
	}{
		{"TheDeadlineOutcome", &arbiter.Task{Status: arbiter.StatusCompleted, FinalVerdict: str("reject"), FinalTier: tier(arbiter.TierFallback),
			Attempts: []arbiter.Attempt{{Tier: arbiter.TierFallback, Verdict: str("reject"), Rationale: "on_expiry verdict:reject"}}},
			[]string{`data-testid="task-decided-by">Deadline outcome<`, "1. Deadline outcome"}, []string{">fallback", "Verifier"}},
		{"AGoldAnswer", &arbiter.Task{Status: arbiter.StatusCompleted, FinalVerdict: str("approve"), FinalTier: tier(arbiter.TierHuman),
			FinalConfidence: num(1), GoldVerdict: str("approve"),
			Attempts: []arbiter.Attempt{{Tier: arbiter.TierHuman, Verdict: str("reject"), Confidence: num(1), Reviewer: str("ann@example.com")}}},
			[]string{`data-testid="task-decided-by">Gold answer (the reviewer said reject)<`, "Gold answer"}, []string{"human (100%)", "reject (100%)"}},
		{"TheVerifierNone", &arbiter.Task{Status: arbiter.StatusHumanNeeded,
			Attempts: []arbiter.Attempt{{Tier: arbiter.TierAgent, Model: str("none"), Rationale: "No verifier is set up."}}},
			[]string{"Verifier none", "no decision", `data-testid="task-decided-by">–<`}, []string{"– (–)"}},
		{"TheAgent", &arbiter.Task{Status: arbiter.StatusCompleted, FinalVerdict: str("approve"), FinalTier: tier(arbiter.TierAgent), FinalConfidence: num(0.97),
			Attempts: []arbiter.Attempt{{Tier: arbiter.TierAgent, Model: str("gpt-4o-mini"), Verdict: str("approve"), Confidence: num(0.97)}}},
			[]string{`data-testid="task-decided-by">The agent (97%)<`, "approve (97%)"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.task.ID, tc.task.Prompt, tc.task.AllowedVerdicts = "tsk_0123456789abcdef", "Refund?", []string{"approve", "reject"}
			var b bytes.Buffer
			if err := TaskDetail(layouts.Page{Title: "Task"}, TaskView{Task: tc.task, Now: time.Now()}).Render(context.Background(), &b); err != nil {
				t.Fatal(err)
			}
			html := b.String()
			for _, want := range tc.want {
				if !strings.Contains(html, want) {
					t.Errorf("the page lacks %s", want)
				}
			}
			for _, unsaid := range tc.unsaid {
				if strings.Contains(html, unsaid) {
					t.Errorf("the page says %s", unsaid)
				}
			}
		})
	}
}

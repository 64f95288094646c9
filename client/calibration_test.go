package client_test

import (
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/db"
)

func TestClient_AuditAndCalibration(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		task, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"},
			TaskType: "refund", AuditRate: client.Rate(1)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve"}, AuditRate: client.Rate(2)}); !client.IsInvalid(err) {
			t.Errorf("an audit rate of 2: %v, want a 400", err)
		}
		// The verifier completes it confidently; a person audits it and
		// disagrees.
		claimed, err := s.store.ClaimTasks(ctx, "w", 1, time.Minute)
		if err != nil || len(claimed) != 1 {
			t.Fatal(claimed, err)
		}
		verdict, confidence, model, version := "approve", 0.92, "m1", "prompt-7"
		if err := s.store.FinishAgentAttempt(ctx, "w", task.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent,
			Verdict: &verdict, Confidence: &confidence, Model: &model, Version: &version}, Next: arbiter.StatusCompleted}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.store.DecideTask(ctx, s.accountID, task.ID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
			t.Fatal(err)
		}
		got, err := c.GetTask(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if *got.FinalVerdict != "approve" || *got.FinalTier != client.TierAgent || len(got.Attempts) != 2 ||
			got.Attempts[0].Audit || !got.Attempts[1].Audit || *got.Attempts[1].Verdict != "reject" {
			t.Errorf("the audited task reads %+v", got)
		}

		report, err := c.Calibration(ctx, client.CalibrationOptions{TaskType: "refund", Model: "m1", TargetErrorRate: 0.05,
			CreatedAfter: time.Now().Add(-time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if report.N != 1 || report.Audits != 1 || report.AuditsDisagree != 1 || len(report.Bins) != 10 || report.Bins[9].N != 1 ||
			len(report.RiskCoverage) != 101 || report.Recommendation.TargetErrorRate != 0.05 || report.Recommendation.Message == "" ||
			len(report.Disagreements) != 1 || report.Disagreements[0].TaskID != task.ID || report.Disagreements[0].LabelledAt.IsZero() ||
			len(report.Confusion) != 1 || report.Confusion[0].HumanVerdict != "reject" {
			t.Errorf("report %+v", report)
		}
		if report, err := c.Calibration(ctx, client.CalibrationOptions{Source: "elsewhere"}); err != nil || report.N != 0 || report.ECE != nil {
			t.Errorf("another source: %+v, %v", report, err)
		}
		for version, n := range map[string]int{"prompt-7": 1, "prompt-8": 0} {
			if report, err := c.Calibration(ctx, client.CalibrationOptions{Version: version}); err != nil || report.N != n {
				t.Errorf("version %s: %+v, %v; want %d pairs", version, report, err, n)
			}
		}
		if _, err := c.Calibration(ctx, client.CalibrationOptions{TargetErrorRate: 1.5}); !client.IsInvalid(err) {
			t.Errorf("a target of 1.5: %v, want a 400", err)
		}
	})
}

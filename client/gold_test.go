package client_test

import (
	"testing"

	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/db"
)

func TestClient_GoldVerdict(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		task, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund 40 EUR?", AllowedVerdicts: []string{"approve", "reject"}, GoldVerdict: "reject"})
		if err != nil {
			t.Fatal(err)
		}
		if task.Status != client.StatusHumanNeeded {
			t.Errorf("status = %s, want human_needed: people decide gold tasks", task.Status)
		}
		got, err := c.GetTask(ctx, task.ID)
		if err != nil || got.GoldVerdict == nil || *got.GoldVerdict != "reject" {
			t.Fatalf("get = %+v, %v; want gold verdict reject", got, err)
		}
		page, err := c.ListTasks(ctx, client.ListOptions{})
		if err != nil || len(page.Tasks) != 1 || page.Tasks[0].GoldVerdict == nil || *page.Tasks[0].GoldVerdict != "reject" {
			t.Fatalf("list = %+v, %v; want the gold verdict", page, err)
		}
		if _, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "p", AllowedVerdicts: []string{"a"}, GoldVerdict: "b"}); !client.IsInvalid(err) {
			t.Errorf("a gold verdict not allowed: %v, want a 400", err)
		}
		s.decide(t, task.ID, "approve")
		if got, err := c.GetTask(ctx, task.ID); err != nil || got.FinalVerdict == nil || *got.FinalVerdict != "reject" {
			t.Fatalf("decided = %+v, %v; want completed with the gold verdict", got, err)
		}
		report, err := c.Agreement(ctx, 7)
		if err != nil || len(report.Reviewers) != 1 {
			t.Fatalf("agreement = %+v, %v; want the reviewer's line", report, err)
		}
		if r := report.Reviewers[0]; r.GoldAnswered != 1 || r.GoldCorrect != 0 || r.GoldAccuracy == nil || *r.GoldAccuracy != 0 {
			t.Errorf("the reviewer's line = %+v, want 0 of 1 gold right", r)
		}
	})
}

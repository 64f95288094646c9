package client_test

import (
	"testing"

	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/db"
)

func TestClient_ReviewRequirementAndAgreement(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		task, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Release 12,000 EUR?", AllowedVerdicts: []string{"approve", "reject"},
			ReviewsRequired: 2, Veto: []string{"reject"}, RequestedBy: "cfo@example.com", ExcludeRequester: true})
		if err != nil {
			t.Fatal(err)
		}
		if r := task.Review; r == nil || r.ReviewsRequired != 2 || r.Consensus != "unanimous" || r.RequestedBy != "cfo@example.com" || !r.ExcludeRequester {
			t.Fatalf("review = %+v", task.Review)
		}
		if task.VotesCast == nil || *task.VotesCast != 0 {
			t.Errorf("votes cast = %v, want 0 on a task that asks two votes", task.VotesCast)
		}
		if _, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "p", AllowedVerdicts: []string{"a"}, ReviewsRequired: 6}); !client.IsInvalid(err) {
			t.Errorf("six reviews: %v, want a 400", err)
		}
		report, err := c.Agreement(ctx, 7)
		if err != nil || report.Tasks != 0 || report.Alpha != nil {
			t.Fatalf("agreement = %+v, %v; want an empty report", report, err)
		}
		if _, err := c.Agreement(ctx, 400); !client.IsInvalid(err) {
			t.Errorf("400 days: %v, want a 400", err)
		}
	})
}

package client_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter/client"
	"github.com/arbiterhq/arbiter/db"
)

func TestClient_Policies(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		deadline, floor, fallback := 600, 0.9, "verdict:reject"
		put, err := c.PutPolicy(ctx, "refund", client.Policy{ConfidenceThreshold: client.Threshold(0.95), DeadlineSeconds: &deadline,
			OnExpiry: "agent_verdict", AgentFloor: &floor, OnExpiryFallback: &fallback})
		if err != nil {
			t.Fatal(err)
		}
		if put.TaskType != "refund" || *put.ConfidenceThreshold != 0.95 || *put.DeadlineSeconds != 600 || put.AuditRate != nil ||
			put.OnExpiry != "agent_verdict" || *put.AgentFloor != 0.9 || *put.OnExpiryFallback != fallback || put.UpdatedAt.IsZero() {
			t.Errorf("put = %+v", put)
		}
		got, err := c.GetPolicy(ctx, "refund")
		if err != nil || *got.ConfidenceThreshold != 0.95 || !got.UpdatedAt.Equal(put.UpdatedAt) {
			t.Errorf("get = %+v, %v", got, err)
		}
		if list, err := c.ListPolicies(ctx); err != nil || len(list) != 1 || list[0].TaskType != "refund" {
			t.Errorf("list = %+v, %v", list, err)
		}
		if _, err := c.PutPolicy(ctx, "refund", client.Policy{OnExpiry: "agent_verdict"}); !client.IsInvalid(err) {
			t.Errorf("an outcome without its floor: %v, want a 400", err)
		}

		task, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}, TaskType: "refund"})
		if err != nil {
			t.Fatal(err)
		}
		if task.ConfidenceThreshold != 0.95 || task.DeadlineAt == nil {
			t.Errorf("a create of the type = %+v, want the policy's values", task)
		}
		overridden, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}, TaskType: "refund",
			ConfidenceThreshold: client.Threshold(0.5), OnExpiry: "verdict:approve"})
		if err != nil || overridden.ConfidenceThreshold != 0.5 {
			t.Errorf("a create with fields = %+v, %v", overridden, err)
		}

		// Notify targets and a review requirement, which a create
		// without its own takes.
		routed, err := c.PutPolicy(ctx, "refund", client.Policy{Notify: []string{"slack:#refunds"}, ReviewsRequired: 3,
			Consensus: "quorum", Quorum: 2, Veto: []string{"reject"}, Tiebreak: "role:admin"})
		if err != nil || strings.Join(routed.Notify, ",") != "slack:#refunds" || routed.ReviewsRequired != 3 || routed.Consensus != "quorum" ||
			routed.Quorum != 2 || strings.Join(routed.Veto, ",") != "reject" || routed.Tiebreak != "role:admin" || routed.ConfidenceThreshold != nil {
			t.Errorf("put with notify and a review requirement = %+v, %v", routed, err)
		}
		if _, err := c.PutPolicy(ctx, "refund", client.Policy{Notify: []string{"#refunds"}}); !client.IsInvalid(err) {
			t.Errorf("a notify target without slack: %v, want a 400", err)
		}
		voted, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve", "reject"}, TaskType: "refund"})
		if err != nil || voted.Review == nil || voted.Review.ReviewsRequired != 3 || voted.Review.Quorum != 2 {
			t.Errorf("a create of the type = %+v, %v; want the policy's requirement", voted, err)
		}

		if err := c.DeletePolicy(ctx, "refund"); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetPolicy(ctx, "refund"); !client.IsNotFound(err) {
			t.Errorf("get after delete: %v, want a 404", err)
		}
		if err := c.DeletePolicy(ctx, "refund"); !client.IsNotFound(err) {
			t.Errorf("delete again: %v, want a 404", err)
		}
	})
}

func TestClient_PolicyRemindersAndEscalation(t *testing.T) {
	eachServer(t, db.Options{}, func(t *testing.T, s *server) {
		c := s.client()
		deadline := 3600
		put, err := c.PutPolicy(ctx, "refund", client.Policy{DeadlineSeconds: &deadline, Reminders: []string{"50%", "15m"},
			Escalation: []client.EscalationRung{{After: "30m", To: "role:admin"}}})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(put.Reminders) != "[15m 50%]" || len(put.Escalation) != 1 || put.Escalation[0] != (client.EscalationRung{After: "30m", To: "role:admin"}) {
			t.Errorf("put = %+v", put)
		}
		if _, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve"},
			Reminders: []string{"50%"}}); !client.IsInvalid(err) {
			t.Errorf("a share of no deadline: %v, want a 400", err)
		}
		task, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve"}, TaskType: "refund",
			Escalation: []client.EscalationRung{{After: "1h", To: "email:ops@example.com"}}})
		if err != nil || task.Escalation != nil {
			t.Errorf("a create with its own rung = %+v, %v", task, err)
		}
		if _, err := c.CreateTask(ctx, client.TaskCreate{Prompt: "Refund?", AllowedVerdicts: []string{"approve"},
			Escalation: []client.EscalationRung{{After: "1h", To: "email:lead@example.com"}}}); !client.IsInvalid(err) {
			t.Errorf("a create with a rung to an outsider: %v, want a 400", err)
		}
	})
}

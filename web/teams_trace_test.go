package web_test

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/telemetry"
	"github.com/arbiterhq/arbiter/internal/testutil"
)

// TestTeamsOutbox_DeliveriesJoinTheCreate exports by OTLP over HTTP to an
// in-process receiver, on both stores, while a task created under a
// request's span is posted to Teams (the fake Bot Framework) when the
// agent's record sends it to a person, and its card updated when a person
// decides on the desk: both "teams deliver" spans are in the create's
// trace (the post under the agent's record, the update under the
// create), and name the message, not the conversation or the
// task's text.
func TestTeamsOutbox_DeliveriesJoinTheCreate(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			receiver, flush := testutil.TraceEverything(t)
			s := newTeamsSite(t, dialect)
			s.join(t, teamsChannel, "Approvals")
			if err := s.store.SetTeamsDefault(ctx, s.accountID, "finance/approvals", arbiter.Actor{Email: arbiter.OperatorActor}); err != nil {
				t.Fatal(err)
			}
			stop := s.deliver(t, time.Millisecond)

			// The worker records its decision under a span of the
			// create's trace; here, the create's own.
			createCtx, request := telemetry.Tracer().Start(ctx, "POST /v1/tasks", trace.WithSpanKind(trace.SpanKindServer))
			task, err := s.store.CreateTask(createCtx, s.accountID, arbiter.TaskCreate{Prompt: "Refund order 1234?",
				AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.store.ClaimTasks(ctx, "wrk_test", 100, time.Minute); err != nil {
				t.Fatal(err)
			}
			now := arbiter.TimestampOf(time.Now())
			if err := s.store.FinishAgentAttempt(createCtx, "wrk_test", task.ID, arbiter.AgentStep{Attempt: arbiter.Attempt{Tier: arbiter.TierAgent,
				StartedAt: now, FinishedAt: &now}, Next: arbiter.StatusHumanNeeded}); err != nil {
				t.Fatal(err)
			}
			request.End()
			s.fake.WaitPosted(t, 1)
			if _, err := s.store.DecideTask(ctx, s.accountID, task.ID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
			s.fake.WaitUpdates(t, 1)
			stop()
			flush()

			spans := receiver.Trace(request.SpanContext().TraceID().String())
			create := testutil.Named(spans, "POST /v1/tasks", "", "")
			finish := testutil.Named(spans, "db FinishAgentAttempt", "", "")
			if len(create) != 1 || len(finish) != 1 {
				t.Fatalf("the create's trace holds %v", testutil.SpanNames(spans))
			}
			// The post is queued by the agent's record, the update by the
			// decision, which joins the create.
			parents := map[string]*tracev1.Span{arbiter.TeamsPost: finish[0], arbiter.TeamsUpdate: create[0]}
			for _, kind := range []string{arbiter.TeamsPost, arbiter.TeamsUpdate} {
				var sent *tracev1.Span
				for _, s := range testutil.Named(spans, "teams deliver", "arbiter.message.kind", kind) {
					if testutil.SpanAttrs(s)["arbiter.delivery.outcome"] == "sent" {
						sent = s
					}
				}
				if sent == nil {
					t.Errorf("the create's trace holds no sent Teams %s: %v", kind, testutil.SpanNames(spans))
					continue
				}
				if !testutil.ChildOf(sent, parents[kind]) {
					t.Errorf("the Teams %s's parent is %x, want %q's %x", kind, sent.ParentSpanId, parents[kind].Name, parents[kind].SpanId)
				}
				if a := testutil.SpanAttrs(sent); a["arbiter.task_id"] != task.ID || a["arbiter.message.id"] == "" {
					t.Errorf("the Teams %s's attributes %v", kind, a)
				}
			}
			for _, sp := range receiver.Spans() {
				for k, v := range testutil.SpanAttrs(sp) {
					if strings.Contains(v, teamsChannel) || strings.Contains(v, "Approvals") || strings.Contains(v, "Refund order 1234?") ||
						strings.Contains(v, "r@example.com") {
						t.Errorf("span %q's attribute %s holds a conversation, a person or the task's text: %q", sp.Name, k, v)
					}
				}
			}
		})
	}
}

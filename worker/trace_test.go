package worker_test

import (
	"context"
	"encoding/hex"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/db/dbtest"
	"github.com/arbiterhq/arbiter/internal/telemetry"
	"github.com/arbiterhq/arbiter/internal/testutil"
	"github.com/arbiterhq/arbiter/slack/slackfake"
	"github.com/arbiterhq/arbiter/worker"
)

// TestTrace_APersonsDecisionJoinsTheCreate exports by OTLP over HTTP to
// an in-process receiver, on both stores, while a task created under a
// request's span goes through a worker whose verifier is unsure (with the
// tokens it took), is posted to Slack, and is decided by a person under
// the span of the desk's request: one trace, the create's, holds the
// agent decision (the create's child), the verifier's call with its
// tokens, the Slack post (queued by the agent's record), the wait for a
// person (the create's child, from the routing to the decision, linked to
// the desk's request, which is a trace of its own) and the Slack update
// the decision queued.
func TestTrace_APersonsDecisionJoinsTheCreate(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			receiver, flush := testutil.TraceEverything(t)
			store, accountID := slackStore(t, dialect)
			fake := slackfake.New(t)
			stopSlack := startSlackWith(t, store, fake, worker.SlackConfig{})
			unsure := verifierFunc(func(context.Context, *arbiter.Task) (arbiter.Verification, error) {
				return arbiter.Verification{Decided: true, Verdict: "approve", Confidence: 0.2, Model: "judge-1",
					Usage: arbiter.Usage{InputTokens: 812, OutputTokens: 9}}, nil
			})
			stopWorker := start(t, store, unsure, nil)

			tracer := telemetry.Tracer()
			createCtx, request := tracer.Start(ctx, "POST /v1/tasks", trace.WithSpanKind(trace.SpanKindServer))
			task, err := store.CreateTask(createCtx, accountID, arbiter.TaskCreate{Prompt: "Refund order 1234?",
				AllowedVerdicts: []string{"approve", "reject"}, ConfidenceThreshold: 0.8})
			if err != nil {
				t.Fatal(err)
			}
			taskID := task.ID
			request.End()
			fake.WaitCalls(t, "chat.postMessage", 1)
			waitFor(t, store, accountID, taskID, func(t *arbiter.Task) bool { return t.Status == arbiter.StatusHumanNeeded })

			deskCtx, desk := tracer.Start(ctx, "POST /review/tasks/{id}/decide", trace.WithSpanKind(trace.SpanKindServer))
			if _, err := store.DecideTask(deskCtx, accountID, taskID, arbiter.HumanDecision{Verdict: "reject", Reviewer: "r@example.com"}); err != nil {
				t.Fatal(err)
			}
			desk.End()
			fake.WaitCalls(t, "chat.update", 1)
			stopWorker()
			stopSlack()
			flush()

			createTrace := request.SpanContext().TraceID().String()
			spans := receiver.Trace(createTrace)
			one := func(name, key, value string) *tracev1.Span {
				t.Helper()
				found := testutil.Named(spans, name, key, value)
				if len(found) != 1 {
					t.Fatalf("the create's trace holds %d %q spans, want 1; it holds %v", len(found), name, testutil.SpanNames(spans))
				}
				return found[0]
			}
			create := one("POST /v1/tasks", "", "")
			agent := one("agent decision", "arbiter.task_id", taskID)
			verify := one("verifier call", "arbiter.task_id", taskID)
			finish := one("db FinishAgentAttempt", "", "")
			post := one("slack deliver", "arbiter.message.kind", arbiter.SlackPost)
			wait := one("wait for a person", "arbiter.task_id", taskID)
			// An update may wait for the channel's turn first: its
			// attempts are spans of their own.
			var update *tracev1.Span
			for _, s := range testutil.Named(spans, "slack deliver", "arbiter.message.kind", arbiter.SlackUpdate) {
				if testutil.SpanAttrs(s)["arbiter.delivery.outcome"] == "sent" {
					update = s
				}
			}
			if update == nil {
				t.Fatalf("the create's trace holds no sent Slack update: %v", testutil.SpanNames(spans))
			}
			for _, c := range []struct {
				what         string
				span, parent *tracev1.Span
			}{{"the agent decision", agent, create}, {"the verifier's call", verify, agent}, {"the Slack post", post, finish},
				{"the wait for a person", wait, create}, {"the Slack update", update, create}} {
				if !testutil.ChildOf(c.span, c.parent) {
					t.Errorf("%s's parent is %x, want %q's %x", c.what, c.span.ParentSpanId, c.parent.Name, c.parent.SpanId)
				}
			}
			if a := testutil.SpanAttrs(verify); a["gen_ai.usage.input_tokens"] != "812" || a["gen_ai.usage.output_tokens"] != "9" ||
				a["gen_ai.request.model"] != "judge-1" {
				t.Errorf("the verifier call's attributes %v", a)
			}
			if a := testutil.SpanAttrs(agent); a["arbiter.task.next_status"] != arbiter.StatusHumanNeeded {
				t.Errorf("the agent decision's attributes %v", a)
			}
			for _, s := range []*tracev1.Span{post, update} {
				if a := testutil.SpanAttrs(s); a["arbiter.delivery.outcome"] != "sent" || a["arbiter.task_id"] != taskID {
					t.Errorf("the Slack %s's attributes %v", a["arbiter.message.kind"], a)
				}
			}
			// The wait runs from the agent's routing to the decision, and
			// points at the desk's request, in its own trace.
			deskSC := desk.SpanContext()
			linked := false
			for _, l := range wait.Links {
				linked = linked || hex.EncodeToString(l.TraceId) == deskSC.TraceID().String() && hex.EncodeToString(l.SpanId) == deskSC.SpanID().String()
			}
			if !linked || deskSC.TraceID() == request.SpanContext().TraceID() {
				t.Errorf("the wait links to %v, want the desk's request %v in a trace of its own", wait.Links, deskSC)
			}
			// (The store keeps milliseconds.)
			if wait.StartTimeUnixNano+uint64(time.Millisecond) < agent.StartTimeUnixNano || wait.EndTimeUnixNano < wait.StartTimeUnixNano ||
				wait.StartTimeUnixNano > agent.EndTimeUnixNano+uint64(time.Millisecond) {
				t.Errorf("the wait runs from %d to %d; the agent decision from %d to %d", wait.StartTimeUnixNano, wait.EndTimeUnixNano,
					agent.StartTimeUnixNano, agent.EndTimeUnixNano)
			}
		})
	}
}

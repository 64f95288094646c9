package worker

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// startAgentSpan starts the span of the agent decision on t, claimed at
// claimed: a child of t's create (the trace context its row keeps), so
// that the create's trace holds the verifier's call, the record and the
// deliveries the record queues. A task created with tracing off, or whose
// create was not sampled, has no trace to join: no span is started, and
// none under it (telemetry.StartChild).
func startAgentSpan(ctx context.Context, t *arbiter.Task, claimed time.Time) (context.Context, trace.Span) {
	ctx, span := telemetry.StartChild(telemetry.WithParent(ctx, t.TraceParent), "agent decision", trace.WithTimestamp(claimed))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("arbiter.task_id", t.ID))
	}
	return ctx, span
}

// endAgentSpan ends an agent decision's span with the status the step
// moves the task to (completed, human_needed, or pending for a retry).
func endAgentSpan(span trace.Span, step arbiter.AgentStep) {
	if span.IsRecording() && step.Next != "" {
		span.SetAttributes(attribute.String("arbiter.task.next_status", step.Next))
		if step.Err != nil && !step.Throttled {
			span.SetStatus(codes.Error, "")
		}
	}
	span.End()
}

// endVerifierSpan ends a verifier call's span with what came of it: the
// model, the outcome (decided, declined, or the failure's reason), the
// confidence, the tokens the call took under the OpenTelemetry GenAI
// names (gen_ai.usage.input_tokens, gen_ai.usage.output_tokens) and their
// cost at the verifier's price (arbiter.verifier.cost, in the currency the
// operator prices in; GenAI names no cost); never the rationale, the
// prompt or the context.
func endVerifierSpan(span trace.Span, v arbiter.Verification, err error, price arbiter.Price) {
	if !span.IsRecording() {
		span.End()
		return
	}
	outcome := "declined"
	var verr *arbiter.VerifierError
	switch {
	case errors.As(err, &verr):
		outcome = verr.Reason
		span.SetStatus(codes.Error, "")
	case err != nil:
		outcome = "error"
		span.SetStatus(codes.Error, "")
	case v.Decided:
		outcome = "decided"
		span.SetAttributes(attribute.Float64("arbiter.verifier.confidence", v.Confidence))
	}
	if v.Model != "" {
		span.SetAttributes(attribute.String("gen_ai.request.model", v.Model))
	}
	if v.Usage != (arbiter.Usage{}) {
		span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", v.Usage.InputTokens),
			attribute.Int("gen_ai.usage.output_tokens", v.Usage.OutputTokens))
		if cost := arbiter.CostOf(price, v.Usage); cost != nil && (price != arbiter.Price{}) {
			span.SetAttributes(attribute.Float64("arbiter.verifier.cost", *cost))
		}
	}
	span.SetAttributes(attribute.String("arbiter.verifier.outcome", outcome))
	span.End()
}

// startDeliverySpan starts the span of one attempt at a Slack, Teams or
// mail message (channel): a child of the span that queued it (its row's
// trace context), so that a task's notices and outcomes sit in the task's
// trace. It names the message, its kind, its task and the attempt; never
// a recipient, a channel's name or what the message says.
func startDeliverySpan(ctx context.Context, channel, traceParent, messageID, kind, taskID string, attempt int) (context.Context, trace.Span) {
	ctx, span := telemetry.StartChild(telemetry.WithParent(ctx, traceParent), channel+" deliver",
		trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("arbiter.message.id", messageID), attribute.String("arbiter.message.kind", kind),
			attribute.Int("arbiter.delivery.attempt", attempt))
		if taskID != "" {
			span.SetAttributes(attribute.String("arbiter.task_id", taskID))
		}
	}
	return ctx, span
}

// endDeliverySpan ends a delivery attempt's span with its outcome (sent,
// skipped, deferred, retry or failed), an error status for the last two.
func endDeliverySpan(span trace.Span, outcome string) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("arbiter.delivery.outcome", outcome))
		if outcome == arbiter.DeliveryRetry || outcome == arbiter.DeliveryFailed {
			span.SetStatus(codes.Error, "")
		}
	}
	span.End()
}

// deliveryOutcome names where a step left a Teams or mail message.
func deliveryOutcome(step arbiter.DeliveryStep, o arbiter.DeliveryOutcome) string {
	switch {
	case step.State == arbiter.DeliveryDone:
		return "sent"
	case step.State == arbiter.DeliveryRetry && o.Defer > 0:
		return "deferred"
	}
	return step.State
}

// slackOutcome names where an attempt left a Slack message.
func slackOutcome(r arbiter.SlackResult) string {
	switch {
	case r.Sent:
		return "sent"
	case r.Skipped:
		return "skipped"
	case r.Error != "":
		return arbiter.DeliveryRetry
	}
	return "deferred"
}

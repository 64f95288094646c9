package worker

import (
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/arbiterhq/arbiter"
)

// endVerifierSpan ends a verifier call's span with what came of it: the
// model, the outcome (decided, declined, or the failure's reason) and the
// confidence; never the rationale, the prompt or the context.
func endVerifierSpan(span trace.Span, v arbiter.Verification, err error) {
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
	span.SetAttributes(attribute.String("arbiter.verifier.outcome", outcome))
	span.End()
}

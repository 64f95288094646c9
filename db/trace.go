package db

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// traced starts the span of the store call op (a method's name), a child
// of the caller's: its database system and, when it fails, an error
// status; no statement, argument or error text, which could hold what a
// caller sent. The function it returns, deferred with the call's error,
// ends it.
func (d *DB) traced(ctx context.Context, op string) (context.Context, func(*error)) {
	system := "sqlite"
	if d.dialect == Postgres {
		system = "postgresql"
	}
	ctx, span := telemetry.Tracer().Start(ctx, "db "+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system.name", system), attribute.String("db.operation.name", op)))
	return ctx, func(err *error) {
		if *err != nil {
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}
}

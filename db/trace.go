package db

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// traced starts the span name ("db " and a method's name) of a store
// call, a child of the caller's: its database system and operation and,
// when it fails, an error status, set only when the span is sampled; no
// statement, argument or error text, which could hold what a caller sent.
// The function it returns, deferred with the call's error, ends it.
func (d *DB) traced(ctx context.Context, name string) (context.Context, func(*error)) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() && !sc.IsSampled() {
		// The caller's trace is not sampled, so no span of it is: start
		// none (a sampler would decide the same, at the cost of a span
		// and a context a call).
		return ctx, endNothing
	}
	ctx, span := telemetry.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		// Not sampled, or tracing is off: nothing to build.
		return ctx, func(*error) { span.End() }
	}
	system := sqliteSystem
	if d.dialect == Postgres {
		system = postgresSystem
	}
	span.SetAttributes(system, attribute.String("db.operation.name", strings.TrimPrefix(name, "db ")))
	return ctx, func(err *error) {
		if *err != nil {
			span.SetStatus(codes.Error, "")
		}
		span.End()
	}
}

// The db.system.name attributes, built once a process.
var (
	sqliteSystem   = attribute.String("db.system.name", "sqlite")
	postgresSystem = attribute.String("db.system.name", "postgresql")
)

// endNothing ends the span a traced call did not start.
func endNothing(*error) {}

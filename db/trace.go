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
// call, a child of the caller's when its trace is sampled, and none
// otherwise (telemetry.StartChild): its database system and operation
// and, when it fails, an error status; no statement, argument or error
// text, which could hold what a caller sent. The function it returns,
// deferred with the call's error, ends it.
func (d *DB) traced(ctx context.Context, name string) (context.Context, func(*error)) {
	if !telemetry.Sampled(ctx) {
		return ctx, endNothing
	}
	return d.startSpan(ctx, name)
}

// tracedRoot is traced for a call made outside any request or task, whose
// span is the root of a trace of its own that the sampler keeps or not: a
// claim, which takes tasks of many traces and links their creates.
func (d *DB) tracedRoot(ctx context.Context, name string) (context.Context, func(*error)) {
	return d.startSpan(ctx, name)
}

// startSpan starts the store call's span under ctx's, as the sampler decides.
func (d *DB) startSpan(ctx context.Context, name string) (context.Context, func(*error)) {
	ctx, span := telemetry.Tracer().Start(ctx, name, clientSpan...)
	if !span.IsRecording() {
		return ctx, endNothing
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

// clientSpan is a store call's span start option, made once.
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// The db.system.name attributes, built once a process.
var (
	sqliteSystem   = attribute.String("db.system.name", "sqlite")
	postgresSystem = attribute.String("db.system.name", "postgresql")
)

// endNothing ends the span a traced call did not start.
func endNothing(*error) {}

package telemetry

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestTraceParent_RoundTrips: the traceparent a sampled span's context is
// stored as is the W3C form, and reads back as the same (remote) span
// context; none is stored without a span or for a trace the sampler left
// out, and what is not a traceparent names none.
func TestTraceParent_RoundTrips(t *testing.T) {
	sampled, unsampled := spanContext(trace.FlagsSampled), spanContext(0)
	tp := TraceParent(trace.ContextWithSpanContext(context.Background(), sampled))
	if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"; tp != want {
		t.Errorf("TraceParent = %q, want %q", tp, want)
	}
	back := SpanContextOf(tp)
	if !back.Equal(sampled.WithRemote(true)) {
		t.Errorf("SpanContextOf(%q) = %v, want %v", tp, back, sampled)
	}
	if got := trace.SpanContextFromContext(WithParent(context.Background(), tp)); !got.Equal(back) {
		t.Errorf("WithParent(%q) carries %v", tp, got)
	}
	if tp := TraceParent(trace.ContextWithSpanContext(context.Background(), unsampled)); tp != "" {
		t.Errorf("TraceParent of a span not sampled = %q, want none", tp)
	}
	if tp := TraceParent(context.Background()); tp != "" {
		t.Errorf("TraceParent without a span = %q, want none", tp)
	}
	for _, bad := range []string{"", "00-xyz", "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		if SpanContextOf(bad).IsValid() {
			t.Errorf("SpanContextOf(%q) is valid", bad)
		}
		if ctx := WithParent(context.Background(), bad); trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("WithParent(%q) carries a span context", bad)
		}
		// Work for a task that was not traced leaves the trace of the
		// span it runs under: it belongs to none.
		if ctx := WithParent(trace.ContextWithSpanContext(context.Background(), sampled), bad); trace.SpanContextFromContext(ctx).IsValid() {
			t.Errorf("WithParent(%q) under a span keeps that span's context", bad)
		}
	}
}

// spanContext returns a span context with flags.
func spanContext(flags trace.TraceFlags) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: flags,
	})
}

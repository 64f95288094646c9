package testutil

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonv1 "go.opentelemetry.io/proto/otlp/common/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/arbiterhq/arbiter/internal/telemetry"
)

// OTLPReceiver is an OTLP/HTTP trace receiver, to serve with httptest: it
// decodes each export's protobuf at /v1/traces, as a collector does, and
// keeps the spans.
type OTLPReceiver struct {
	mu    sync.Mutex
	spans []*tracev1.Span
}

// ServeHTTP takes one export.
func (o *OTLPReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	o.mu.Unlock()
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(b)
}

// Spans returns every span received so far.
func (o *OTLPReceiver) Spans() []*tracev1.Span {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*tracev1.Span(nil), o.spans...)
}

// Trace returns the spans of one trace (its id in hex).
func (o *OTLPReceiver) Trace(traceID string) []*tracev1.Span {
	var spans []*tracev1.Span
	for _, s := range o.Spans() {
		if hex.EncodeToString(s.TraceId) == traceID {
			spans = append(spans, s)
		}
	}
	return spans
}

// Named returns the spans of spans named name whose attribute key is value
// (any, for key "").
func Named(spans []*tracev1.Span, name, key, value string) []*tracev1.Span {
	var out []*tracev1.Span
	for _, s := range spans {
		if s.Name == name && (key == "" || SpanAttrs(s)[key] == value) {
			out = append(out, s)
		}
	}
	return out
}

// ChildOf reports whether span's parent is parent.
func ChildOf(span, parent *tracev1.Span) bool {
	return bytes.Equal(span.TraceId, parent.TraceId) && bytes.Equal(span.ParentSpanId, parent.SpanId)
}

// LinksTo reports whether span has a link to target.
func LinksTo(span, target *tracev1.Span) bool {
	for _, l := range span.Links {
		if bytes.Equal(l.TraceId, target.TraceId) && bytes.Equal(l.SpanId, target.SpanId) {
			return true
		}
	}
	return false
}

// SpanAttrs returns a span's attributes as text.
func SpanAttrs(s *tracev1.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = anyValue(kv.Value)
	}
	return m
}

// anyValue writes an attribute's value as text.
func anyValue(v *commonv1.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonv1.AnyValue_StringValue:
		return x.StringValue
	case *commonv1.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonv1.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonv1.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	}
	b, _ := protojson.Marshal(v)
	return string(b)
}

// SpanNames lists spans' names, for a failure's message.
func SpanNames(spans []*tracev1.Span) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	return names
}

// TraceEverything installs the tracer provider telemetry.Setup makes,
// sampling every trace and exporting to a new OTLPReceiver served over
// loopback, and returns the receiver with the function that flushes the
// provider's spans to it and stops it (call it before reading the spans).
func TraceEverything(t testing.TB) (*OTLPReceiver, func()) {
	t.Helper()
	receiver := &OTLPReceiver{}
	collector := httptest.NewServer(receiver)
	t.Cleanup(collector.Close)
	vars := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": collector.URL, "OTEL_TRACES_SAMPLER": "parentbased_always_on"}
	shutdown, err := telemetry.Setup(context.Background(), func(k string) string { return vars[k] }, "test")
	if err != nil || shutdown == nil {
		t.Fatalf("tracing setup: %v", err)
	}
	return receiver, func() {
		t.Helper()
		if err := shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// Package telemetry sets up OpenTelemetry tracing from the standard OTEL_*
// variables: off unless OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set or OTEL_TRACES_EXPORTER=otlp,
// exported by OTLP over HTTP (protobuf). The packages that make spans use
// the otel API's global tracer provider, which does nothing until Setup
// installs one.
package telemetry

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultEndpoint is where traces go when OTEL_TRACES_EXPORTER=otlp names
// no endpoint: a collector on this machine.
const DefaultEndpoint = "http://localhost:4318"

// Instrumentation is the name spans are made under.
const Instrumentation = "github.com/arbiterhq/arbiter"

// Tracer returns the tracer the packages make their spans with: the
// provider's Setup installed, else the global provider's (a no-op).
func Tracer() trace.Tracer {
	if t := tracer.Load(); t != nil {
		return *t
	}
	return otel.Tracer(Instrumentation)
}

// tracer is the tracer of the provider Setup installed, looked up once:
// the SDK finds a tracer by name under its provider's mutex, which every
// span started would otherwise contend for.
var tracer atomic.Pointer[trace.Tracer]

// Enabled reports whether the variables getenv reads turn tracing on.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	switch getenv("OTEL_TRACES_EXPORTER") {
	case "otlp":
		return true
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return false
}

// Setup installs a tracer provider exporting by OTLP over HTTP, configured
// by the OTEL_* variables getenv reads, when they turn tracing on (see
// Enabled), and the W3C trace context and baggage propagators. It returns
// the function that flushes and stops it (nil when tracing is off), and
// an error naming the variable at fault.
//
// Read: OTEL_SDK_DISABLED, OTEL_TRACES_EXPORTER (otlp or none),
// OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf only),
// OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _TIMEOUT, _COMPRESSION,
// OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG (unset: see DefaultSampleRatio); the SDK reads the OTEL_BSP_* variables itself.
func Setup(ctx context.Context, getenv func(string) string, version string) (func(context.Context) error, error) {
	switch e := getenv("OTEL_TRACES_EXPORTER"); e {
	case "", "otlp", "none":
	default:
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER must be otlp or none, not %q", e)
	}
	if !Enabled(getenv) {
		return nil, nil
	}
	if p := first(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" && p != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf, not %q: Arbiter exports OTLP over HTTP", p)
	}
	endpoint := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if endpoint == "" {
		base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
		if base == "" {
			base = DefaultEndpoint
		}
		endpoint = strings.TrimSuffix(base, "/") + "/v1/traces"
	}
	if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL such as %s", DefaultEndpoint)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint)}
	headers, err := keyValues(first(getenv, "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"))
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS %w", err)
	}
	if len(headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(headers))
	}
	if t := first(getenv, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return nil, errors.New("OTEL_EXPORTER_OTLP_TIMEOUT must be a whole number of milliseconds")
		}
		opts = append(opts, otlptracehttp.WithTimeout(time.Duration(ms)*time.Millisecond))
	}
	switch c := first(getenv, "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "OTEL_EXPORTER_OTLP_COMPRESSION"); c {
	case "", "none":
	case "gzip":
		opts = append(opts, otlptracehttp.WithCompression(otlptracehttp.GzipCompression))
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION must be gzip or none, not %q", c)
	}
	sampler, err := samplerOf(getenv("OTEL_TRACES_SAMPLER"), getenv("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return nil, err
	}
	attrs, err := keyValues(getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES %w", err)
	}
	name := getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = attrs["service.name"]
	}
	if name == "" {
		name = "arbiter"
	}
	kv := []attribute.KeyValue{attribute.String("service.name", name), attribute.String("service.version", version)}
	for k, v := range attrs {
		if k != "service.name" {
			kv = append(kv, attribute.String(k, v))
		}
	}
	exporter, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithSampler(sampler),
		sdktrace.WithResource(resource.NewSchemaless(kv...)), sdktrace.WithIDGenerator(idGenerator{}))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	t := tp.Tracer(Instrumentation)
	tracer.Store(&t)
	on.Store(true)
	return func(ctx context.Context) error {
		on.Store(false)
		tracer.CompareAndSwap(&t, nil)
		return tp.Shutdown(ctx)
	}, nil
}

// idGenerator makes trace and span ids from math/rand/v2's generator,
// which every goroutine draws from without a lock; the SDK's default
// draws from one source behind a mutex, which every request's spans
// contend for under load.
type idGenerator struct{}

// NewIDs returns a new trace id and its root span's id.
func (idGenerator) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, newSpanID()
}

// NewSpanID returns a new span id in a trace.
func (idGenerator) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

// newSpanID returns a random span id, never the invalid zero.
func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

// on is set while a provider Setup installed exports.
var on atomic.Bool

// On reports whether Setup installed a provider that exports: the store
// reads a task's stored trace context back only then.
func On() bool { return on.Load() }

// TraceParent returns the W3C traceparent of ctx's span (version 00), ""
// when ctx has none or its trace is not sampled: with tracing off, or for
// a request the sampler left out, a store keeps nothing, and what is later
// done for it (the worker's decision, a delivery) starts no span.
func TraceParent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	// One allocation: this runs on every create while tracing is on.
	var b [55]byte
	traceID, spanID := sc.TraceID(), sc.SpanID()
	copy(b[:], "00-")
	hex.Encode(b[3:35], traceID[:])
	b[35] = '-'
	hex.Encode(b[36:52], spanID[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

// SpanContextOf returns the span context a stored traceparent names; an
// invalid one for "" or anything else that is not a traceparent.
func SpanContextOf(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}

// WithParent returns ctx whose span is the remote one a stored traceparent
// names, so that the spans started from it (StartChild) join that trace
// as its children: a task's create for the worker's agent decision, the
// span that queued an outbox message for its delivery. When traceparent
// names none (the work was not traced: tracing was off or its trace not
// sampled), the context carries no span, so nothing started from it
// records or keeps a trace context: a task's trace is whole or absent.
func WithParent(ctx context.Context, traceparent string) context.Context {
	sc := SpanContextOf(traceparent)
	if !sc.IsValid() {
		if trace.SpanContextFromContext(ctx).IsValid() {
			return trace.ContextWithSpan(ctx, noSpan)
		}
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// noSpan is the OpenTelemetry API's no-op span: what StartChild returns
// when it starts none.
var noSpan = trace.SpanFromContext(context.Background())

// Sampled reports whether ctx's span belongs to a sampled trace: only
// then do the spans under it record anything.
func Sampled(ctx context.Context) bool { return trace.SpanContextFromContext(ctx).IsSampled() }

// StartChild starts the span name under ctx's span when that span's trace
// is sampled, and otherwise starts none: it returns ctx and a no-op span,
// at the cost of no allocation. Every span but a request's (and a claim's,
// which links many traces) is a child: work done for a request or a task
// that was not sampled, or outside any trace, makes no span, instead of
// a root of a trace of its own that the sampler would keep one time in
// ten.
func StartChild(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !Sampled(ctx) {
		return ctx, noSpan
	}
	return Tracer().Start(ctx, name, opts...)
}

// first returns the first non-empty of the variables.
func first(getenv func(string) string, names ...string) string {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// keyValues parses the OTEL list form key1=value1,key2=value2, its values
// URL-encoded.
func keyValues(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, errors.New("must be key=value pairs separated by commas")
		}
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("has a value that is not URL-encoded: %q", k)
		}
		m[k] = value
	}
	return m, nil
}

// DefaultSampleRatio is the share of the traces a request starts that
// Arbiter samples when OTEL_TRACES_SAMPLER is not set: its default is
// parentbased_traceidratio at this ratio (OTEL_TRACES_SAMPLER_ARG changes
// it), not the SDK's parentbased_always_on, because sampling every request
// costs the API's server about +15% CPU on a create and +20% on a get
// (docs/benchmarks.md, "Traces"), over the +10% a default may cost. A
// caller's sampled traceparent is still followed, and the worker's spans
// follow their create's choice, so a trace is whole or absent.
const DefaultSampleRatio = 0.1

// samplerOf returns the sampler OTEL_TRACES_SAMPLER names, with
// OTEL_TRACES_SAMPLER_ARG its ratio; unset, parentbased_traceidratio at
// DefaultSampleRatio.
func samplerOf(name, arg string) (sdktrace.Sampler, error) {
	ratio := 1.0
	if name == "" {
		name, ratio = "parentbased_traceidratio", DefaultSampleRatio
	}
	if arg != "" {
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return nil, errors.New("OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1")
		}
		ratio = r
	}
	switch name {
	case "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER %q is not one this build knows (always_on, always_off, traceidratio and their parentbased_ forms)", name)
}

// Transport returns base, or http.DefaultTransport when nil, with the
// trace context of each request's context written into its headers
// (traceparent), so the other side continues the trace.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return propagating{base}
}

// propagating writes the trace context into outgoing requests.
type propagating struct{ base http.RoundTripper }

// RoundTrip injects the context's trace into a copy of r's headers.
func (p propagating) RoundTrip(r *http.Request) (*http.Response, error) {
	if trace.SpanContextFromContext(r.Context()).IsValid() {
		r = r.Clone(r.Context())
		otel.GetTextMapPropagator().Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	}
	return p.base.RoundTrip(r)
}

// Inject writes ctx's trace context into h.
func Inject(ctx context.Context, h http.Header) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract returns ctx with the trace context h carries (traceparent).
func Extract(ctx context.Context, h http.Header) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(h))
}

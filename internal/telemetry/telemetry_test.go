package telemetry

import (
	"context"
	"strings"
	"testing"
)

func env(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

// TestEnabled: traces are off unless an OTLP endpoint is named or
// OTEL_TRACES_EXPORTER=otlp, and OTEL_SDK_DISABLED or
// OTEL_TRACES_EXPORTER=none turn them off whatever else is set.
func TestEnabled(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		vars map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
	} {
		if got := Enabled(env(tc.vars)); got != tc.want {
			t.Errorf("Enabled(%v) = %v, want %v", tc.vars, got, tc.want)
		}
	}
}

// TestSetup_RefusesWhatItCannotDo names the variable at fault, and
// installs nothing when traces are off.
func TestSetup_RefusesWhatItCannotDo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		vars    map[string]string
		mention string
	}{
		{map[string]string{"OTEL_TRACES_EXPORTER": "jaeger"}, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "novalue"}, "OTEL_EXPORTER_OTLP_HEADERS"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TIMEOUT": "5s"}, "OTEL_EXPORTER_OTLP_TIMEOUT"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "OTEL_EXPORTER_OTLP_COMPRESSION"},
	} {
		shutdown, err := Setup(context.Background(), env(tc.vars), "test")
		if err == nil || !strings.Contains(err.Error(), tc.mention) || shutdown != nil {
			t.Errorf("Setup(%v) = %v, want an error naming %s", tc.vars, err, tc.mention)
		}
	}
	if shutdown, err := Setup(context.Background(), env(nil), "test"); shutdown != nil || err != nil {
		t.Errorf("Setup with nothing set = %v, %v; want nothing installed", shutdown != nil, err)
	}
}

// TestKeyValues parses the OTEL list form, its values URL-decoded.
func TestKeyValues(t *testing.T) {
	t.Parallel()
	got, err := keyValues("api-key=abc%20def, deployment.environment=prod,,")
	if err != nil || len(got) != 2 || got["api-key"] != "abc def" || got["deployment.environment"] != "prod" {
		t.Errorf("keyValues = %v, %v", got, err)
	}
}

// TestSamplerOf: unset, the sampler is parentbased_traceidratio at
// DefaultSampleRatio (OTEL_TRACES_SAMPLER_ARG moves the ratio); a named
// sampler wins, and the ratio applies only to the ratio samplers.
func TestSamplerOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, arg, want string
	}{
		{"", "", "ParentBased{root:TraceIDRatioBased{0.1}"},
		{"", "0.25", "ParentBased{root:TraceIDRatioBased{0.25}"},
		{"parentbased_always_on", "", "ParentBased{root:AlwaysOnSampler"},
		{"always_on", "", "AlwaysOnSampler"},
		{"always_off", "", "AlwaysOffSampler"},
		{"parentbased_always_off", "", "ParentBased{root:AlwaysOffSampler"},
		{"traceidratio", "", "TraceIDRatioBased{1}"},
		{"traceidratio", "0.5", "TraceIDRatioBased{0.5}"},
		{"parentbased_traceidratio", "", "ParentBased{root:TraceIDRatioBased{1}"},
	} {
		s, err := samplerOf(tc.name, tc.arg)
		if err != nil || !strings.HasPrefix(s.Description(), tc.want) {
			t.Errorf("samplerOf(%q, %q) = %v, %v; want %s…", tc.name, tc.arg, s, err, tc.want)
		}
	}
}

package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/arbiterhq/arbiter/internal/testutil"
)

// scrape reads the metrics at url and parses the exposition format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d", url, res.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("the metrics do not parse: %v", err)
	}
	return families
}

// sample returns the value of the family's metric whose labels include
// labels (a counter's, a gauge's, or a histogram's count), and whether
// there is one.
func sample(families map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		matched := 0
		for _, l := range m.GetLabel() {
			if want, ok := labels[l.GetName()]; ok && want == l.GetValue() {
				matched++
			}
		}
		if matched != len(labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// TestRun_Metrics: with ARBITER_METRICS_ADDR, serve answers /metrics on
// that listener alone, in the Prometheus text format: requests by route
// pattern (never an id) and status, tasks created, the worker's claims and
// verifier calls, key checks by cache outcome, webhook deliveries and
// failed deliveries, and the open tasks' gauge.
func TestRun_Metrics(t *testing.T) {
	t.Parallel()
	rules := filepath.Join(t.TempDir(), "rules.txt")
	os.WriteFile(rules, []byte("approve 0.97 context.amount < 50\n"), 0o600)
	// The tasks' callbacks: /ok takes its message, /fail answers 500 (the
	// message is retried in seconds, after the test).
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ok" {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(receiver.Close)
	getenv := env(map[string]string{
		"ARBITER_DATABASE_URL":          "sqlite:" + filepath.Join(t.TempDir(), "a.db"),
		"ARBITER_AGENT":                 "rules",
		"ARBITER_AGENT_RULES":           rules,
		"ARBITER_METRICS_ADDR":          "127.0.0.1:0",
		"ARBITER_WEBHOOK_ALLOW_PRIVATE": "1",
	})
	base, logs := serveWithLogs(t, getenv)
	m := regexp.MustCompile(`msg="metrics listening[^"]*" addr=(\S+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no metrics listener in the log:\n%s", logs.String())
	}
	metricsURL := "http://" + m[1] + "/metrics"
	key := strings.TrimSpace(runOK(t, getenv, "admin", "create-key", "--email", "ops@example.com"))

	// The small one is completed and its callback delivered; the large one
	// goes to a person and its callback fails.
	_, small := testutil.APICall(t, "POST", base+"/v1/tasks", key, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"amount":20},
		"callback_url":"`+receiver.URL+`/ok"}`)
	_, large := testutil.APICall(t, "POST", base+"/v1/tasks", key, `{"prompt":"Refund?","allowed_verdicts":["approve","reject"],"context":{"amount":500},
		"callback_url":"`+receiver.URL+`/fail"}`)
	status, _ := testutil.APICall(t, "POST", base+"/v1/tasks/batch", key, `{"tasks":[
		{"prompt":"a","allowed_verdicts":["approve"],"context":{"amount":1}},
		{"prompt":"b","allowed_verdicts":["approve"],"context":{"amount":2}}]}`)
	if status != http.StatusOK {
		t.Fatalf("batch = %d", status)
	}
	waitStatus(t, base, key, small["id"].(string), "completed")
	waitStatus(t, base, key, large["id"].(string), "human_needed")
	if status, _ := testutil.APICall(t, "GET", base+"/v1/tasks/tsk_0123456789abcdef", key, ""); status != http.StatusNotFound {
		t.Fatalf("unknown task = %d", status)
	}

	// The worker records its calls after they finish, and the deliverer
	// its attempts; wait for all four calls and both attempts.
	var families map[string]*dto.MetricFamily
	for deadline := testutil.Patience(t); ; time.Sleep(20 * time.Millisecond) {
		families = scrape(t, metricsURL)
		verified, _ := sample(families, "arbiter_verifier_duration_seconds", map[string]string{"outcome": "ok"})
		delivered, _ := sample(families, "arbiter_webhook_delivery_duration_seconds", map[string]string{"outcome": "delivered"})
		failed, _ := sample(families, "arbiter_webhook_delivery_duration_seconds", map[string]string{"outcome": "failed"})
		if verified >= 4 && delivered >= 1 && failed >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all counted: %v verifier calls, %v deliveries, %v failed deliveries", verified, delivered, failed)
		}
	}
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   func(float64) bool
		says   string
	}{
		{"arbiter_http_requests_total", map[string]string{"route": "/v1/tasks", "method": "POST", "status": "200"},
			func(v float64) bool { return v == 2 }, "2 creates"},
		{"arbiter_http_requests_total", map[string]string{"route": "/v1/tasks/batch", "method": "POST", "status": "200"},
			func(v float64) bool { return v == 1 }, "1 batch"},
		{"arbiter_http_requests_total", map[string]string{"route": "/v1/tasks/{id}", "method": "GET", "status": "404"},
			func(v float64) bool { return v == 1 }, "1 unknown task, by its pattern"},
		{"arbiter_http_request_duration_seconds", map[string]string{"route": "/v1/tasks/{id}", "method": "GET", "status": "200"},
			func(v float64) bool { return v >= 2 }, "the polls of waitStatus"},
		{"arbiter_tasks_created_total", nil, func(v float64) bool { return v == 4 }, "4 tasks"},
		{"arbiter_worker_claimed_tasks_total", nil, func(v float64) bool { return v == 4 }, "4 claimed"},
		{"arbiter_worker_claims_total", nil, func(v float64) bool { return v >= 1 }, "claims run"},
		{"arbiter_key_checks_total", map[string]string{"cache": "miss"}, func(v float64) bool { return v >= 1 }, "a lookup"},
		{"arbiter_key_checks_total", map[string]string{"cache": "hit"}, func(v float64) bool { return v >= 1 }, "a cache hit"},
		{"arbiter_webhook_delivery_duration_seconds", map[string]string{"outcome": "delivered"},
			func(v float64) bool { return v == 1 }, "the completed task's callback, delivered"},
		{"arbiter_webhook_delivery_duration_seconds", map[string]string{"outcome": "failed"},
			func(v float64) bool { return v == 1 }, "the other's callback, answered 500"},
		{"arbiter_webhook_delivery_failures_total", map[string]string{"final": "false"},
			func(v float64) bool { return v == 1 }, "one failure, to be retried"},
		{"arbiter_webhook_delivery_failures_total", map[string]string{"final": "true"},
			func(v float64) bool { return v == 0 }, "no message failed for good"},
		{"arbiter_tasks", map[string]string{"status": "human_needed"}, func(v float64) bool { return v >= 0 }, "a gauge"},
		{"arbiter_tasks", map[string]string{"status": "pending"}, func(v float64) bool { return v >= 0 }, "a gauge"},
		{"arbiter_calibration_drifted_accounts", nil, func(v float64) bool { return v == 0 }, "no account drifted"},
		{"go_goroutines", nil, func(v float64) bool { return v > 0 }, "the runtime's metrics"},
	} {
		if v, ok := sample(families, tc.name, tc.labels); !ok || !tc.want(v) {
			t.Errorf("%s%v = %v (present: %v), want %s", tc.name, tc.labels, v, ok, tc.says)
		}
	}
	for _, f := range families["arbiter_http_requests_total"].GetMetric() {
		for _, l := range f.GetLabel() {
			if l.GetName() == "route" && strings.Contains(l.GetValue(), "tsk_") {
				t.Errorf("a task id became a label: %s", l.GetValue())
			}
		}
	}
	// The public listener does not serve them.
	res, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics on the public listener = %d, want 404", res.StatusCode)
	}
}

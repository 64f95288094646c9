package openapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/arbiterhq/arbiter/openapi"
	"github.com/arbiterhq/arbiter/openapi/openapitest"
)

func TestDocument_IsValidOpenAPI31(t *testing.T) {
	var head struct {
		OpenAPI string `json:"openapi"`
	}
	if err := json.Unmarshal(openapi.Document(), &head); err != nil || head.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q (%v), want 3.1.0", head.OpenAPI, err)
	}
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatalf("the document is not valid: %v", err)
	}
	for _, path := range []string{"/v1/tasks", "/v1/tasks/batch", "/v1/tasks/{id}", "/demo/tasks", "/demo/verdicts", "/healthz", "/v1/openapi.json"} {
		if doc.Paths.Find(path) == nil {
			t.Errorf("%s is not documented", path)
		}
	}
}

// recorder is a testing.TB that keeps the failures instead of failing.
type recorder struct {
	testing.TB
	failures []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.failures = append(r.failures, fmt.Sprintf(f, a...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.failures = append(r.failures, fmt.Sprintf(f, a...)) }

// The validator must catch drift, not only bless what the server sends.
func TestValidateResponse_CatchesMismatches(t *testing.T) {
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	rateLimited := http.Header{"Content-Type": {"application/json"}, "Retry-After": {"3600"}}
	task := `{"id":"tsk_0123456789abcdef","status":"pending","task_type":"decide","source":"","touchpoint":"chat",
		"prompt":"p","allowed_verdicts":["a"],"confidence_threshold":0.8,"final_verdict":%s,"final_tier":null,
		"final_confidence":null,"created_at":1795415525.173,"completed_at":null,"deadline_at":null,"expired_at":null,"attempts":[]%s}`
	for _, c := range []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		valid              bool
	}{
		{"Task", "GET", "/v1/tasks/tsk_0123456789abcdef", 200, jsonHeader, fmt.Sprintf(task, "null", ""), true},
		{"TaskWithUnknownField", "GET", "/v1/tasks/tsk_0123456789abcdef", 200, jsonHeader, fmt.Sprintf(task, "null", `,"later":1`), true},
		{"TaskWithNumberVerdict", "GET", "/v1/tasks/tsk_0123456789abcdef", 200, jsonHeader, fmt.Sprintf(task, "5", ""), false},
		{"TaskMissingFields", "POST", "/v1/tasks", 200, jsonHeader, `{"id":"tsk_0123456789abcdef"}`, false},
		{"RateLimited", "POST", "/v1/tasks", 429, rateLimited, `{"error":"Cap reached."}`, true},
		{"RateLimitedWithoutRetryAfter", "POST", "/v1/tasks", 429, jsonHeader, `{"error":"Cap reached."}`, false},
		{"UndocumentedStatus", "POST", "/v1/tasks", 404, jsonHeader, `{"error":"No."}`, false},
		{"EmptyErrorSentence", "GET", "/v1/tasks/x", 404, jsonHeader, `{"error":""}`, false},
		{"Replayed", "POST", "/v1/tasks", 200, http.Header{"Content-Type": {"application/json"}, "Idempotent-Replayed": {"true"}}, fmt.Sprintf(task, "null", ""), true},
		{"ReplayedNotTrue", "POST", "/v1/tasks", 200, http.Header{"Content-Type": {"application/json"}, "Idempotent-Replayed": {"yes"}}, fmt.Sprintf(task, "null", ""), false},
		{"KeyInFlight", "POST", "/v1/tasks", 409, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"1"}}, `{"error":"In flight."}`, true},
		{"KeyInFlightWithoutRetryAfter", "POST", "/v1/tasks", 409, jsonHeader, `{"error":"In flight."}`, false},
		{"KeyMismatch", "POST", "/v1/tasks", 422, jsonHeader, `{"error":"Another request."}`, true},
		{"BatchResults", "POST", "/v1/tasks/batch", 200, jsonHeader, `{"results":[{"status":200,"task":` + fmt.Sprintf(task, "null", "") +
			`,"replayed":false},{"status":429,"error":"Cap reached."}]}`, true},
		{"BatchTaskWithoutReplayed", "POST", "/v1/tasks/batch", 200, jsonHeader, `{"results":[{"status":200,"task":` + fmt.Sprintf(task, "null", "") + `}]}`, false},
		{"BatchErrorWith200", "POST", "/v1/tasks/batch", 200, jsonHeader, `{"results":[{"status":200,"error":"No."}]}`, false},
		{"BatchErrorStatus500", "POST", "/v1/tasks/batch", 200, jsonHeader, `{"results":[{"status":500,"error":"No."}]}`, false},
		{"UnhealthyWithReason", "GET", "/healthz", 503, jsonHeader, `{"ok":false,"error":"No worker is running."}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, "http://localhost"+c.path, nil)
			r := &recorder{TB: t}
			openapitest.ValidateResponse(r, req, c.status, c.header, []byte(c.body))
			if valid := len(r.failures) == 0; valid != c.valid {
				t.Errorf("valid = %v, want %v; failures: %q", valid, c.valid, r.failures)
			}
		})
	}
}

package openapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/arbiterhq/arbiter"
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
	for _, path := range []string{"/v1/tasks", "/v1/tasks/batch", "/v1/tasks/{id}", "/demo/tasks", "/demo/verdicts", "/healthz", "/v1/openapi.json", "/v1/mcp"} {
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
	const id = "req_0123456789abcdef01234567"
	jsonHeader := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {id}}
	rateLimited := http.Header{"Content-Type": {"application/json"}, "Retry-After": {"3600"}, "X-Request-Id": {id}}
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
		{"RateLimited", "POST", "/v1/tasks", 429, rateLimited, `{"error":"Cap reached.","code":"daily_cap_exceeded"}`, true},
		{"RateLimitedWithoutRetryAfter", "POST", "/v1/tasks", 429, jsonHeader, `{"error":"Cap reached.","code":"daily_cap_exceeded"}`, false},
		{"ErrorWithoutCode", "POST", "/v1/tasks", 422, jsonHeader, `{"error":"Another request."}`, false},
		{"ErrorWithUnknownCode", "POST", "/v1/tasks", 422, jsonHeader, `{"error":"Another request.","code":"oops"}`, false},
		{"ErrorWithField", "POST", "/v1/tasks", 400, jsonHeader, `{"error":"task_type must be a string.","code":"invalid_field","field":"task_type"}`, true},
		{"WithoutRequestID", "POST", "/v1/tasks", 422, http.Header{"Content-Type": {"application/json"}}, `{"error":"Another request.","code":"idempotency_mismatch"}`, false},
		{"UnsupportedMediaType", "POST", "/v1/tasks", 415, jsonHeader, `{"error":"Send JSON.","code":"unsupported_media_type"}`, true},
		{"HeadersTooLarge", "GET", "/v1/tasks/x", 431, jsonHeader, `{"error":"Too large.","code":"headers_too_large"}`, true},
		{"UndocumentedStatus", "POST", "/v1/tasks", 404, jsonHeader, `{"error":"No."}`, false},
		{"EmptyErrorSentence", "GET", "/v1/tasks/x", 404, jsonHeader, `{"error":""}`, false},
		{"Replayed", "POST", "/v1/tasks", 200, http.Header{"Content-Type": {"application/json"}, "Idempotent-Replayed": {"true"}, "X-Request-Id": {id}}, fmt.Sprintf(task, "null", ""), true},
		{"ReplayedNotTrue", "POST", "/v1/tasks", 200, http.Header{"Content-Type": {"application/json"}, "Idempotent-Replayed": {"yes"}, "X-Request-Id": {id}}, fmt.Sprintf(task, "null", ""), false},
		{"KeyInFlight", "POST", "/v1/tasks", 409, http.Header{"Content-Type": {"application/json"}, "Retry-After": {"1"}, "X-Request-Id": {id}}, `{"error":"In flight.","code":"idempotency_in_flight"}`, true},
		{"KeyInFlightWithoutRetryAfter", "POST", "/v1/tasks", 409, jsonHeader, `{"error":"In flight.","code":"idempotency_in_flight"}`, false},
		{"KeyMismatch", "POST", "/v1/tasks", 422, jsonHeader, `{"error":"Another request.","code":"idempotency_mismatch"}`, true},
		{"BatchResults", "POST", "/v1/tasks/batch", 200, jsonHeader, `{"results":[{"kind":"task","status":200,"task":` + fmt.Sprintf(task, "null", "") +
			`,"replayed":false},{"kind":"error","status":429,"error":"Cap reached.","code":"daily_cap_exceeded"}]}`, true},
		{"BatchResultsWithoutKind", "POST", "/v1/tasks/batch", 200, jsonHeader, `{"results":[{"status":429,"error":"Cap reached."}]}`, false},
		{"BatchErrorKindOnTask", "POST", "/v1/tasks/batch", 200, jsonHeader, `{"results":[{"kind":"error","status":200,"task":` + fmt.Sprintf(task, "null", "") + `,"replayed":false}]}`, false},
		{"BatchTaskWithoutReplayed", "POST", "/v1/tasks/batch", 200, jsonHeader, `{"results":[{"kind":"task","status":200,"task":` + fmt.Sprintf(task, "null", "") + `}]}`, false},
		{"BatchErrorWith200", "POST", "/v1/tasks/batch", 200, jsonHeader, `{"results":[{"kind":"error","status":200,"error":"No."}]}`, false},
		{"BatchErrorStatus500", "POST", "/v1/tasks/batch", 200, jsonHeader, `{"results":[{"kind":"error","status":500,"error":"No."}]}`, false},
		{"UnhealthyWithReason", "GET", "/healthz", 503, jsonHeader, `{"ok":false,"error":"No worker is running."}`, true},
		// Any origin is checked, not only the document's servers.
		{"OtherOrigin", "GET", "http://127.0.0.1:54321/v1/tasks/x", 404, jsonHeader, `{"error":""}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := c.path
			if strings.HasPrefix(url, "/") {
				url = "http://localhost" + url
			}
			req, _ := http.NewRequest(c.method, url, nil)
			r := &recorder{TB: t}
			openapitest.ValidateResponse(r, req, c.status, c.header, []byte(c.body))
			if valid := len(r.failures) == 0; valid != c.valid {
				t.Errorf("valid = %v, want %v; failures: %q", valid, c.valid, r.failures)
			}
		})
	}
}

// The document is read by people and by generators (TypeScript clients,
// documentation sites), so every operation must say what it does and show
// what it takes and gives; and the rules third-party tools taught us hold
// for every schema (see TestDocument_SchemasSuitGenerators). A new
// operation that leaves one out fails here, before `make contract-lint`.
func TestDocument_EveryOperationIsDescribed(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) == 0 {
		t.Error("the document names no servers")
	}
	tags := map[string]bool{}
	for _, tag := range doc.Tags {
		if tag.Description == "" {
			t.Errorf("tag %s has no description", tag.Name)
		}
		tags[tag.Name] = true
	}
	operationIDs := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if op.OperationID == "" || op.Summary == "" || op.Description == "" {
				t.Errorf("%s needs an operationId, a summary and a description", name)
			} else if other, ok := operationIDs[op.OperationID]; ok {
				t.Errorf("%s and %s share the operationId %s", name, other, op.OperationID)
			}
			operationIDs[op.OperationID] = name
			if len(op.Tags) == 0 {
				t.Errorf("%s has no tag", name)
			}
			for _, tag := range op.Tags {
				if !tags[tag] {
					t.Errorf("%s has the tag %q, which the document's tags do not list", name, tag)
				}
			}
			// Public operations say so with "security": [], so that a
			// document-wide requirement never covers them by mistake.
			if op.Security == nil {
				t.Errorf("%s does not say its security: [{\"bearer\": []}], or [] when public", name)
			} else if public, has401 := len(*op.Security) == 0, op.Responses.Value("401") != nil; public == has401 {
				t.Errorf("%s: public (security: []) = %v, a 401 documented = %v; a key's operations have a 401, public ones none", name, public, has401)
			}
			for _, p := range op.Parameters {
				if p.Value.Description == "" || p.Value.Example == nil {
					t.Errorf("%s: parameter %s needs a description and an example", name, p.Value.Name)
				}
			}
			if body := op.RequestBody; body != nil {
				for mediaType, content := range body.Value.Content {
					if content.Example == nil && len(content.Examples) == 0 {
						t.Errorf("%s: the %s request body has no example", name, mediaType)
					}
				}
			}
			for status, response := range op.Responses.Map() {
				// chi answers a method a path does not list with 405;
				// no listed operation ever does.
				if status == "405" {
					t.Errorf("%s documents a 405, which only methods it does not list get", name)
				}
				if response.Value.Description == nil || *response.Value.Description == "" {
					t.Errorf("%s → %s has no description", name, status)
				}
				for mediaType, content := range response.Value.Content {
					if content.Example == nil && len(content.Examples) == 0 {
						t.Errorf("%s → %s: the %s body has no example", name, status, mediaType)
					}
				}
			}
		}
	}
}

// The rules of the contract polish (issue 14), which generators taught:
// every number is a time or a confidence and says format double; every
// integer says its size; no schema has a default (a generated TypeScript
// client makes a field with a default required; descriptions say the
// default instead); no enum holds null (a nullable enum is a oneOf of the
// enum and {"type": "null"}).
func TestDocument_SchemasSuitGenerators(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[*openapi3.Schema]bool{}
	var check func(where string, ref *openapi3.SchemaRef)
	check = func(where string, ref *openapi3.SchemaRef) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		switch {
		case s.Type.Includes("number") && s.Format != "double":
			t.Errorf("%s: a number with format %q, want double", where, s.Format)
		case s.Type.Includes("integer") && s.Format != "int32" && s.Format != "int64":
			t.Errorf("%s: an integer with format %q, want int32 or int64", where, s.Format)
		}
		if s.Default != nil {
			t.Errorf("%s: has a default (%v); say it in the description", where, s.Default)
		}
		for _, v := range s.Enum {
			if v == nil {
				t.Errorf("%s: null in an enum; use oneOf with {\"type\": \"null\"}", where)
			}
		}
		for name, p := range s.Properties {
			check(where+"."+name, p)
		}
		check(where+"[]", s.Items)
		check(where+"{}", s.AdditionalProperties.Schema)
		check(where+"!", s.Not)
		for i, group := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf, s.AllOf} {
			for j, sub := range group {
				check(fmt.Sprintf("%s/%s/%d", where, []string{"oneOf", "anyOf", "allOf"}[i], j), sub)
			}
		}
	}
	for name, s := range doc.Components.Schemas {
		check("#/components/schemas/"+name, s)
	}
	for name, p := range doc.Components.Parameters {
		check("#/components/parameters/"+name, p.Value.Schema)
	}
	for name, h := range doc.Components.Headers {
		check("#/components/headers/"+name, h.Value.Schema)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			for _, p := range op.Parameters {
				check(name+" "+p.Value.Name, p.Value.Schema)
			}
			if op.RequestBody != nil {
				for _, c := range op.RequestBody.Value.Content {
					check(name+" body", c.Schema)
				}
			}
			for status, r := range op.Responses.Map() {
				for _, h := range r.Value.Headers {
					check(name+" → "+status+" header", h.Value.Schema)
				}
				for _, c := range r.Value.Content {
					check(name+" → "+status, c.Schema)
				}
			}
		}
	}
	if len(seen) < 20 {
		t.Fatalf("checked %d schemas; the walk misses most of the document", len(seen))
	}
}

// TestDocument_DescribesWebhooks: every event type is under the top-level
// webhooks, and payloads as Arbiter builds them validate against the
// schemas there.
func TestDocument_DescribesWebhooks(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range append([]string{arbiter.EventPing}, arbiter.WebhookEventTypes...) {
		if item := doc.Webhooks[typ]; item == nil || item.Post == nil || item.Post.RequestBody == nil {
			t.Errorf("the webhook %s is not documented", typ)
		}
	}
	now := time.Now()
	completed := arbiter.Timestamp(1795415525173)
	verdict, tier, confidence := "approve", arbiter.TierHuman, 1.0
	task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusCompleted, TaskType: "decide", Touchpoint: "chat",
		Prompt: "p", AllowedVerdicts: []string{"approve"}, ConfidenceThreshold: 0.8, FinalVerdict: &verdict, FinalTier: &tier,
		FinalConfidence: &confidence, CreatedAt: completed - 1000, CompletedAt: &completed, Attempts: []arbiter.Attempt{}}
	for event, payload := range map[string][]byte{
		arbiter.EventTaskCompleted: must(arbiter.NewWebhookPayload(arbiter.EventTaskCompleted, now, task)),
		arbiter.EventPing:          must(arbiter.NewWebhookPayload(arbiter.EventPing, now, arbiter.PingData{EndpointID: "wh_0123456789abcdef"})),
		arbiter.EventTaskVoteRecorded: must(arbiter.NewWebhookPayload(arbiter.EventTaskVoteRecorded, now,
			arbiter.VoteCount{TaskID: "tsk_0123456789abcdef", Votes: 1, ReviewsRequired: 2})),
		arbiter.EventTaskEscalated: must(arbiter.NewWebhookPayload(arbiter.EventTaskEscalated, now, &arbiter.Task{ID: "tsk_0123456789abcdef",
			Status: arbiter.StatusHumanNeeded, TaskType: "decide", Touchpoint: "chat", Prompt: "p", AllowedVerdicts: []string{"approve"},
			ConfidenceThreshold: 0.8, CreatedAt: completed - 1000, Attempts: []arbiter.Attempt{},
			Escalation: &arbiter.TaskEscalation{Rung: 1, After: "30m", To: "role:admin", EscalatedAt: completed}})),
	} {
		var v any
		if err := json.Unmarshal(payload, &v); err != nil {
			t.Fatal(err)
		}
		schema := doc.Webhooks[event].Post.RequestBody.Value.Content.Get("application/json").Schema
		if err := schema.Value.VisitJSON(v); err != nil {
			t.Errorf("%s does not match the %s webhook's body: %v", payload, event, err)
		}
	}
	var bad any
	_ = json.Unmarshal([]byte(`{"type":"task.created","timestamp":"x","data":{}}`), &bad)
	if doc.Components.Schemas["WebhookTaskEvent"].Value.VisitJSON(bad) == nil {
		t.Error("the schema accepts an event that is not one")
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// The document lists exactly the codes the server answers, in its order.
func TestDocument_ListsEveryErrorCode(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{"Error", "TaskBatchErrorResult"} {
		var got []string
		for _, v := range doc.Components.Schemas[schema].Value.Properties["code"].Value.Enum {
			got = append(got, v.(string))
		}
		if fmt.Sprint(got) != fmt.Sprint(arbiter.APICodes) {
			t.Errorf("%s.code lists %v, want arbiter.APICodes %v", schema, got, arbiter.APICodes)
		}
	}
}

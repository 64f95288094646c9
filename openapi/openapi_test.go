package openapi_test

import (
	"encoding/json"
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
	for _, path := range []string{"/v1/tasks", "/v1/tasks/{id}", "/demo/tasks", "/demo/verdicts", "/healthz", "/v1/openapi.json"} {
		if doc.Paths.Find(path) == nil {
			t.Errorf("%s is not documented", path)
		}
	}
}

package openapi_test

import (
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/openapi/openapitest"
)

// TestDocument_CallbackURLListsEveryEvent: wherever the document
// describes callback_url, it names every event type a callback receives
// (arbiter.CallbackEventTypes).
func TestDocument_CallbackURLListsEveryEvent(t *testing.T) {
	doc, err := openapitest.Load()
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for name, schema := range doc.Components.Schemas {
		prop := schema.Value.Properties["callback_url"]
		if prop == nil {
			continue
		}
		found++
		for _, event := range arbiter.CallbackEventTypes {
			if !strings.Contains(prop.Value.Description, event) {
				t.Errorf("%s.callback_url's description does not name %s: %q", name, event, prop.Value.Description)
			}
		}
	}
	if found == 0 {
		t.Fatal("no schema has a callback_url")
	}
}

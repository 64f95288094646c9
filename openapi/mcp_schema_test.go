package openapi_test

import (
	"encoding/json"
	"testing"

	"github.com/arbiterhq/arbiter/openapi"
)

// TestDocument_MCPMessagesAreTyped keeps the MCP schemas usable by code
// generators: an object schema with neither properties nor
// additionalProperties is made a type that holds nothing by
// openapi-typescript (Record<string, never>), so the document's own
// tools/call example, whose params hold a name and arguments, would not
// type-check. The params and the result name what tools/call puts there.
func TestDocument_MCPMessagesAreTyped(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openapi.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, raw json.RawMessage)
	walk = func(path string, raw json.RawMessage) {
		var s struct {
			Type                 any                        `json:"type"`
			Properties           map[string]json.RawMessage `json:"properties"`
			AdditionalProperties json.RawMessage            `json:"additionalProperties"`
			Items                json.RawMessage            `json:"items"`
		}
		if json.Unmarshal(raw, &s) != nil {
			return
		}
		if s.Type == "object" && len(s.Properties) == 0 && len(s.AdditionalProperties) == 0 {
			t.Errorf("%s is an object that can hold nothing for openapi-typescript: give it properties or additionalProperties", path)
		}
		for name, p := range s.Properties {
			walk(path+"."+name, p)
		}
		if len(s.Items) > 0 {
			walk(path+"[]", s.Items)
		}
	}
	for _, name := range []string{"JSONRPCMessage", "JSONRPCResponse"} {
		walk(name, doc.Components.Schemas[name])
	}
	var res struct {
		Properties struct {
			Result struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"result"`
		} `json:"properties"`
	}
	_ = json.Unmarshal(doc.Components.Schemas["JSONRPCResponse"], &res)
	for _, p := range []string{"content", "structuredContent", "isError"} {
		if _, ok := res.Properties.Result.Properties[p]; !ok {
			t.Errorf("JSONRPCResponse.result does not name %s", p)
		}
	}
}

package arbiter

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestSplitTaskBatch_AgreesWithTheDecoder: the batch envelope read in one
// pass gives the items the strict decoder gives, and leaves to it every
// envelope that is not plainly {"tasks": […]}, for its answer.
func TestSplitTaskBatch_AgreesWithTheDecoder(t *testing.T) {
	for _, tc := range []struct {
		body  string
		split bool
	}{
		{`{"tasks":[{"prompt":"a"},{"prompt":"b"}]}`, true},
		{" \n{ \"tasks\" :\t[ {\"prompt\": \"a\" } ,\n null , 5, \"x\", [1, {\"a\":\"]\"}], {\"p\":\"\\\"}\"} ] } \n", true},
		{`{"tasks":[]}`, true},
		{`{"tasks":[{"prompt":"a"}],"tasks":[]}`, false},
		{`{"tasks":[{"prompt":"a"}],"extra":1}`, false},
		{`{"extra":1,"tasks":[{"prompt":"a"}]}`, false},
		{`{"\u0074asks":[{"prompt":"a"}]}`, false},
		{`{"Tasks":[{"prompt":"a"}]}`, false},
		{`{"tasks":{"prompt":"a"}}`, false},
		{`{"tasks":null}`, false},
		{`{"tasks":[{"prompt":"a"}]} {}`, false},
		{`{"tasks":[{"prompt":"a"}]`, false},
		{`[{"tasks":[]}]`, false},
		{`null`, false},
		{``, false},
	} {
		req, ok := splitTaskBatch([]byte(tc.body))
		if ok != tc.split {
			t.Errorf("%q: split %v, want %v", tc.body, ok, tc.split)
			continue
		}
		if !ok {
			continue
		}
		var want taskBatchRequest
		if err := DecodeJSONStrict([]byte(tc.body), &want, nil); err != nil {
			t.Errorf("%q: split, but the decoder refuses it: %v", tc.body, err)
			continue
		}
		if len(req.Tasks) != len(want.Tasks) {
			t.Errorf("%q: %d items, the decoder %d", tc.body, len(req.Tasks), len(want.Tasks))
			continue
		}
		for i := range req.Tasks {
			if string(req.Tasks[i]) != string(want.Tasks[i]) {
				t.Errorf("%q: item %d is %s, the decoder's %s", tc.body, i, req.Tasks[i], want.Tasks[i])
			}
		}
	}
}

// TestJSONShape_AgreesWithCompactAndJSONDepth: for valid JSON, jsonShape
// says compact exactly when json.Compact changes nothing, and measures the
// depth JSONDepth does, of the text and of its compact form.
func TestJSONShape_AgreesWithCompactAndJSONDepth(t *testing.T) {
	for _, text := range []string{
		`1`, `"a b"`, `{"a":[1,2,{"b":"\" {["}]}`, `{"a": 1}`, "[1,\n2]", `{"k":"\\"}`, `[[[[]]]]`,
		`{"a":"tab\there"}`, `{"a":{"b":{"c":[" ", "\\\" ]"]}}}`,
	} {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(text)); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		depth, compact := jsonShape([]byte(text))
		if compact != (buf.String() == text) {
			t.Errorf("%q: compact %v, json.Compact gives %q", text, compact, buf.String())
		}
		if depth != JSONDepth([]byte(text)) || depth != JSONDepth(buf.Bytes()) {
			t.Errorf("%q: depth %d, JSONDepth %d, of the compact form %d", text, depth, JSONDepth([]byte(text)), JSONDepth(buf.Bytes()))
		}
	}
}

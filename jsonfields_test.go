package arbiter

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// FuzzObjectKeys checks eachObjectKey against the standard decoder's tokens on
// valid JSON, and that it never panics on anything else.
func FuzzObjectKeys(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"p","allowed_verdicts":["a"]}`,
		`{"a":{"b":[1,{"c":"}"}]},"d":"\"","\u0065":null,"f":-1.5e3,"g":true}`,
		` { } `, `[]`, `"x"`, `{"a":"\\"}`, `{"a`, `{"a":[}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got []string
		var values [][]byte
		_ = eachObjectKey(b, func(key, value []byte) error {
			got = append(got, string(key))
			values = append(values, value)
			return nil
		})
		if !json.Valid(b) {
			return
		}
		for i, v := range values {
			if !json.Valid(v) {
				t.Fatalf("eachObjectKey(%q): the value of %q is %q, not one JSON value", b, got[i], v)
			}
		}
		if want := tokenKeys(t, b); !slices.Equal(got, want) {
			t.Fatalf("eachObjectKey(%q) = %q, want %q", b, got, want)
		}
	})
}

// tokenKeys returns the member names of the object b holds, read with the
// decoder's tokens.
func tokenKeys(t *testing.T, b []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

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

// TestCompactDepth_AgreesWithCompactAndJSONDepth: for valid JSON,
// compactDepth says compact exactly when json.Compact changes nothing, and
// then measures the depth JSONDepth does.
func TestCompactDepth_AgreesWithCompactAndJSONDepth(t *testing.T) {
	for _, text := range []string{
		`1`, `"a b"`, `{"a":[1,2,{"b":"\" {["}]}`, `{"a": 1}`, "[1,\n2]", `{"k":"\\"}`, `[[[[]]]]`,
		`{"a":"tab\there"}`, `{"a":{"b":{"c":[" ", "\\\" ]"]}}}`,
	} {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(text)); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		depth, compact := compactDepth([]byte(text))
		if compact != (buf.String() == text) {
			t.Errorf("%q: compact %v, json.Compact gives %q", text, compact, buf.String())
		}
		if compact && depth != JSONDepth([]byte(text)) {
			t.Errorf("%q: depth %d, JSONDepth %d", text, depth, JSONDepth([]byte(text)))
		}
	}
}

package jsonfields

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// FuzzObjectKeys checks EachObjectKey against the standard decoder's tokens on
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
		_ = EachObjectKey(b, func(key, value []byte) error {
			got = append(got, string(key))
			values = append(values, value)
			return nil
		})
		if !json.Valid(b) {
			return
		}
		for i, v := range values {
			if !json.Valid(v) {
				t.Fatalf("EachObjectKey(%q): the value of %q is %q, not one JSON value", b, got[i], v)
			}
		}
		if want := tokenKeys(t, b); !slices.Equal(got, want) {
			t.Fatalf("EachObjectKey(%q) = %q, want %q", b, got, want)
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

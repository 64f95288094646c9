package arbiter_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

func TestParseDisplay(t *testing.T) {
	const ctx = `{"summary":"# Hi","photo":"https://e.com/p.png","order":{"id":"A1"}}`
	cases := []struct {
		name, display, context string
		want                   *arbiter.Display
		err                    string // a part of the error's message; "" for none
	}{
		{name: "None", display: "", context: ctx},
		{name: "FieldsAndViews", display: `{"fields":[{"field":"summary","view":"markdown"},{"field":"order"}]}`, context: ctx,
			want: &arbiter.Display{Fields: []arbiter.DisplayField{{Field: "summary", View: "markdown"}, {Field: "order"}}}},
		{name: "EveryView", display: `{"fields":[{"field":"photo","view":"text"}]}`, context: ctx,
			want: &arbiter.Display{Fields: []arbiter.DisplayField{{Field: "photo", View: "text"}}}},
		{name: "ErrNotAnObject", display: `5`, context: ctx, err: "display must be a JSON object"},
		{name: "ErrUnknownMember", display: `{"fields":[{"field":"order"}],"order":1}`, context: ctx, err: `unknown field "order"`},
		{name: "ErrNoFields", display: `{"fields":[]}`, context: ctx, err: "array of 1 to 16"},
		{name: "ErrFieldsMissing", display: `{}`, context: ctx, err: "array of 1 to 16"},
		{name: "ErrFieldsNotAnArray", display: `{"fields":"summary"}`, context: ctx, err: "array of 1 to 16"},
		{name: "ErrTooManyFields", display: `{"fields":[` + strings.Repeat(`{"field":"order"},`, 16) + `{"field":"order"}]}`, context: ctx, err: "array of 1 to 16"},
		{name: "ErrFieldMissing", display: `{"fields":[{"view":"markdown"}]}`, context: ctx, err: "display.fields[0].field is required"},
		{name: "ErrFieldNotAString", display: `{"fields":[{"field":1}]}`, context: ctx, err: "display.fields[0].field must be a string"},
		{name: "ErrEntryUnknownMember", display: `{"fields":[{"field":"order","as":"x"}]}`, context: ctx, err: `unknown field "as"`},
		{name: "ErrUnknownView", display: `{"fields":[{"field":"order","view":"video"}]}`, context: ctx, err: "view must be one of conversation, tool-call"},
		{name: "ErrNullView", display: `{"fields":[{"field":"order","view":null}]}`, context: ctx, err: "view must be a string"},
		{name: "ErrNotAMember", display: `{"fields":[{"field":"total"}]}`, context: ctx, err: `"total" is not a member of context`},
		{name: "ErrTwice", display: `{"fields":[{"field":"order"},{"field":"order"}]}`, context: ctx, err: `names "order" twice`},
		{name: "ErrContextNotAnObject", display: `{"fields":[{"field":"order"}]}`, context: `[1]`, err: "must be a JSON object"},
		{name: "ErrNoContext", display: `{"fields":[{"field":"order"}]}`, context: ``, err: "must be a JSON object"},
		{name: "ErrLongField", display: `{"fields":[{"field":"` + strings.Repeat("k", 201) + `"}]}`, context: ctx, err: "at most 200 characters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := arbiter.ParseDisplay(json.RawMessage(tc.display), json.RawMessage(tc.context))
			if tc.err != "" {
				var e *arbiter.Error
				if !errors.As(err, &e) || e.Code != arbiter.EINVALID || e.Field != "display" || !strings.Contains(e.Message, tc.err) {
					t.Fatalf("err = %#v, want EINVALID in display saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g, w := mustJSON(got), mustJSON(tc.want); g != w {
				t.Errorf("display = %s, want %s", g, w)
			}
		})
	}
}

// TestParseTaskCreate_Display: a create's display hint is checked against
// its context, kept in the TaskCreate, and its fingerprint differs from
// the same create without it.
func TestParseTaskCreate_Display(t *testing.T) {
	body := `{"prompt":"p","allowed_verdicts":["a","b"],"context":{"summary":"# Hi"},"display":{"fields":[{"field":"summary","view":"markdown"}]}}`
	in, err := arbiter.ParseTaskCreate([]byte(body))
	if err != nil || in.Display == nil || in.Display.Fields[0].View != "markdown" {
		t.Fatalf("ParseTaskCreate = %+v, %v", in.Display, err)
	}
	plain, _ := arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a","b"],"context":{"summary":"# Hi"}}`))
	if in.Fingerprint() == plain.Fingerprint() {
		t.Error("the display hint takes no part in the fingerprint")
	}
	for _, bad := range []string{`"display":null`, `"display":{"fields":[{"field":"nope"}]}`} {
		_, err := arbiter.ParseTaskCreate([]byte(`{"prompt":"p","allowed_verdicts":["a","b"],"context":{"summary":"# Hi"},` + bad + `}`))
		var e *arbiter.Error
		if !errors.As(err, &e) || e.Field != "display" {
			t.Errorf("%s: err = %v, want one in display", bad, err)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

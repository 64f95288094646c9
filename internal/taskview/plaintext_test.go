package taskview

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestPlainText(t *testing.T) {
	cases := []struct {
		name, context, want string
	}{
		{"None", `null`, ""},
		{"Tree", `{"order":"A1","lines":[1,{"sku":"X"}],"meta":{}}`, "order: A1\nlines: \n  - 1\n  - \n    sku: X\nmeta: {}"},
		{"Conversation", `[{"role":"user","content":[{"type":"text","text":"Broken?"},{"type":"image_url","image_url":{"url":"` + pngURL + `"}}]},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"refund","arguments":"{\"order\":\"A1\"}"}}]}]`,
			"user: Broken? [image: image/png, 67 bytes]\nassistant: \n  Tool call: refund\n    order: A1"},
		{"ToolCall", `{"tool":"send_email","input":{"to":"a@example.com","cc":["b@example.com"]}}`,
			"Tool call: send_email\n  to: a@example.com\n  cc: \n    - b@example.com"},
		{"ImageElsewhere", `{"type":"image","url":"http://10.0.0.8/p.png"}`, "[image, not loaded: http://10.0.0.8/p.png (private address)]"},
		{"Diff", quote("--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n"), "diff +1 -1\n--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y"},
		{"MarkdownIsItsSource", `{"type":"markdown","text":"# T\n\n<b>x</b>"}`, "# T\n\n<b>x</b>"},
		{"LinkDateMoney", `{"u":"https://e.com/a","at":1764184252,"total":{"amount":"84.90","currency":"EUR"}}`,
			"u: https://e.com/a\nat: 2025-11-26 19:10:52 UTC\ntotal: 84.90 EUR"},
		{"NotJSON", `{"a":`, `{"a":`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := PlainText(json.RawMessage(tc.context), 3000); got != tc.want {
				t.Errorf("PlainText = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPlainText_Bounded: the text is at most max bytes, ends with "…" when
// cut, and is valid UTF-8 however the cut falls.
func TestPlainText_Bounded(t *testing.T) {
	ctx := json.RawMessage(`[{"role":"user","content":"` + strings.Repeat("é", 100<<10) + `"}]`)
	for _, max := range []int{1, 5, 6, 7, 100, 3000} {
		got := PlainText(ctx, max)
		if len(got) > max || !strings.HasSuffix(got, "…") && max > 3 || !utf8.ValidString(got) {
			t.Errorf("PlainText(…, %d) is %d bytes, %q…", max, len(got), got[:min(len(got), 20)])
		}
	}
}

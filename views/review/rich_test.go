package review

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// tinyPNG is a 1×1 transparent PNG as a data URL.
var tinyPNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg=="

// jsonText is s as a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestRichViews renders each view and checks its markup, and that what a
// task may hold never becomes markup, a script, a link out of the public
// web, or an image loaded from elsewhere.
func TestRichViews(t *testing.T) {
	cases := []struct {
		name, context string
		want, not     []string
	}{
		{name: "ConversationEscapesItsMessages",
			context: `[{"role":"system","content":"Be brief."},{"role":"user","content":"<script>alert(1)</script>"},{"role":"assistant","content":[{"type":"text","text":"<img src=x onerror=alert(1)>"}]}]`,
			want: []string{`data-view="conversation"`, `data-role="user"`, "&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;",
				`data-testid="context-raw"`, "Show the raw JSON"},
			not: []string{"<script>", "<img"}},
		{name: "ConversationToolCallsAndImages",
			context: `[{"role":"user","content":[{"type":"text","text":"Is it broken?"},{"type":"image_url","image_url":{"url":"` + tinyPNG + `"}}]},` +
				`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"refund","arguments":"{\"order\":\"A1\"}"}}]}]`,
			want: []string{`data-view="conversation"`, `data-view="image"`, `<img src="` + tinyPNG + `"`, `data-view="tool-call"`, ">refund</code>",
				">call_1<", `<th scope="row">order</th>`}},
		{name: "ToolCall", context: `{"name":"issue_refund","arguments":{"order":"A1","amount":{"amount":"84.90","currency":"EUR"},"notify":true}}`,
			want: []string{`data-view="tool-call"`, ">issue_refund</code>", `<th scope="row">amount</th>`, `data-view="money"`, "84.90 <abbr>EUR</abbr>",
				`<span class="ctx-lit">true</span>`}},
		{name: "ToolCallArgumentsThatAreNotJSON", context: `{"name":"f","arguments":"{not json <b>"}`,
			want: []string{`data-view="tool-call"`, "{not json &lt;b&gt;"}, not: []string{"<b>"}},
		{name: "MarkdownWithoutRawHTMLOrScriptLinks",
			context: `{"type":"markdown","text":"# Refund\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n[click](javascript:alert(1)) <javascript:alert(2)> ` +
				`[data](data:text/html,hi) [rel](/v1/keys) [lan](http://10.0.0.1/admin) [ok](https://example.com/a \"t\") ![pic](https://tracker.example.com/p.png) ![local](http://127.0.0.1/x.png)\n\n*done*"}`,
			want: []string{`data-view="markdown"`, "<h1>Refund</h1>", "<em>done</em>", "raw HTML omitted", "<p>click javascript:alert(2) data rel lan <a",
				`<a href="https://example.com/a" rel="noopener noreferrer nofollow">ok</a>`,
				`<a href="https://tracker.example.com/p.png" rel="noopener noreferrer nofollow">image: pic</a>`, "image: local"},
			not: []string{"<script", "href=\"javascript:", "onerror", "<img", "10.0.0.1", "127.0.0.1", "data:text", `href="/v1`, `title=`}},
		{name: "MarkdownTaskListCheckBoxesAreNamed",
			context: `{"type":"markdown","text":"- [x] Call the *customer*\n- [ ] Say \"sorry\" & <b>refund</b>\n- [ ]\n"}`,
			want: []string{`<input type="checkbox" disabled="" checked="" aria-label="Call the customer"> Call the <em>customer</em>`,
				`<input type="checkbox" disabled="" aria-label="Say &quot;sorry&quot; &amp; refund"> Say`,
				`<input type="checkbox" disabled="" aria-label="Task">`},
			not: []string{`<input checked="" disabled="" type="checkbox">`, `<b>`}},
		{name: "ImageAtAPrivateAddressIsNotLinked", context: `{"type":"image","url":"http://169.254.169.254/latest/meta-data/"}`,
			want: []string{`data-view="image"`, "Image, not loaded", "private address, not linked"},
			not:  []string{"<img", `href="http://169.254`}},
		{name: "ImageElsewhereIsALinkWithAWarning", context: `{"type":"image","url":"https://cdn.example.com/p.png"}`,
			want: []string{`data-view="image"`, `href="https://cdn.example.com/p.png" rel="noopener noreferrer nofollow" target="_blank"`,
				"Opening it tells cdn.example.com that you looked."},
			not: []string{"<img"}},
		{name: "OversizedDataURLIsNotShown", context: jsonText("data:image/png;base64," + strings.Repeat("iVBO", 33<<10)),
			want: []string{`data-view="image"`, "Image not shown", "132 KiB, over the limit of 128 KiB"}, not: []string{"<img"}},
		{name: "SVGDataURLIsNotShown", context: jsonText("data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString([]byte(`<svg onload="alert(1)"/>`))),
			want: []string{`data-view="image"`, "image/svg+xml is not shown"}, not: []string{"<img", "<svg"}},
		{name: "DataURLShown", context: `{"photo":` + jsonText(tinyPNG) + `}`,
			want: []string{`<span class="ctx-key">photo</span>`, `data-view="image"`, `<img src="` + tinyPNG + `" alt="An image from the task's context"`, "PNG image, 67 bytes"}},
		{name: "Diff", context: jsonText("--- a/x.go\n+++ b/x.go\n@@ -1,2 +1,2 @@\n ctx <b>\n-old\n+new\n"),
			want: []string{`data-view="diff" tabindex="0" role="region" aria-label="Diff: 1 line added, 1 line deleted"`, "+1 −1", `<span class="diff-hunk">@@ -1,2 +1,2 @@</span>`, `<span class="diff-ctx"> ctx &lt;b&gt;</span>`,
				`<span class="diff-del">-old</span>`, `<span class="diff-add">+new</span>`}},
		{name: "LongDiffFolds", context: jsonText("--- a\n+++ b\n@@ -1,100 +1,100 @@\n" + strings.Repeat(" x\n", 100)),
			want: []string{"show 23 more lines"}},
		{name: "LinkDateMoney", context: `{"url":"https://shop.example.com/o/A1","js":"javascript:alert(1)","at":"2026-11-26T19:10:52Z","paid_at":1764184252,"total":{"amount":12,"currency":"USD"}}`,
			want: []string{`<a class="rv-link" data-view="link" href="https://shop.example.com/o/A1" rel="noopener noreferrer nofollow" target="_blank">`,
				`<span class="ctx-str">javascript:alert(1)</span>`,
				`<time class="rv-date" data-view="date" datetime="2026-11-26T19:10:52Z">2026-11-26 19:10:52 UTC`,
				`datetime="2025-11-26T19:10:52Z">2025-11-26 19:10:52 UTC <span class="ctx-meta">(1764184252)</span>`, "12 <abbr>USD</abbr>"},
			not: []string{`href="javascript`}},
		{name: "PrivateLinkIsText", context: `{"admin":"http://localhost:8080/admin"}`,
			want: []string{`data-view="link"`, "private address, not linked"}, not: []string{`href="http://localhost`}},
		{name: "NearMissesStayATree", context: `{"who":[{"role":"admin","content":"x"}],"call":{"name":"Al","arguments":"none"},"cost":{"amount":1,"currency":"usd"}}`,
			not: []string{"data-view", "context-raw"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			html := renderContext(t, tc.context)
			for _, want := range tc.want {
				if !strings.Contains(html, want) {
					t.Errorf("the context lacks %q:\n%.4000s", want, html)
				}
			}
			// The raw JSON, escaped, holds the task's text as it is.
			views, _, _ := strings.Cut(html, `<details class="mt-2" data-testid="context-raw"`)
			for _, not := range tc.not {
				if strings.Contains(views, not) {
					t.Errorf("the context has %q:\n%.4000s", not, html)
				}
			}
		})
	}
}

// TestRichViews_ConversationCountsAreTrue: a conversation longer than the
// tree holds says how many messages it has beyond those shown.
func TestRichViews_ConversationCountsAreTrue(t *testing.T) {
	msgs := make([]string, 1200)
	for i := range msgs {
		msgs[i] = `{"role":"user","content":"m` + strconv.Itoa(i) + `"}`
	}
	html := renderContext(t, "["+strings.Join(msgs, ",")+"]")
	if !strings.Contains(html, "show 641 more messages") || !strings.Contains(html, "534 more messages, too many to show here") {
		t.Errorf("the conversation does not count its messages:\n%.2000s", html[len(html)-2000:])
	}
}

// TestRichViews_DisplayHint: the members a task's display hint names show
// first, with the view it asks for.
func TestRichViews_DisplayHint(t *testing.T) {
	task := &arbiter.Task{Context: json.RawMessage(`{"order":"A1","notes":"# Why\n\n<b>late</b>"}`),
		Display: &arbiter.Display{Fields: []arbiter.DisplayField{{Field: "notes", View: "markdown"}}}}
	var buf bytes.Buffer
	if err := Context(task).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	notes, order := strings.Index(html, `<span class="ctx-key">notes</span>`), strings.Index(html, `<span class="ctx-key">order</span>`)
	if notes < 0 || order < notes || !strings.Contains(html, `data-view="markdown"><h1>Why</h1>`) || strings.Contains(html, "<b>") {
		t.Errorf("the hinted notes are not first, or not Markdown:\n%s", html)
	}
}

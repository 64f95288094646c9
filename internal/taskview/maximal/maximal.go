// Package maximal holds the contexts of the largest size the API accepts,
// in the shapes that cost the reviewer's page the most, and the bounds the
// page keeps for any of them: the views' tests assert the bounds
// (views/review) and the bench measures the render (cmd/arbiter-bench).
package maximal

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/taskview"
)

// The bounds of the reviewer's task page for any context the API accepts:
// the page's size and what one render allocates. json.Indent made a 200
// MB page with 1.4 GB.
const (
	MaxPageBytes  = 2 << 20
	MaxAllocBytes = 16 << 20
)

// tinyPNG is a 1×1 transparent PNG as a data URL.
const tinyPNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg=="

// jsonText is s as a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// fill pads a context made of open and close around a string to exactly
// arbiter.MaxContextBytes.
func fill(open, close string) string {
	return open + `"` + strings.Repeat("x", arbiter.MaxContextBytes-len(open)-len(close)-2) + `"` + close
}

// RepeatTo repeats item, separated by commas, inside open and close, to at
// most arbiter.MaxContextBytes.
func RepeatTo(open, item, close string) string {
	n := (arbiter.MaxContextBytes - len(open) - len(close) + 1) / (len(item) + 1)
	return open + strings.Repeat(item+",", n-1) + item + close
}

// Contexts are contexts of the largest size the API accepts, in the
// shapes that cost a naive renderer the most. Some are deeper than the API
// accepts today, as tasks created before the limit can be.
var Contexts = map[string]string{
	"ArraysNested9999Deep":  fill(strings.Repeat("[", 9999), strings.Repeat("]", 9999)),
	"ObjectsNested9999Deep": fill(strings.Repeat(`{"a":`, 9999), strings.Repeat("}", 9999)),
	"ArraysNested64Deep":    fill(strings.Repeat("[", 64), strings.Repeat("]", 64)),
	"WideArrayOfNumbers":    RepeatTo("[", "0", "]"),
	"WideArrayOfObjects":    RepeatTo("[", "{}", "]"),
	"ManyShortStrings":      RepeatTo(`{"k":[`, `"ab"`, `]}`),
	"ManyMembers":           RepeatTo(`{`, `"k":1`, `}`),
	"OneLongLine":           fill("", ""),
	"OneStringToEscape":     `"` + strings.Repeat(`<&\"`, (arbiter.MaxContextBytes-2)/4) + `"`,
	"ManyLines":             `"` + strings.Repeat(`\n`, (arbiter.MaxContextBytes-2)/2) + `"`,
	"LongKey":               `{"` + strings.Repeat("k", arbiter.MaxContextBytes-8) + `":1}`,
	"WideAndDeep":           RepeatTo("[", strings.Repeat("[", 60)+"1"+strings.Repeat("]", 60), "]"),

	// The views' largest shapes (see rich.templ).
	"ConversationManyMessages":   RepeatTo("[", `{"role":"user","content":"<&\""}`, "]"),
	"ConversationOneLongMessage": fill(`[{"role":"user","content":`, `}]`),
	"ConversationEscapedMessage": `[{"role":"user","content":"` + strings.Repeat(`<&\"`, (arbiter.MaxContextBytes-40)/4) + `"}]`,
	"ConversationManyLines":      `[{"role":"user","content":"` + strings.Repeat(`\n`, (arbiter.MaxContextBytes-40)/2) + `"}]`,
	"ManyToolCalls":              RepeatTo("[", `{"name":"f","arguments":"{\"a\":[1,2,3]}"}`, "]"),
	"ToolCallWideArguments":      `{"name":"f","arguments":"{\"a\":[` + strings.Repeat(`1,`, (arbiter.MaxContextBytes-60)/2) + `1]}"}`,
	"ManyImages":                 RepeatTo("[", jsonText(tinyPNG), "]"),
	"TwoLargestImages":           "[" + largestPNG + "," + largestPNG + "]",
	"ManyImageLinks":             RepeatTo("[", `{"type":"image","url":"https://cdn.example.com/p.png"}`, "]"),
	"OneLongDiff":                jsonText(longDiff((arbiter.MaxContextBytes - 40) / 4)),
	"ManyDiffs":                  RepeatTo("[", jsonText("--- a\n+++ b\n@@ -1 +1 @@\n-<\n+&\n"), "]"),
	"LongestMarkdown":            `{"type":"markdown","text":` + jsonText(strings.Repeat("word ", taskview.MaxMarkdownBytes/5)) + `}`,
	"BusiestMarkdown":            `{"type":"markdown","text":` + jsonText(strings.Repeat("<http://a.com>", taskview.MaxMarkdownMarks)) + `}`,
	"MarkdownHeadings":           `{"type":"markdown","text":` + jsonText(strings.Repeat("a\n-\n", taskview.MaxMarkdownMarks/2-1)) + `}`,
	"MarkdownNesting":            `{"type":"markdown","text":` + jsonText(strings.Repeat("> - > - > - > - x\n", taskview.MaxMarkdownMarks/9)) + `}`,
	"ManyMarkdowns":              RepeatTo("[", `{"type":"markdown","text":"**<b>** [x](https://e.com)"}`, "]"),
	"ManyLinks":                  RepeatTo("[", `"https://e.com/?a=1&b=2"`, "]"),
	"ManyDates":                  RepeatTo("[", `"2026-11-26T19:10:52Z"`, "]"),
	"ManyAmounts":                RepeatTo("[", `{"amount":1,"currency":"EUR"}`, "]"),
}

// Views are the views the maximal contexts of the views' shapes
// must show: each is rendered with its view, not left to the tree.
var Views = map[string]string{
	"ConversationManyMessages": "conversation", "ConversationOneLongMessage": "conversation",
	"ConversationEscapedMessage": "conversation", "ConversationManyLines": "conversation",
	"ManyToolCalls": "tool-call", "ToolCallWideArguments": "tool-call", "ManyImages": "image",
	"TwoLargestImages": "image", "ManyImageLinks": "image", "OneLongDiff": "diff", "ManyDiffs": "diff",
	"LongestMarkdown": "markdown", "BusiestMarkdown": "markdown", "MarkdownHeadings": "markdown",
	"MarkdownNesting": "markdown", "ManyMarkdowns": "markdown", "ManyLinks": "link", "ManyDates": "date",
	"ManyAmounts": "money",
}

// largestPNG is a data URL of a PNG within taskview.MaxDataURLBytes, as a
// JSON string.
var largestPNG = func() string {
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(tinyPNG, "data:image/png;base64,"))
	raw = append(raw, make([]byte, (taskview.MaxDataURLBytes-64)/4*3-len(raw))...)
	return jsonText("data:image/png;base64," + base64.StdEncoding.EncodeToString(raw))
}()

// longDiff is a unified diff of n added lines.
func longDiff(n int) string {
	return "--- a\n+++ b\n@@ -0,0 +1," + strconv.Itoa(n) + " @@\n" + strings.Repeat("+x\n", n)
}

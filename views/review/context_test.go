package review

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/taskview"
	"github.com/arbiterhq/arbiter/internal/taskview/maximal"
	"github.com/arbiterhq/arbiter/views/layouts"
)

// TestTaskPage_BoundedForAnyContext renders the desk for maximal contexts of
// every costly shape, the views' shapes too, and checks the page's size and
// the memory the render allocates, by size: the page is under 2 MiB and the
// render allocates under 16 MiB, where json.Indent made a 200 MB page with
// 1.4 GB.
func TestTaskPage_BoundedForAnyContext(t *testing.T) {
	const maxPage, maxAlloc = maximal.MaxPageBytes, maximal.MaxAllocBytes
	for name, ctx := range maximal.Contexts {
		t.Run(name, func(t *testing.T) {
			if len(ctx) > arbiter.MaxContextBytes || !json.Valid([]byte(ctx)) {
				t.Fatalf("the context is %d bytes, valid %v", len(ctx), json.Valid([]byte(ctx)))
			}
			task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusHumanNeeded, Prompt: "Decide.",
				AllowedVerdicts: []string{"approve", "reject"}, Context: json.RawMessage(ctx)}
			page := TaskPage(layouts.Page{Title: "Review"}, TaskView{Task: task, Action: "/review/tasks/" + task.ID, Now: time.Now()})

			var buf bytes.Buffer
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if err := page.Render(context.Background(), &buf); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("page %d KiB, allocated %d KiB", buf.Len()>>10, allocated>>10)
			if buf.Len() > maxPage {
				t.Errorf("the page is %d bytes, over %d", buf.Len(), maxPage)
			}
			if allocated > maxAlloc {
				t.Errorf("rendering allocated %d bytes, over %d", allocated, maxAlloc)
			}
			if view, ok := maximal.Views[name]; ok && !strings.Contains(buf.String(), `data-view="`+view+`"`) {
				t.Errorf("the page lacks the %s view", view)
			}
			if !strings.Contains(buf.String(), `data-testid="verdict-form"`) {
				t.Error("the page lacks the verdict form")
			}
		})
	}
}

// renderContext renders the context box of a task with ctx.
func renderContext(t *testing.T, ctx string) string {
	t.Helper()
	c := contextOf(&arbiter.Task{Context: json.RawMessage(ctx)})
	if c == nil {
		return ""
	}
	var buf bytes.Buffer
	if err := contextTree(c).Render(context.Background(), &buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestContextTree(t *testing.T) {
	items := func(n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = `"item` + strconv.Itoa(i) + `"`
		}
		return "[" + strings.Join(s, ",") + "]"
	}
	cases := []struct {
		name, context string
		want, not     []string
	}{
		{name: "None", context: "null", not: []string{"ctx"}},
		{name: "Members", context: `{"amount":{"value":"84.90","n":12,"ok":true,"gone":null},"tags":[],"meta":{}}`,
			want: []string{`<span class="ctx-key">amount</span>`, `<span class="ctx-meta">{4 keys}</span>`,
				`<span class="ctx-str">84.90</span>`, `<span class="ctx-num">12</span>`, `<span class="ctx-lit">true</span>`,
				`<span class="ctx-lit">null</span>`, `<span class="ctx-meta">[]</span>`, `<span class="ctx-meta">{}</span>`},
			not: []string{"context-raw", "show "}},
		{name: "BigNumbersKeepTheirDigits", context: `[12345678901234567890123,1e400,-0.5]`,
			want: []string{">12345678901234567890123<", ">1e400<", ">-0.5<"}},
		{name: "ScalarAtTheTop", context: `"just text"`, want: []string{`<span class="ctx-str">just text</span>`}},
		{name: "MultiLineStringsKeepTheirBreaks", context: `{"diff":"--- a/x.go\n+++ b/x.go\n-\told\n+\tnew"}`,
			want: []string{"<span class=\"ctx-text\">--- a/x.go\n+++ b/x.go\n-\told\n+\tnew</span>"}},
		{name: "BigArraysFold", context: items(30),
			want: []string{">item24<", "show 5 more items", ">item29<"}},
		{name: "BigObjectsFold", context: `{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6,"g":7,"h":8,"i":9,"j":10,"k":11,"l":12,"m":13,
			"n":14,"o":15,"p":16,"q":17,"r":18,"s":19,"t":20,"u":21,"v":22,"w":23,"x":24,"y":25,"z":26}`,
			want: []string{"show 1 more key", `<span class="ctx-key">z</span>`}},
		{name: "LongStringsFold", context: `"` + strings.Repeat("é", 700) + `"`,
			want: []string{strings.Repeat("é", 600) + "</span>", "show 100 more characters"}},
		{name: "ManyLinesFold", context: `"` + strings.Repeat(`line\n`, 20) + `"`,
			want: []string{strings.Repeat("line\n", 12) + "</span>", "show 40 more characters"}},
		{name: "TooDeepIsElided", context: strings.Repeat(`{"a":`, 70) + `"bottom"` + strings.Repeat("}", 70),
			want: []string{">…<", `data-testid="context-raw"`, "nested too deep", "bottom"}},
		{name: "PastTheBudgetIsInTheRawJSON", context: maximal.RepeatTo("[", "7", "]"),
			want: []string{`data-testid="context-raw"`, "too big to show as a tree"}},
		{name: "NotJSONIsShownRaw", context: `{"broken":`, want: []string{`data-testid="context-raw"`, "Raw context", "{&#34;broken&#34;:"}},
		{name: "MarkupIsText", context: `{"<b>":"<script>alert(1)</script>"}`,
			want: []string{"&lt;b&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;"}, not: []string{"<script>", "<b>"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			html := renderContext(t, tc.context)
			for _, want := range tc.want {
				if !strings.Contains(html, want) {
					t.Errorf("the tree lacks %q:\n%.3000s", want, html)
				}
			}
			for _, not := range tc.not {
				if strings.Contains(html, not) {
					t.Errorf("the tree has %q:\n%.3000s", not, html)
				}
			}
		})
	}
}

func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 items", 1: "1 item", 999: "999 items", 1000: "1,000 items", 115400: "115,400 items", 1234567: "1,234,567 items"} {
		if got := plural(n, "item"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestContextTree_NodeBudget(t *testing.T) {
	c := contextOf(&arbiter.Task{Context: json.RawMessage(maximal.RepeatTo("[", "[1,2]", "]"))})
	nodes := 0
	var count func(n *taskview.Node)
	count = func(n *taskview.Node) {
		nodes++
		for _, c := range append(n.Items, n.Folded...) {
			count(c)
		}
	}
	count(c.Root)
	if nodes > taskview.MaxNodes || !c.Incomplete || c.RawCut {
		t.Errorf("the tree holds %d values (at most %d), incomplete %v, raw cut %v", nodes, taskview.MaxNodes, c.Incomplete, c.RawCut)
	}
}

// wideOrders is a context whose array of orders holds more values than
// the tree keeps: n orders of ten members each, then a last member.
// Every third value is a string that holds JSON's punctuation.
func wideOrders(n int) string {
	orders := make([]string, n)
	for i := range orders {
		fields := make([]string, 10)
		for j := range fields {
			fields[j] = `"f` + strconv.Itoa(j) + `":` + strconv.Itoa(i*10+j)
			if j%3 == 0 {
				fields[j] = `"f,]` + strconv.Itoa(j) + `":"a, ] } \" [ { \\"`
			}
		}
		orders[i] = "{" + strings.Join(fields, ",") + "}"
	}
	return `{"orders":[` + strings.Join(orders, ",") + `],"note":"last"}`
}

// TestContext_CountsAreTrue: an array of 300 orders, of which the tree
// keeps fewer than 300 (its budget is 2,000 values), is labelled with its
// real length, says how many it leaves out, and its object's members past
// the budget are counted too.
func TestContext_CountsAreTrue(t *testing.T) {
	task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusHumanNeeded, Prompt: "Decide.",
		AllowedVerdicts: []string{"approve", "reject"}, Context: json.RawMessage(wideOrders(300))}
	c := contextOf(task)
	orders := c.Root.Items[0]
	if orders.Count != 300 || orders.Label() != "[300 items]" || !c.Incomplete {
		t.Fatalf("the orders are labelled %q (count %d, %d kept), incomplete %v", orders.Label(), orders.Count,
			len(orders.Items)+len(orders.Folded), c.Incomplete)
	}
	if kept := len(orders.Items) + len(orders.Folded); kept >= 300 || orders.Omitted() != 300-kept {
		t.Fatalf("the tree keeps %d orders and leaves out %d", kept, orders.Omitted())
	}
	if !json.Valid([]byte(wideOrders(3))) {
		t.Fatalf("not JSON: %s", wideOrders(3))
	}
	if c.Root.Count != 2 || c.Root.Label() != "{2 keys}" {
		t.Errorf("the root is labelled %q", c.Root.Label())
	}
	var page bytes.Buffer
	if err := Context(task).Render(context.Background(), &page); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	want := plural(orders.Omitted(), "more item") + ", too many to show here: see the raw JSON"
	if !strings.Contains(html, "[300 items]") || !strings.Contains(html, want) {
		t.Errorf("the page lacks [300 items] or %q", want)
	}
}

// BenchmarkTaskPage_MaximalContexts renders the desk's task page for each
// maximal context, reporting the time, bytes and allocations of a render
// and the page's size (page-B); the bounds are maximal.MaxPageBytes and
// maximal.MaxAllocBytes (make bench prints them beside the figures).
func BenchmarkTaskPage_MaximalContexts(b *testing.B) {
	names := slices.Sorted(maps.Keys(maximal.Contexts))
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			task := &arbiter.Task{ID: "tsk_0123456789abcdef", Status: arbiter.StatusHumanNeeded, Prompt: "Decide.",
				AllowedVerdicts: []string{"approve", "reject"}, Context: json.RawMessage(maximal.Contexts[name])}
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				buf.Reset()
				page := TaskPage(layouts.Page{Title: "Review"}, TaskView{Task: task, Action: "/review/tasks/" + task.ID, Now: time.Now()})
				if err := page.Render(context.Background(), &buf); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "page-B")
		})
	}
}

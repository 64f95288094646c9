package taskview

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/arbiterhq/arbiter"
)

// png is the smallest PNG: a 1×1 transparent pixel.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89" +
	"\x00\x00\x00\rIDATx\x9cc\x00\x01\x00\x00\x05\x00\x01\r\n-\xb4\x00\x00\x00\x00IEND\xaeB`\x82")

// pngURL is png as a data URL.
var pngURL = "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)

// quote is s as a JSON string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

const unifiedDiff = "diff --git a/x.go b/x.go\nindex 1..2 100644\n--- a/x.go\n+++ b/x.go\n@@ -1,3 +1,3 @@\n package x\n-var a = 1\n+var a = 2\n \n@@ -10 +10,2 @@ func f()\n-\told()\n+\tnew()\n+\tnewer()\n"

// TestRecognize lists which view a value gets, with the near misses that
// stay in the tree.
func TestRecognize(t *testing.T) {
	cases := []struct {
		name, value string
		want        ViewKind // "" for the tree
	}{
		{"ConversationWithStringContent", `[{"role":"system","content":"Be brief."},{"role":"user","content":"Refund?"}]`, ViewConversation},
		{"ConversationWithParts", `[{"role":"user","content":[{"type":"text","text":"Look"},{"type":"image_url","image_url":{"url":"https://cdn.example.com/p.png"}}]}]`, ViewConversation},
		{"ConversationWithToolCalls", `[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"refund","arguments":"{\"order\":\"A1\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]`, ViewConversation},
		{"ConversationAnthropicBlocks", `[{"role":"assistant","content":[{"type":"text","text":"Sure"},{"type":"tool_use","id":"t1","name":"refund","input":{"order":"A1"}}]}]`, ViewConversation},
		{"NearMiss/RoleNotAChatRole", `[{"role":"admin","content":"full access"}]`, ""},
		{"NearMiss/MessageWithoutContent", `[{"role":"user"}]`, ""},
		{"NearMiss/ContentANumber", `[{"role":"user","content":5}]`, ""},
		{"NearMiss/OneItemNotAMessage", `[{"role":"user","content":"hi"},"and text"]`, ""},
		{"NearMiss/EmptyArray", `[]`, ""},
		{"ToolCallNameArguments", `{"name":"issue_refund","arguments":{"order":"A1","amount":84.9}}`, ViewToolCall},
		{"ToolCallArgumentsAsJSONText", `{"name":"issue_refund","arguments":"{\"order\":\"A1\"}"}`, ViewToolCall},
		{"ToolCallToolInput", `{"tool":"send_email","input":{"to":"a@example.com"}}`, ViewToolCall},
		{"ToolCallOpenAIFunction", `{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}`, ViewToolCall},
		{"NearMiss/ToolCallWithOtherKeys", `{"name":"Alice","arguments":{},"age":31}`, ""},
		{"NearMiss/ArgumentsNotAnObject", `{"name":"Alice","arguments":"none"}`, ""},
		{"NearMiss/ArgumentsANumber", `{"tool":"x","input":5}`, ""},
		{"NearMiss/NameWithoutArguments", `{"name":"Alice"}`, ""},
		{"NearMiss/EmptyName", `{"name":" ","arguments":{}}`, ""},
		{"ImageDataURL", quote(pngURL), ViewImage},
		{"ImageTypeURL", `{"type":"image","url":"https://cdn.example.com/p.png"}`, ViewImage},
		{"ImageURLObject", `{"image_url":{"url":"https://cdn.example.com/p.png","detail":"low"}}`, ViewImage},
		{"ImageAnthropicSource", `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + base64.StdEncoding.EncodeToString(png) + `"}}`, ViewImage},
		{"ImageOversizedDataURLIsNamed", quote("data:image/png;base64," + strings.Repeat("A", MaxDataURLBytes)), ViewImage},
		{"NearMiss/DataURLNotAnImage", quote("data:text/html;base64,PHNjcmlwdD4="), ""},
		{"NearMiss/ImageWithOtherKeys", `{"type":"image","url":"https://x.example.com/p.png","owner":"me"}`, ""},
		{"Diff", quote(unifiedDiff), ViewDiff},
		{"DiffWithoutGitHeader", quote("--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y"), ViewDiff},
		{"NearMiss/DiffWithoutHunk", quote("--- a/x.go\n+++ b/x.go\n-\told\n+\tnew"), ""},
		{"DiffHunkShorterThanItsHeader", quote("--- a\n+++ b\n@@ -1,7 +1,7 @@\n-x\n+y\n z"), ViewDiff},
		{"NearMiss/DiffHunkLongerThanItsHeader", quote("--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\n z"), ""},
		{"NearMiss/DiffTextAfterAHunk", quote("--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y\nThanks, merged."), ""},
		{"NearMiss/DiffStrayLineInHunk", quote("--- a\n+++ b\n@@ -1,2 +1,2 @@\n-x\nhello\n+y\n z"), ""},
		{"NearMiss/MarkdownRulesAreNotADiff", quote("Title\n---\ntext\n+++ more\n@@ -1 +1 @@"), ""},
		{"Markdown", `{"type":"markdown","text":"# Title\n\n*Hi*"}`, ViewMarkdown},
		{"NearMiss/MarkdownWithOtherKeys", `{"type":"markdown","text":"# T","by":"me"}`, ""},
		{"NearMiss/MarkdownTooLong", `{"type":"markdown","text":"` + strings.Repeat("a", MaxMarkdownBytes+1) + `"}`, ""},
		{"Link", `"https://shop.example.com/orders/A1?x=1"`, ViewLink},
		{"LinkToAPrivateAddressIsMarked", `"http://10.0.0.8/admin"`, ViewLink},
		{"NearMiss/JavaScriptIsNoLink", `"javascript:alert(1)"`, ""},
		{"NearMiss/TextAroundAURL", `"see https://example.com"`, ""},
		{"NearMiss/URLWithCredentials", `"https://user:pw@example.com/"`, ""},
		{"DateRFC3339", `"2026-11-26T19:10:52Z"`, ViewDate},
		{"DateRFC3339WithOffset", `"2026-11-26T19:10:52.123+01:00"`, ViewDate},
		{"DateEpochSecondsByKey", `{"created_at":1764184252}`, ""}, // the object stays a tree; its member is a date (below)
		{"NearMiss/DateOnly", `"2026-11-26"`, ""},
		{"NearMiss/MonthThirteen", `"2026-13-26T19:10:52Z"`, ""},
		{"Money", `{"amount":84.90,"currency":"EUR"}`, ViewMoney},
		{"MoneyAsString", `{"amount":"1200.50","currency":"USD"}`, ViewMoney},
		{"NearMiss/MoneyLowercaseCode", `{"amount":8490,"currency":"eur"}`, ""},
		{"NearMiss/MoneyWordsAmount", `{"amount":"lots","currency":"USD"}`, ""},
		{"NearMiss/MoneyWithOtherKeys", `{"amount":1,"currency":"USD","fee":2}`, ""},
		{"NearMiss/PlainText", `"approve the refund"`, ""},
		{"NearMiss/PlainNumber", `1764184252`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Parse(json.RawMessage(tc.value), nil)
			var got ViewKind
			if c.Root.View != nil {
				got = c.Root.View.Kind
			}
			if got != tc.want {
				t.Errorf("%.120s gets view %q, want %q", tc.value, got, tc.want)
			}
			if c.Views != (got != "") && c.Root.Kind != Object {
				t.Errorf("Views is %v", c.Views)
			}
		})
	}
}

// TestRecognize_Members covers views that depend on the member's name:
// epoch dates and image_url strings.
func TestRecognize_Members(t *testing.T) {
	cases := []struct {
		name, value string
		want        ViewKind
	}{
		{"EpochSeconds", `{"created_at":1764184252}`, ViewDate},
		{"EpochMilliseconds", `{"paidAt":1764184252123}`, ViewDate},
		{"EpochTimestamp", `{"timestamp":1764184252}`, ViewDate},
		{"NearMiss/EpochUnderAnotherName", `{"amount":1764184252}`, ""},
		{"NearMiss/EpochOutOfRange", `{"created_at":17}`, ""},
		{"NearMiss/EpochFraction", `{"created_at":1764184252.5}`, ""},
		{"ImageURLMember", `{"image_url":"https://cdn.example.com/p.png","caption":"x"}`, ViewImage},
		{"NearMiss/URLUnderAnotherName", `{"photo":"ftp://cdn.example.com/p.png"}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Parse(json.RawMessage(tc.value), nil)
			var got ViewKind
			if v := c.Root.Items[0].View; v != nil {
				got = v.Kind
			}
			if got != tc.want || c.Root.View != nil {
				t.Errorf("%s: the member gets view %q, want %q (the object %v)", tc.value, got, tc.want, c.Root.View)
			}
		})
	}
}

func TestRecognize_Details(t *testing.T) {
	t.Run("ToolCallArgumentsAreATree", func(t *testing.T) {
		v := Parse(json.RawMessage(`{"name":"refund","arguments":"{\"order\":\"A1\",\"lines\":[1,2]}"}`), nil).Root.View
		if v.Tool.Name != "refund" || v.Tool.Args == nil || v.Tool.Args.Count != 2 || v.Tool.Args.Member("lines").Count != 2 {
			t.Errorf("the tool call is %+v", v.Tool)
		}
	})
	t.Run("DataURLShownWhenItIsWhatItSays", func(t *testing.T) {
		img := Parse(json.RawMessage(quote(pngURL)), nil).Root.View.Image
		if img.DataURL != pngURL || img.Bytes != len(png) || img.Refused != "" {
			t.Errorf("the image is %+v", img)
		}
	})
	for name, url := range map[string]string{
		"Oversized":   "data:image/png;base64," + strings.Repeat("A", MaxDataURLBytes),
		"SVG":         "data:image/svg+xml;base64," + base64.StdEncoding.EncodeToString([]byte("<svg onload='alert(1)'/>")),
		"NotBase64":   "data:image/png,%89PNG",
		"BadBase64":   "data:image/png;base64,***",
		"HTMLAsPNG":   "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("<html><script>alert(1)</script>")),
		"JPEGCalledP": "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(png),
	} {
		t.Run("DataURLRefused/"+name, func(t *testing.T) {
			img := Parse(json.RawMessage(quote(url)), nil).Root.View.Image
			if img.DataURL != "" || img.Refused == "" {
				t.Errorf("the image is shown (%q) or not refused (%q)", img.DataURL, img.Refused)
			}
		})
	}
	for host, private := range map[string]bool{"10.0.0.8": true, "127.0.0.1": true, "[::1]": true, "169.254.169.254": true,
		"localhost": true, "db.internal": true, "printer.local": true, "intranet": true, "cdn.example.com": false, "93.184.215.14": false,
		// Hosts a browser reads as private addresses (the WHATWG URL
		// standard's IPv4 forms, IDNA mapping, trailing dots).
		"127.1": true, "0x7f.1": true, "0X7F.0.0.1": true, "10.1": true, "2130706433": true, "0177.0.0.1": true,
		"017700000001": true, "0x7f000001": true, "127.0.0.1.": true, "127.1.": true, "localhost.": true,
		"169.254.43518": true, "0xa9.0xfe.0xa9.0xfe": true, "192.168.0x1.1": true, "１２７.０.０.１": true, "ＬＯＣＡＬＨＯＳＴ": true,
		"db.internal.": true, "[::ffff:127.0.0.1]": true, "[::ffff:7f00:1]": true,
		// Numbers a browser refuses are not linked either.
		"256.0.0.1": true, "1.2.3.4.5": true, "127.0.0.09": true, "0x100000000": true, "99999999999999999999999": true,
		// Public, however written; names that merely hold digits are names.
		"93.184.215.14.": false, "0x5d.0xb8.0xd7.0x0e": false, "1572394766": false, "1e100.net": false,
		"example.com.": false, "123.example.com": false, "cdn.example.com.": false} {
		t.Run("Private/"+host, func(t *testing.T) {
			img := Parse(json.RawMessage(`{"type":"image","url":"http://`+host+`/p.png"}`), nil).Root.View.Image
			if img.DataURL != "" || img.URL == nil || img.URL.Private != private {
				t.Errorf("the image is %+v, %+v; want private %v", img, img.URL, private)
			}
		})
	}
	t.Run("DiffLinesAndCounts", func(t *testing.T) {
		d := Parse(json.RawMessage(quote(unifiedDiff)), nil).Root.View.Diff
		kinds := map[DiffLineKind]int{}
		for _, l := range d.Lines {
			kinds[l.Kind]++
		}
		if d.Added != 3 || d.Deleted != 2 || kinds[DiffHunk] != 2 || kinds[DiffAdded] != 3 || kinds[DiffHeader] != 4 || d.Rest != "" {
			t.Errorf("the diff has +%d -%d, lines %v, rest %q", d.Added, d.Deleted, kinds, d.Rest)
		}
	})
	t.Run("DiffLinesPastTheBudgetArePlain", func(t *testing.T) {
		n := MaxDiffLines + 100
		diff := "--- a\n+++ b\n@@ -1," + itoa(n) + " +1," + itoa(n) + " @@\n" + strings.Repeat(" same\n", n)
		d := Parse(json.RawMessage(quote(diff)), nil).Root.View.Diff
		if len(d.Lines) != MaxDiffLines || !strings.HasPrefix(d.Rest, " same\n") || strings.Count(d.Rest, "\n") != n+3-MaxDiffLines {
			t.Errorf("the diff marks %d lines, its rest has %d", len(d.Lines), strings.Count(d.Rest, "\n"))
		}
	})
	t.Run("ConversationCountsAreTrue", func(t *testing.T) {
		msgs := make([]string, 1500)
		for i := range msgs {
			msgs[i] = `{"role":"user","content":"m"}`
		}
		c := Parse(json.RawMessage("["+strings.Join(msgs, ",")+"]"), nil)
		v := c.Root.View
		if v == nil || len(v.Messages)+v.MessagesOmitted != 1500 || v.MessagesOmitted == 0 || !c.Incomplete {
			t.Fatalf("the conversation is %+v", v)
		}
	})
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestParse_Display: the members a display hint names come first, in its
// order, even from past the shown ones, and get the view it asks for when
// they fit it; "text" and "tree" keep a value out of its view.
func TestParse_Display(t *testing.T) {
	members := []string{}
	for i := range 30 {
		members = append(members, `"m`+itoa(i)+`":`+itoa(i))
	}
	ctx := `{` + strings.Join(members, ",") + `,"notes":"# Title\n\n*x*","when":1700000000,"site":"https://e.com","money":{"amount":1,"currency":"EUR"},"plain":"--- a\n+++ b\n@@ -1 +1 @@\n-x\n+y"}`
	display := &arbiter.Display{Fields: []arbiter.DisplayField{{Field: "notes", View: "markdown"}, {Field: "when", View: "date"},
		{Field: "site", View: "text"}, {Field: "m29"}, {Field: "money", View: "tree"}, {Field: "m0", View: "diff"}, {Field: "plain", View: "money"}}}
	c := Parse(json.RawMessage(ctx), display)
	var order []string
	for _, n := range c.Root.Items[:7] {
		kind := ViewKind("")
		if n.View != nil {
			kind = n.View.Kind
		}
		order = append(order, n.Key+"="+string(kind))
	}
	// A string is no money: plain keeps the diff view the conventions
	// give it; m0, a number, is no diff and stays a number.
	want := "notes=markdown when=date site= m29= money= m0= plain=diff"
	if got := strings.Join(order, " "); got != want {
		t.Errorf("the members read %s, want %s", got, want)
	}
	if len(c.Root.Items) != ShownItems || len(c.Root.Items)+len(c.Root.Folded) != 35 || c.Root.Count != 35 {
		t.Errorf("the object shows %d and folds %d of %d", len(c.Root.Items), len(c.Root.Folded), c.Root.Count)
	}
	// Without the hint, the same members get their conventional views.
	plain := Parse(json.RawMessage(ctx), nil)
	if v := plain.Root.Member("site").View; v == nil || v.Kind != ViewLink {
		t.Errorf("without a hint the site is %+v", v)
	}
	if v := plain.Root.Member("notes").View; v != nil {
		t.Errorf("without a hint the notes are %+v", v)
	}
}

func TestActionCall(t *testing.T) {
	c := ActionCall("issue_refund", json.RawMessage(`{"amount":120,"note":"late"}`))
	if c.Name != "issue_refund" || c.Args == nil || c.Args.Count != 2 || c.Args.Member("amount").Text != "120" {
		t.Errorf("ActionCall = %+v", c)
	}
	if c := ActionCall("t", json.RawMessage(`[1]`)); c.Args != nil || c.ArgsText != "[1]" {
		t.Errorf("ActionCall of an array = %+v", c)
	}
}

package taskview

import (
	"encoding/base64"
	"errors"
	"io"
	"math"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/idna"

	"github.com/arbiterhq/arbiter"
)

// ViewKind names a view; it is the data-view attribute of its markup.
type ViewKind string

// The views a value of a well-known shape gets instead of the tree.
const (
	ViewConversation ViewKind = "conversation"
	ViewToolCall     ViewKind = "tool-call"
	ViewImage        ViewKind = "image"
	ViewDiff         ViewKind = "diff"
	ViewMarkdown     ViewKind = "markdown"
	ViewLink         ViewKind = "link"
	ViewDate         ViewKind = "date"
	ViewMoney        ViewKind = "money"
)

// Bounds on the views, beside the tree's (see MaxNodes).
const (
	// MaxDataURLBytes is the longest data URL shown as an image; longer
	// ones are named, not shown.
	MaxDataURLBytes = 128 << 10
	// MaxMarkdownBytes is the longest Markdown document rendered, and
	// MaxMarkdownMarks the most marks (see markdownMarks) it may hold; a
	// longer or busier one stays text in the tree. Markdown parsers take
	// time and memory that grow faster than the text on some inputs
	// (thousands of nested quotes, brackets or emphasis marks): these
	// bounds keep the worst under a few milliseconds and megabytes.
	MaxMarkdownBytes = 32 << 10
	MaxMarkdownMarks = 2000
	// MaxMarkdownNesting is how many quotes and lists a line of Markdown
	// may open.
	MaxMarkdownNesting = 8
	// MaxDiffLines is how many lines of all the diffs in a context are
	// marked as additions, deletions and context; the rest of a diff is
	// shown as plain text.
	MaxDiffLines = 4000
	// MaxURLBytes is the longest string taken for a link or an image URL.
	MaxURLBytes = 2048
	// ShownMessages is how many messages of a conversation show before
	// the rest fold behind "show more".
	ShownMessages = 25
)

// View is a value of a well-known shape, read for its view. Only the
// fields of its Kind are set.
type View struct {
	Kind ViewKind
	// Messages are a conversation's messages, those the tree holds;
	// MessagesOmitted how many more it has, past the tree's budget.
	Messages        []Message
	MessagesOmitted int
	// Tool is a tool call.
	Tool *ToolCall
	// Image is an image.
	Image *Image
	// Diff is a unified diff.
	Diff *Diff
	// Text is a Markdown document's source.
	Text string
	// Link is a link.
	Link *Link
	// Time is a date, in UTC; Epoch says it was a number of seconds or
	// milliseconds since 1970, which Raw holds as written.
	Time  time.Time
	Epoch bool
	Raw   string
	// Amount and Currency are an amount of money: the amount's digits as
	// written, and an ISO 4217 code.
	Amount, Currency string
}

// Message is one message of a conversation.
type Message struct {
	// Role is who speaks: user, assistant, system, tool …
	Role string
	// Parts are its content: text, images, and what else its content
	// array holds (shown as a tree).
	Parts []Part
	// Calls are the tool calls the message makes.
	Calls []*ToolCall
}

// Part is one part of a message's content: Text, an Image, a tool Call,
// or else a Node the tree shows.
type Part struct {
	Text  string
	Image *Image
	Call  *ToolCall
	Node  *Node
}

// ToolCall is the action an agent wants to take: a tool's name and its
// arguments.
type ToolCall struct {
	Name string
	// ID is the call's id, when it has one.
	ID string
	// Args is the arguments object; nil when they are a string that is
	// not a JSON object (or too big to read), which ArgsText holds.
	Args     *Node
	ArgsText string
}

// Image is an image in a context. Only a data URL of an image type that
// a browser shows safely, within MaxDataURLBytes, is shown (DataURL);
// an image elsewhere is a URL the reviewer's browser does not load by
// itself, since that would tell whoever wrote the task who looks at it
// and when.
type Image struct {
	// DataURL is the data URL to show; "" when the image is not shown.
	DataURL string
	// Type and Bytes are a data URL's media type and decoded size.
	Type  string
	Bytes int
	// Refused says why a data URL is not shown.
	Refused string
	// URL is the address of an image elsewhere.
	URL *Link
}

// Link is an http or https URL. Private says its host is an address on a
// private network or a name for one (localhost, *.internal …): the page
// shows it as text, not as a link, so that no click from a reviewer's
// browser reaches into the reviewer's network.
type Link struct {
	URL     string
	Host    string
	Private bool
}

// Diff is a unified diff, its lines marked.
type Diff struct {
	// Lines are its first lines, marked; Rest is the text of the lines
	// past the context's budget of marked lines (MaxDiffLines), if any.
	Lines []DiffLine
	Rest  string
	// Added and Deleted count its added and deleted lines, all of them.
	Added, Deleted int
}

// DiffLineKind is what a line of a diff is.
type DiffLineKind int

// The kinds of line in a diff.
const (
	DiffContext DiffLineKind = iota
	DiffAdded
	DiffDeleted
	DiffHunk   // @@ -a,b +c,d @@
	DiffHeader // diff --git, index, ---, +++, and other lines between files
)

// DiffLine is one line of a diff.
type DiffLine struct {
	Kind DiffLineKind
	Text string
}

// Recognize returns the view a value gets, or nil when it stays in the
// tree. The conventions are in docs/reviewer-site.md, "What reviewers see".
func Recognize(n *Node) *View {
	r := recognizer{nodes: MaxNodes, lines: MaxDiffLines, markdown: MaxMarkdownBytes}
	return r.recognize(n)
}

// recognizer recognizes the values of one context, within budgets shared
// by all of them.
type recognizer struct {
	// nodes bounds the values read from tool arguments that are JSON in
	// a string; lines the diff lines marked; markdown the bytes of
	// Markdown rendered.
	nodes, lines, markdown int
}

// recognizeAll gives n and every value under it its view, and reports
// whether any got one.
func recognizeAll(n *Node) bool {
	r := recognizer{nodes: MaxNodes, lines: MaxDiffLines, markdown: MaxMarkdownBytes}
	return r.all(n)
}

// all gives n and every value under it its view, and reports whether any
// got one. A view's own values (a tool call's arguments, a message's
// other parts) are looked at too.
func (r *recognizer) all(n *Node) bool {
	switch n.hint {
	case "tree", "text":
		n.View = nil
	case "", "auto":
		n.View = r.recognize(n)
	default:
		// A value that does not fit the view asked for gets the one the
		// conventions give it.
		if n.View = r.hinted(n); n.View == nil {
			n.View = r.recognize(n)
		}
	}
	if n.View != nil {
		for _, c := range n.View.nodes() {
			r.all(c)
		}
		return true
	}
	found := false
	for _, c := range n.Items {
		found = r.all(c) || found
	}
	for _, c := range n.Folded {
		found = r.all(c) || found
	}
	return found
}

// nodes are the values a view shows through the tree.
func (v *View) nodes() []*Node {
	var out []*Node
	call := func(c *ToolCall) {
		if c != nil && c.Args != nil {
			out = append(out, c.Args.Members()...)
		}
	}
	call(v.Tool)
	for _, m := range v.Messages {
		for _, p := range m.Parts {
			call(p.Call)
			if p.Node != nil {
				out = append(out, p.Node)
			}
		}
		for _, c := range m.Calls {
			call(c)
		}
	}
	return out
}

// recognize returns n's view, or nil.
func (r *recognizer) recognize(n *Node) *View {
	switch n.Kind {
	case Array:
		return r.conversation(n)
	case Object:
		if c := r.toolCall(n); c != nil {
			return &View{Kind: ViewToolCall, Tool: c}
		}
		if img := imageObject(n); img != nil {
			return &View{Kind: ViewImage, Image: img}
		}
		if v := r.markdownObject(n); v != nil {
			return v
		}
		return money(n)
	case String:
		return r.stringView(n)
	case Number:
		return epoch(n)
	}
	return nil
}

// hinted returns the view a display hint asks for n, when n fits it, or
// nil.
func (r *recognizer) hinted(n *Node) *View {
	s := n.Str()
	switch ViewKind(n.hint) {
	case ViewConversation:
		if n.Kind == Array {
			return r.conversation(n)
		}
	case ViewToolCall:
		if c := r.toolCall(n); c != nil {
			return &View{Kind: ViewToolCall, Tool: c}
		}
	case ViewImage:
		img := imageURL(s)
		if n.Kind == Object {
			img = imageObject(n)
		}
		if img != nil {
			return &View{Kind: ViewImage, Image: img}
		}
	case ViewDiff:
		if d := r.diff(s); d != nil {
			return &View{Kind: ViewDiff, Diff: d}
		}
	case ViewMarkdown:
		if n.Kind == String {
			return r.markdownView(s)
		}
		return r.markdownObject(n)
	case ViewLink:
		if l := LinkOf(s); l != nil {
			return &View{Kind: ViewLink, Link: l}
		}
	case ViewDate:
		if n.Kind == Number {
			return epoch(&Node{Kind: Number, Text: n.Text, InObject: true, Key: "at"})
		}
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return &View{Kind: ViewDate, Time: t.UTC(), Raw: s}
		}
	case ViewMoney:
		if n.Kind == Object {
			return money(n)
		}
	}
	return nil
}

// keysWithin reports whether every member of the object n is named in
// allowed.
func keysWithin(n *Node, allowed ...string) bool {
	if n.Omitted() > 0 {
		return false
	}
	for _, c := range n.Members() {
		ok := false
		for _, a := range allowed {
			ok = ok || c.Key == a
		}
		if !ok {
			return false
		}
	}
	return true
}

// chatRoles are the roles a conversation's messages take, in the chat
// APIs of OpenAI, Anthropic and Google.
var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true,
	"tool": true, "function": true, "model": true}

// conversation reads an array of {role, content} messages; every message
// the tree holds must be one.
func (r *recognizer) conversation(n *Node) *View {
	if n.Count == 0 {
		return nil
	}
	members := n.Members()
	msgs := make([]Message, 0, len(members))
	for i, m := range members {
		msg, ok := r.message(m)
		if !ok && i == len(members)-1 && i > 0 && n.Omitted() > 0 {
			// The tree stopped inside the last message it holds.
			break
		} else if !ok {
			return nil
		}
		msgs = append(msgs, msg)
	}
	return &View{Kind: ViewConversation, Messages: msgs, MessagesOmitted: n.Count - len(msgs)}
}

// message reads one message of a conversation.
func (r *recognizer) message(n *Node) (Message, bool) {
	role := n.Member("role")
	if n.Kind != Object || role == nil || !chatRoles[strings.ToLower(role.Str())] {
		return Message{}, false
	}
	msg := Message{Role: role.Str()}
	if calls := n.Member("tool_calls"); calls != nil {
		if calls.Kind != Array || calls.Omitted() > 0 {
			return Message{}, false
		}
		for _, c := range calls.Members() {
			call := r.toolCall(c)
			if call == nil {
				return Message{}, false
			}
			msg.Calls = append(msg.Calls, call)
		}
	}
	content := n.Member("content")
	switch {
	case content == nil || (content.Kind == Literal && content.Text == "null"):
		if len(msg.Calls) == 0 {
			return Message{}, false
		}
	case content.Kind == String:
		msg.Parts = []Part{{Text: content.Str()}}
	case content.Kind == Array && content.Omitted() == 0:
		for _, p := range content.Members() {
			msg.Parts = append(msg.Parts, r.part(p))
		}
	default:
		return Message{}, false
	}
	return msg, true
}

// part reads one part of a message's content array.
func (r *recognizer) part(n *Node) Part {
	if n.Kind == String {
		return Part{Text: n.Str()}
	}
	if n.Kind == Object {
		if t := n.Member("text"); t != nil && t.Kind == String && keysWithin(n, "type", "text") {
			return Part{Text: t.Str()}
		}
		if img := imageObject(n); img != nil {
			return Part{Image: img}
		}
		if c := r.toolCall(n); c != nil {
			return Part{Call: c}
		}
	}
	return Part{Node: n}
}

// toolCall reads {name, arguments}, {tool, input} or {name, input}, with
// at most an id and a type beside, or OpenAI's {id, type: "function",
// function: {name, arguments}}.
func (r *recognizer) toolCall(n *Node) *ToolCall {
	if n.Kind != Object {
		return nil
	}
	if fn := n.Member("function"); fn != nil && keysWithin(n, "id", "type", "function") {
		c := r.toolCall(fn)
		if c != nil && c.ID == "" {
			c.ID = n.Member("id").Str()
		}
		return c
	}
	if !keysWithin(n, "name", "tool", "arguments", "input", "id", "type", "call_id") {
		return nil
	}
	name, args := n.Member("name"), n.Member("arguments")
	if name == nil {
		name, args = n.Member("tool"), n.Member("input")
	} else if args == nil {
		args = n.Member("input")
	}
	if name == nil || name.Kind != String || strings.TrimSpace(name.Str()) == "" || args == nil ||
		(n.Member("name") != nil && n.Member("tool") != nil) {
		return nil
	}
	c := &ToolCall{Name: name.Str(), ID: n.Member("id").Str()}
	if c.ID == "" {
		c.ID = n.Member("call_id").Str()
	}
	switch args.Kind {
	case Object:
		c.Args = args
	case String:
		// OpenAI sends the arguments as JSON in a string.
		s := strings.TrimSpace(args.Str())
		if !strings.HasPrefix(s, "{") {
			return nil
		}
		c.ArgsText = args.Str()
		if tree, used, ok := parseTree(s, r.nodes); ok && tree.Kind == Object {
			r.nodes -= used
			c.Args = tree
		}
	default:
		return nil
	}
	return c
}

// parseTree reads raw as a tree of at most budget values; it reports how many it used, and false when the
// text is not JSON or does not fit.
func parseTree(raw string, budget int) (*Node, int, bool) {
	b := treeBuilder{dec: newDecoder(raw), budget: budget}
	root := &Node{}
	tok, err := b.dec.Token()
	if err == nil {
		err = b.fill(root, tok, 0)
	}
	if err != nil || b.incomplete {
		return nil, 0, false
	}
	if _, err := b.dec.Token(); err != io.EOF {
		return nil, 0, false // more than one value
	}
	return root, budget - b.budget, true
}

// imageObject reads {type: "image", url}, {type: "image_url", image_url},
// {image_url: url or {url, detail}} and Anthropic's {type: "image",
// source: {type: "base64", media_type, data}}.
func imageObject(n *Node) *Image {
	typ := n.Member("type").Str()
	if u := n.Member("url"); typ == "image" && u != nil && keysWithin(n, "type", "url", "alt", "detail") {
		return imageURL(u.Str())
	}
	if src := n.Member("source"); typ == "image" && src != nil && keysWithin(n, "type", "source") &&
		src.Member("type").Str() == "base64" && keysWithin(src, "type", "media_type", "data") {
		// Anthropic's image block.
		return dataImage("data:" + src.Member("media_type").Str() + ";base64," + src.Member("data").Str())
	}
	iu := n.Member("image_url")
	if iu == nil || (typ != "" && typ != "image_url") || !keysWithin(n, "type", "image_url", "detail") {
		return nil
	}
	if iu.Kind == Object {
		if !keysWithin(iu, "url", "detail") {
			return nil
		}
		iu = iu.Member("url")
	}
	return imageURL(iu.Str())
}

// imageURL reads an image's address: a data URL, or an http(s) URL.
func imageURL(s string) *Image {
	if strings.HasPrefix(s, "data:") {
		return dataImage(s)
	}
	if l := LinkOf(s); l != nil {
		return &Image{URL: l}
	}
	return nil
}

// imageTypes are the media types a data URL may show: raster images a
// browser decodes without running anything (not SVG).
var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// dataImage reads a data URL of an image, or returns nil when s is not
// one. It is shown only when it is base64 of one of imageTypes, its bytes
// are what it says they are, and it is within MaxDataURLBytes.
func dataImage(s string) *Image {
	meta, data, ok := strings.Cut(strings.TrimPrefix(s, "data:"), ",")
	if !ok || !strings.HasPrefix(strings.ToLower(meta), "image/") {
		return nil
	}
	typ, params, _ := strings.Cut(strings.ToLower(meta), ";")
	img := &Image{Type: typ, Bytes: base64.StdEncoding.DecodedLen(len(data))}
	switch {
	case len(s) > MaxDataURLBytes:
		img.Refused = "it is " + strconv.Itoa(len(s)>>10) + " KiB, over the limit of " + strconv.Itoa(MaxDataURLBytes>>10) + " KiB"
	case !imageTypes[typ]:
		img.Refused = typ + " is not shown: only PNG, JPEG, GIF and WebP are"
	case params != "base64":
		img.Refused = "it is not base64"
	default:
		raw, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			img.Refused = "it is not valid base64"
		} else if sniffed := http.DetectContentType(raw); sniffed != typ {
			img.Refused = "its bytes are not " + typ
		} else {
			img.DataURL, img.Bytes = "data:"+typ+";base64,"+data, len(raw)
		}
	}
	return img
}

// LinkOf reads s as an absolute http or https URL, without credentials,
// or returns nil: a link, and where it leads.
func LinkOf(s string) *Link {
	if len(s) > MaxURLBytes || strings.ContainsAny(s, " \t\r\n\"<>\\") ||
		!(strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://")) {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.Opaque != "" || u.User != nil {
		return nil
	}
	host := strings.ToLower(u.Hostname())
	return &Link{URL: u.String(), Host: host, Private: privateHost(host)}
}

// privateHost reports whether host (a URL's, as url.Parse leaves it) leads
// into a private network, or may: whether a browser would go to an address
// that is not public (see arbiter.PublicAddress) or to a name that only a
// private network resolves. The host is read as browsers read it (the
// WHATWG URL standard): mapped by IDNA (full-width digits and letters,
// upper case), a trailing dot dropped, and, when its last label is a
// number, read as an IPv4 address in any of the forms browsers take
// (127.1, 0x7f.1, 10.1, 2130706433, 0177.0.0.1). A host a browser would
// refuse is private too: it is not linked.
func privateHost(host string) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		return !arbiter.PublicAddress(ip)
	}
	host, err := browserDomains.ToASCII(host)
	if err != nil {
		return true
	}
	host = strings.ToLower(host)
	if ip, number, ok := browserIPv4(host); number {
		return !ok || !arbiter.PublicAddress(ip)
	}
	host = strings.TrimSuffix(host, ".")
	if !strings.Contains(host, ".") {
		return true // localhost, intranet names
	}
	for _, suffix := range []string{".localhost", ".local", ".internal", ".lan", ".home.arpa", ".corp"} {
		if strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}

// browserDomains maps a host as browsers' "domain to ASCII" does (UTS 46,
// nontransitional, without the STD3 rules).
var browserDomains = idna.New(idna.MapForLookup(), idna.Transitional(false), idna.StrictDomainName(false))

// browserIPv4 reads host as the WHATWG URL standard's host parser reads
// an IPv4 address. number reports whether host's last label (after a
// trailing dot) is a number, which makes it an IPv4 address to a browser
// and not a name; ok, whether it is a valid one, ip.
func browserIPv4(host string) (ip netip.Addr, number, ok bool) {
	labels := strings.Split(host, ".")
	if len(labels) > 1 && labels[len(labels)-1] == "" {
		labels = labels[:len(labels)-1]
	}
	last := labels[len(labels)-1]
	if _, isNumber := ipv4Number(last); !isNumber && (last == "" || strings.Trim(last, "0123456789") != "") {
		return netip.Addr{}, false, false
	}
	if len(labels) > 4 {
		return netip.Addr{}, true, false
	}
	var addr uint64
	for i, label := range labels {
		n, isNumber := ipv4Number(label)
		limit := uint64(255)
		if i == len(labels)-1 {
			limit = 1<<(8*(5-len(labels))) - 1
		}
		if !isNumber || n > limit {
			return netip.Addr{}, true, false
		}
		if i < len(labels)-1 {
			addr |= n << (8 * (3 - i))
		} else {
			addr |= n
		}
	}
	return netip.AddrFrom4([4]byte{byte(addr >> 24), byte(addr >> 16), byte(addr >> 8), byte(addr)}), true, true
}

// ipv4Number reads a label as the WHATWG IPv4 number parser does:
// hexadecimal after 0x, octal after a leading 0, decimal otherwise; an
// empty one after its prefix is 0.
func ipv4Number(label string) (uint64, bool) {
	if label == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(label) >= 2 && (label[:2] == "0x" || label[:2] == "0X"):
		label, base = label[2:], 16
	case len(label) >= 2 && label[0] == '0':
		label, base = label[1:], 8
	}
	if label == "" {
		return 0, true
	}
	n, err := strconv.ParseUint(label, base, 64)
	if err != nil {
		// Too many digits is still a number, above every limit.
		var numErr *strconv.NumError
		return math.MaxUint64, errors.As(err, &numErr) && numErr.Err == strconv.ErrRange
	}
	return n, true
}

// markdownObject reads {type: "markdown", text}, within the Markdown
// budget.
func (r *recognizer) markdownObject(n *Node) *View {
	t := n.Member("text")
	if n.Member("type").Str() != "markdown" || t == nil || t.Kind != String || !keysWithin(n, "type", "text") {
		return nil
	}
	return r.markdownView(t.Str())
}

// markdownView is the Markdown view of text, or nil past the budget.
func (r *recognizer) markdownView(text string) *View {
	if len(text) > MaxMarkdownBytes || len(text) > r.markdown || markdownMarks(text) > MaxMarkdownMarks {
		return nil
	}
	r.markdown -= len(text)
	return &View{Kind: ViewMarkdown, Text: text}
}

// markdownMarks counts what makes Markdown costly to parse: its lines,
// the quotes and list items each line opens, and the characters that may open or
// close inline markup. A line that opens more than MaxMarkdownNesting
// quotes and lists counts as too many.
func markdownMarks(text string) int {
	marks := strings.Count(text, "*") + strings.Count(text, "_") + strings.Count(text, "[") + strings.Count(text, "]") +
		strings.Count(text, "`") + strings.Count(text, "<") + strings.Count(text, "|") + strings.Count(text, "~") +
		strings.Count(text, "&") + strings.Count(text, "\\") + strings.Count(text, "\n")
	for line := range strings.SplitSeq(text, "\n") {
		depth := 0
		for rest := strings.TrimLeft(line, " \t"); rest != ""; rest = strings.TrimLeft(rest, " \t") {
			digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
			switch {
			case rest[0] == '>':
				rest = rest[1:]
			case (rest[0] == '-' || rest[0] == '+' || rest[0] == '*') && len(rest) > 1 && (rest[1] == ' ' || rest[1] == '\t'):
				rest = rest[2:]
			case digits > 0 && digits < len(rest) && (rest[digits] == '.' || rest[digits] == ')'):
				rest = rest[digits+1:]
			default:
				rest = ""
				continue
			}
			if depth++; depth > MaxMarkdownNesting {
				return MaxMarkdownMarks + 1
			}
		}
		marks += depth
	}
	return marks
}

// money reads {amount, currency}: an amount as a number or a string of
// decimal digits, and a three-letter ISO 4217 code in capitals.
func money(n *Node) *View {
	amount, cur := n.Member("amount"), n.Member("currency")
	if amount == nil || cur == nil || !keysWithin(n, "amount", "currency") {
		return nil
	}
	code := cur.Str()
	if len(code) != 3 || strings.Trim(code, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return nil
	}
	digits := amount.Text
	switch amount.Kind {
	case Number:
	case String:
		if !decimal(digits) {
			return nil
		}
	default:
		return nil
	}
	return &View{Kind: ViewMoney, Amount: digits, Currency: code}
}

// decimal reports whether s is a plain decimal number: -12, 84.90.
func decimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	whole, frac, dot := strings.Cut(s, ".")
	digits := func(d string) bool { return d != "" && strings.Trim(d, "0123456789") == "" }
	return len(s) <= 40 && digits(whole) && (!dot || digits(frac))
}

// dateKey reports whether a member's name says its number is a time: it
// ends in _at or At, is at or ts, or ends in time, date or timestamp.
func dateKey(key string) bool {
	k := strings.ToLower(key)
	return strings.HasSuffix(key, "_at") || strings.HasSuffix(key, "At") || k == "ts" || k == "at" ||
		strings.HasSuffix(k, "time") || strings.HasSuffix(k, "date") || strings.HasSuffix(k, "timestamp")
}

// epoch reads a number as a time since 1970 when its member's name says
// it is one (see dateKey): whole seconds from 2001 to 2100, or
// milliseconds in the same span.
func epoch(n *Node) *View {
	if !n.InObject || !dateKey(n.Key) {
		return nil
	}
	v, err := strconv.ParseInt(n.Text, 10, 64)
	if err != nil {
		return nil
	}
	const from, to = 1e9, 4102444800 // 2001-09-09 and 2100-01-01
	var t time.Time
	switch {
	case v >= from && v < to:
		t = time.Unix(v, 0)
	case v >= from*1000 && v < to*1000:
		t = time.UnixMilli(v)
	default:
		return nil
	}
	return &View{Kind: ViewDate, Time: t.UTC(), Epoch: true, Raw: n.Text}
}

// stringView reads a string: an image (a data URL, or the URL of a member
// named image_url), a unified diff, an RFC 3339 date or a link.
func (r *recognizer) stringView(n *Node) *View {
	s := n.Str()
	if strings.HasPrefix(s, "data:") {
		if img := dataImage(s); img != nil {
			return &View{Kind: ViewImage, Image: img}
		}
		return nil
	}
	if n.InObject && n.Key == "image_url" {
		if img := imageURL(s); img != nil {
			return &View{Kind: ViewImage, Image: img}
		}
	}
	if d := r.diff(s); d != nil {
		return &View{Kind: ViewDiff, Diff: d}
	}
	if len(s) >= 20 && len(s) <= 40 && s[4] == '-' {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			return &View{Kind: ViewDate, Time: t.UTC(), Raw: s}
		}
	}
	if l := LinkOf(s); l != nil {
		return &View{Kind: ViewLink, Link: l}
	}
	return nil
}

// diff reads s as a unified diff: file headers (--- then +++), then hunks
// of context, added and deleted lines, any number of files, with other
// text (git's headers, a commit message) only before the first hunk;
// between hunks only the lines of git's and diff's own headers. A hunk may
// hold fewer lines than its @@ header counts (diffs written by hand or by
// a model often do) but not more. It returns nil unless s holds at least
// one hunk. Its first lines, up to the context's budget, are marked.
func (r *recognizer) diff(s string) *Diff {
	if !strings.Contains(s, "\n@@ -") || !strings.Contains(s, "\n+++ ") {
		return nil
	}
	d := &Diff{}
	oldLeft, newLeft, hunks := 0, 0, 0
	prev := ""
	budget := r.lines
	mark := func(k DiffLineKind, line string, start int) {
		if budget > 0 {
			d.Lines = append(d.Lines, DiffLine{Kind: k, Text: line})
			budget--
		} else if d.Rest == "" {
			d.Rest = s[start:]
		}
	}
	for start := 0; start < len(s); {
		end := strings.IndexByte(s[start:], '\n')
		if end < 0 {
			end = len(s)
		} else {
			end += start
		}
		line := s[start:end]
		inHunk := (oldLeft > 0 || newLeft > 0) && !diffHeaderLine(line)
		switch {
		case inHunk:
			k := DiffContext
			switch {
			case line == "" || line[0] == ' ':
				oldLeft, newLeft = oldLeft-1, newLeft-1
			case line[0] == '-':
				k, oldLeft = DiffDeleted, oldLeft-1
				d.Deleted++
			case line[0] == '+':
				k, newLeft = DiffAdded, newLeft-1
				d.Added++
			case line[0] == '\\':
				k = DiffHeader
			default:
				return nil
			}
			if oldLeft < 0 || newLeft < 0 {
				return nil
			}
			mark(k, line, start)
		case strings.HasPrefix(line, "@@ -"):
			o, n, ok := hunkHeader(line)
			if !ok || (hunks == 0 && !strings.HasPrefix(prev, "+++ ")) {
				return nil
			}
			oldLeft, newLeft, hunks = o, n, hunks+1
			mark(DiffHunk, line, start)
		case hunks > 0 && !diffHeaderLine(line):
			return nil
		default:
			if strings.HasPrefix(line, "+++ ") && !strings.HasPrefix(prev, "--- ") {
				return nil
			}
			oldLeft, newLeft = 0, 0
			mark(DiffHeader, line, start)
		}
		prev = line
		start = end + 1
	}
	if hunks == 0 {
		return nil
	}
	r.lines = budget
	return d
}

// diffHeaders begin the lines of git's and diff's headers, which may
// come between hunks.
var diffHeaders = []string{"diff ", "--- ", "+++ ", "@@ -", "index ", "new file mode ", "deleted file mode ",
	"old mode ", "new mode ", "similarity index ", "dissimilarity index ", "rename from ", "rename to ",
	"copy from ", "copy to ", "Binary files ", `\ No newline at end of file`}

// diffHeaderLine reports whether line is one of a diff's header lines.
func diffHeaderLine(line string) bool {
	for _, h := range diffHeaders {
		if strings.HasPrefix(line, h) {
			return true
		}
	}
	return false
}

// hunkHeader reads "@@ -a,b +c,d @@ …" and returns b and d (1 when left
// out).
func hunkHeader(line string) (old, new int, ok bool) {
	rest, found := strings.CutPrefix(line, "@@ -")
	if !found {
		return 0, 0, false
	}
	ranges, _, found := strings.Cut(rest, " @@")
	if !found {
		return 0, 0, false
	}
	o, n, found := strings.Cut(ranges, " +")
	if !found {
		return 0, 0, false
	}
	count := func(r string) (int, bool) {
		start, length, hasLength := strings.Cut(r, ",")
		if _, err := strconv.ParseUint(start, 10, 32); err != nil {
			return 0, false
		}
		if !hasLength {
			return 1, true
		}
		l, err := strconv.ParseUint(length, 10, 32)
		return int(l), err == nil
	}
	old, ok1 := count(o)
	new, ok2 := count(n)
	return old, new, ok1 && ok2 && old+new > 0
}

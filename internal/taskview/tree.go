// Package taskview reads a task's context the way a reviewer reads it: a
// bounded tree of its JSON (Parse), the well-known shapes in it that get a
// view of their own — a conversation, a tool call, an image, a diff,
// Markdown, a link, a date, an amount of money (Recognize) — and a plain
// text of the whole for messages that carry no markup (PlainText).
//
// It is a package of its own, and not part of views/review, because more
// than the pages read it: the desk and the dashboard render its model
// through templ, and a chat message renders its plain text. It imports no
// web or template package; every function in it is pure.
package taskview

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
)

// How much of a context the tree holds. The page for any context is
// bounded by a small multiple of the context's size plus a fixed amount
// (MaxNodes nodes of markup), whatever its shape: long strings and big
// arrays and objects stay in the tree, folded behind "show more"; what is
// nested too deep or lies past the node budget is left out, and the raw
// JSON, cut at arbiter.MaxContextBytes, is offered instead.
const (
	// MaxDepth is how many levels of arrays and objects the tree holds;
	// deeper values are elided. Tasks created before the API refused
	// deeper contexts can still hold them.
	MaxDepth = arbiter.MaxContextDepth
	// OpenDepth is how many levels are unfolded when the page opens.
	OpenDepth = 4
	// ShownItems is how many members of an array or object show before
	// the rest folds behind "show more".
	ShownItems = 25
	// ShownChars and ShownLines bound the part of a string shown before
	// the rest folds behind "show more".
	ShownChars = 600
	ShownLines = 12
	// MaxNodes is how many values the tree holds in all.
	MaxNodes = 2000
)

// Kind is the JSON type of a value in the tree.
type Kind int

// The kinds of value in the tree.
const (
	Object Kind = iota
	Array
	String
	Number
	Literal // true, false or null
	Elided  // an array or object nested too deep to hold
)

// Node is one value of a context as the tree holds it.
type Node struct {
	Kind Kind
	// Key is the member's name in an object; InObject tells "" from none.
	Key      string
	InObject bool
	// Text is a scalar's text: a string's shown part, a number or a
	// literal. More is the rest of a long string, folded.
	Text, More string
	// Items are the shown members of an array or object; Folded the ones
	// behind "show more". Count is how many members it has in all, those
	// past the tree's budget too, which the tree leaves out.
	Items, Folded []*Node
	Count         int
	// Depth counts the arrays and objects around the value.
	Depth int
	// View is the view the value gets instead of the tree (see
	// Recognize); nil for the tree.
	View *View
	// str is a string's whole text (Text and More).
	str string
	// hint is the view a display hint asks for the value; "" for none.
	hint string
}

// Context is a task's context prepared for a reader.
type Context struct {
	// Root is the tree; nil when the context is not JSON.
	Root *Node
	// Incomplete says the tree leaves something out, so Raw is shown.
	Incomplete bool
	// Views says some value in the tree has a view of its own, so Raw is
	// offered too, as the escape from the views.
	Views bool
	// Raw is the context's text, at most arbiter.MaxContextBytes of it,
	// when Incomplete or Views; RawCut says it was longer.
	Raw    string
	RawCut bool
}

// Parse prepares a task's context for a reader, or returns nil when there is
// none. It reads the JSON as a stream of tokens, recursing at most MaxDepth
// levels and skipping deeper values without building them, so neither the
// work nor the memory depends on the shape of the context; then it puts
// first the members display names (nil for no hint), and gives each value
// of a well-known shape its view (see Recognize), or the one display asks
// for when the value fits it.
func Parse(context json.RawMessage, display *arbiter.Display) *Context {
	raw := bytes.TrimSpace(context)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	v := &Context{}
	b := treeBuilder{dec: newDecoder(raw), budget: MaxNodes}
	root := &Node{}
	tok, err := b.dec.Token()
	if err == nil {
		err = b.fill(root, tok, 0)
	}
	switch {
	case err == nil:
		v.Root, v.Incomplete = root, b.incomplete
	case errors.Is(err, errTreeFull):
		// The arrays and objects still open are counted to their end.
		countRest(raw[b.dec.InputOffset():], b.open)
		v.Root, v.Incomplete = root, true
	default:
		v.Incomplete = true
	}
	if v.Root != nil {
		applyDisplay(v.Root, display)
		v.Views = recognizeAll(v.Root)
	}
	if v.Incomplete || v.Views {
		v.Raw, v.RawCut = CutBytes(string(raw), arbiter.MaxContextBytes)
	}
	return v
}

// applyDisplay puts the members of the object root that display names
// first, in its order, and notes the view it asks for each.
func applyDisplay(root *Node, display *arbiter.Display) {
	if display == nil || root.Kind != Object {
		return
	}
	members := root.Members()
	first := make([]*Node, 0, len(members))
	for _, f := range display.Fields {
		for _, m := range members {
			if m.Key == f.Field && m.hint == "" {
				m.hint = f.View
				if m.hint == "" {
					m.hint = "auto"
				}
				first = append(first, m)
				break
			}
		}
	}
	ordered := first
	for _, m := range members {
		if m.hint == "" {
			ordered = append(ordered, m)
		}
	}
	shown := min(len(ordered), ShownItems)
	root.Items, root.Folded = ordered[:shown:shown], ordered[shown:]
}

// errTreeFull stops the tree at MaxNodes values.
var errTreeFull = errors.New("the tree holds MaxNodes values")

// countRest sets the Count of each array and object in open (outermost
// first), whose members the tree stopped reading at the start of rest,
// to its real number of members: those kept, and those in rest, found by
// a scan of its bytes that builds and allocates nothing. rest is valid
// JSON's remainder, so strings, nesting and commas are all it must track.
func countRest(rest []byte, open []*Node) {
	for _, n := range open {
		n.Count = len(n.Items) + len(n.Folded)
	}
	cur, level := len(open)-1, 0
	// pending says a member of the current container has begun since its
	// last comma (a member's content, not the one the tree already kept).
	pending, inString, escaped := false, false, false
	for _, c := range rest {
		if cur < 0 {
			return
		}
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case c == '"':
			inString, pending = true, pending || level == 0
		case c == '[' || c == '{':
			pending = pending || level == 0
			level++
		case c == ']' || c == '}':
			if level > 0 {
				level--
				continue
			}
			if pending {
				open[cur].Count++
			}
			// The container closes; its parent's member (this container)
			// is counted among the kept ones already.
			cur, pending = cur-1, false
		case c == ',':
			if level == 0 && pending {
				open[cur].Count++
				pending = false
			}
		default:
			pending = pending || level == 0
		}
	}
}

// newDecoder reads JSON whose numbers keep their digits.
func newDecoder[T []byte | string](raw T) *json.Decoder {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	return dec
}

// treeBuilder builds a Node tree from a token stream.
type treeBuilder struct {
	dec        *json.Decoder
	budget     int  // values the tree may still hold
	incomplete bool // a value was left out
	// open are the arrays and objects being filled, outermost first.
	open []*Node
}

// fill makes n the value that starts with tok, at depth levels of nesting.
func (b *treeBuilder) fill(n *Node, tok json.Token, depth int) error {
	b.budget--
	n.Depth = depth
	switch tok := tok.(type) {
	case json.Delim:
		if depth >= MaxDepth {
			n.Kind, b.incomplete = Elided, true
			return b.skip()
		}
		n.Kind = Array
		if tok == '{' {
			n.Kind = Object
		}
		b.open = append(b.open, n)
		for b.dec.More() {
			if b.budget <= 0 {
				b.incomplete = true
				return errTreeFull
			}
			child := &Node{InObject: n.Kind == Object}
			if child.InObject {
				key, err := b.dec.Token()
				if err != nil {
					return err
				}
				child.Key, _ = key.(string)
			}
			tok, err := b.dec.Token()
			if err != nil {
				return err
			}
			if len(n.Items) < ShownItems {
				n.Items = append(n.Items, child)
			} else {
				n.Folded = append(n.Folded, child)
			}
			if err := b.fill(child, tok, depth+1); err != nil {
				return err
			}
		}
		b.open = b.open[:len(b.open)-1]
		n.Count = len(n.Items) + len(n.Folded)
		_, err := b.dec.Token() // the closing delimiter
		return err
	case string:
		n.Kind, n.str = String, tok
		n.Text, n.More = CutText(tok, ShownChars, ShownLines)
	case json.Number:
		n.Kind, n.Text = Number, tok.String()
	case bool:
		n.Kind, n.Text = Literal, strconv.FormatBool(tok)
	case nil:
		n.Kind, n.Text = Literal, "null"
	}
	return nil
}

// skip reads past the rest of an array or object whose opening delimiter
// was just read, however deep it nests, without keeping any of it.
func (b *treeBuilder) skip() error {
	for level := 1; level > 0; {
		tok, err := b.dec.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			level++
		case json.Delim(']'), json.Delim('}'):
			level--
		}
	}
	return nil
}

// CutText splits s into its first part, at most chars characters and lines
// lines, and the rest.
func CutText(s string, chars, lines int) (shown, rest string) {
	end, seen := 0, 0
	for n := 0; end < len(s); n++ {
		if n == chars || seen == lines {
			return s[:end], s[end:]
		}
		r, size := utf8.DecodeRuneInString(s[end:])
		if r == '\n' {
			seen++
		}
		end += size
	}
	return s, ""
}

// CutBytes returns s, or its first max bytes cut at a character boundary
// and true.
func CutBytes(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	end := max
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end], true
}

// Str is a string value's whole text, "" for any other value.
func (n *Node) Str() string {
	if n == nil || n.Kind != String {
		return ""
	}
	return n.str
}

// Member returns the object's member named key, or nil.
func (n *Node) Member(key string) *Node {
	if n == nil || n.Kind != Object {
		return nil
	}
	for _, c := range n.Items {
		if c.Key == key {
			return c
		}
	}
	for _, c := range n.Folded {
		if c.Key == key {
			return c
		}
	}
	return nil
}

// Members are the members the tree holds of an array or object: the shown
// ones, then the folded ones.
func (n *Node) Members() []*Node {
	if len(n.Folded) == 0 {
		return n.Items
	}
	all := make([]*Node, 0, len(n.Items)+len(n.Folded))
	return append(append(all, n.Items...), n.Folded...)
}

// Omitted is how many of the array's or object's members the tree leaves
// out, past its budget; they are in the raw JSON.
func (n *Node) Omitted() int { return n.Count - len(n.Items) - len(n.Folded) }

// Label is what a folded array or object says about itself: how many
// members it has, however many the tree shows.
func (n *Node) Label() string {
	count := n.Count
	switch {
	case n.Kind == Object && count == 0:
		return "{}"
	case n.Kind == Array && count == 0:
		return "[]"
	case n.Kind == Object:
		return "{" + Plural(count, "key") + "}"
	}
	return "[" + Plural(count, "item") + "]"
}

// Unit names what an array or object holds, for "show more".
func (n *Node) Unit() string {
	if n.Kind == Object {
		return "key"
	}
	return "item"
}

// Open says whether the array or object is unfolded when the page opens.
func (n *Node) Open() bool { return n.Depth < OpenDepth }

// Plural is n and unit, with an s unless n is 1: "1 item", "115,400
// characters".
func Plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	digits := strconv.Itoa(n)
	for i := len(digits) - 3; i > 0 && digits[i-1] != '-'; i -= 3 {
		digits = digits[:i] + "," + digits[i:]
	}
	return digits + " " + unit + "s"
}

package review

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
)

// How much of a context the desk shows as a tree. The page for any context
// is bounded by a small multiple of the context's size plus a fixed amount
// (contextMaxNodes nodes of markup), whatever its shape: long strings and
// big arrays and objects stay on the page, folded behind "show more"; what
// is nested too deep or lies past the node budget is left out of the tree,
// and the raw JSON, cut at arbiter.MaxContextBytes, is offered instead.
const (
	// contextMaxDepth is how many levels of arrays and objects the tree
	// shows; deeper values show "…". Tasks created before the API refused
	// deeper contexts can still hold them.
	contextMaxDepth = arbiter.MaxContextDepth
	// contextOpenDepth is how many levels are unfolded when the page opens.
	contextOpenDepth = 4
	// contextShownItems is how many members of an array or object show
	// before the rest folds behind "show more".
	contextShownItems = 25
	// contextShownChars and contextShownLines bound the part of a string
	// shown before the rest folds behind "show more".
	contextShownChars = 600
	contextShownLines = 12
	// contextMaxNodes is how many values the tree holds in all.
	contextMaxNodes = 2000
)

// jsonKind is the type of a value in the tree.
type jsonKind int

const (
	jsonObject jsonKind = iota
	jsonArray
	jsonString
	jsonNumber
	jsonLiteral // true, false or null
	jsonElided  // an array or object nested too deep to show
)

// jsonNode is one value of a context as the desk shows it.
type jsonNode struct {
	Kind jsonKind
	// Key is the member's name in an object; InObject tells "" from none.
	Key      string
	InObject bool
	// Text is a scalar's text: a string's shown part, a number or a
	// literal. More is the rest of a long string, folded.
	Text, More string
	// Items are the shown members of an array or object; Folded the ones
	// behind "show more". Count is how many members it has in all, those
	// past the tree's budget too, which the tree leaves out.
	Items, Folded []*jsonNode
	Count         int
	// Depth counts the arrays and objects around the value.
	Depth int
}

// contextView is a task's context prepared for the desk.
type contextView struct {
	// Root is the tree; nil when the context is not JSON.
	Root *jsonNode
	// Incomplete says the tree leaves something out, so Raw is shown.
	Incomplete bool
	// Raw is the context's text, at most arbiter.MaxContextBytes of it;
	// RawCut says it was longer.
	Raw    string
	RawCut bool
}

// contextOf prepares a task's context for the desk, or returns nil when the
// task has none. It reads the JSON as a stream of tokens, recursing at most
// contextMaxDepth levels and skipping deeper values without building them,
// so neither the work nor the memory depends on the shape of the context.
func contextOf(t *arbiter.Task) *contextView {
	raw := bytes.TrimSpace(t.Context)
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	v := &contextView{}
	b := treeBuilder{dec: json.NewDecoder(bytes.NewReader(raw)), budget: contextMaxNodes}
	b.dec.UseNumber()
	root := &jsonNode{}
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
	if v.Incomplete {
		v.Raw, v.RawCut = cutBytes(string(raw), arbiter.MaxContextBytes)
	}
	return v
}

// errTreeFull stops the tree at contextMaxNodes values.
var errTreeFull = errors.New("the tree holds contextMaxNodes values")

// countRest sets the Count of each array and object in open (outermost
// first), whose members the tree stopped reading at the start of rest,
// to its real number of members: those kept, and those in rest, found by
// a scan of its bytes that builds and allocates nothing. rest is valid
// JSON's remainder, so strings, nesting and commas are all it must track.
func countRest(rest []byte, open []*jsonNode) {
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

// cutNote ends the raw JSON when it was cut.
func (v *contextView) cutNote() string {
	if v.RawCut {
		return "… (cut here)"
	}
	return ""
}

// treeBuilder builds a jsonNode tree from a token stream.
type treeBuilder struct {
	dec        *json.Decoder
	budget     int  // values the tree may still hold
	incomplete bool // a value was left out
	// open are the arrays and objects being filled, outermost first.
	open []*jsonNode
}

// fill makes n the value that starts with tok, at depth levels of nesting.
func (b *treeBuilder) fill(n *jsonNode, tok json.Token, depth int) error {
	b.budget--
	n.Depth = depth
	switch tok := tok.(type) {
	case json.Delim:
		if depth >= contextMaxDepth {
			n.Kind, b.incomplete = jsonElided, true
			return b.skip()
		}
		n.Kind = jsonArray
		if tok == '{' {
			n.Kind = jsonObject
		}
		b.open = append(b.open, n)
		for b.dec.More() {
			if b.budget <= 0 {
				b.incomplete = true
				return errTreeFull
			}
			child := &jsonNode{InObject: n.Kind == jsonObject}
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
			if len(n.Items) < contextShownItems {
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
		n.Kind = jsonString
		n.Text, n.More = cutString(tok)
	case json.Number:
		n.Kind, n.Text = jsonNumber, tok.String()
	case bool:
		n.Kind, n.Text = jsonLiteral, strconv.FormatBool(tok)
	case nil:
		n.Kind, n.Text = jsonLiteral, "null"
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

// cutString splits a context's string into the part shown at first and the
// rest.
func cutString(s string) (shown, rest string) {
	return cutText(s, contextShownChars, contextShownLines)
}

// cutText splits s into its first part, at most chars characters and lines
// lines, and the rest.
func cutText(s string, chars, lines int) (shown, rest string) {
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

// cutBytes returns s, or its first max bytes cut at a character boundary
// and true.
func cutBytes(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	end := max
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end], true
}

// label is what a folded array or object says about itself: how many
// members it has, however many the tree shows.
func (n *jsonNode) label() string {
	count := n.Count
	switch {
	case n.Kind == jsonObject && count == 0:
		return "{}"
	case n.Kind == jsonArray && count == 0:
		return "[]"
	case n.Kind == jsonObject:
		return "{" + plural(count, "key") + "}"
	}
	return "[" + plural(count, "item") + "]"
}

// omitted is how many of the array's or object's members the tree leaves
// out, past its budget; they are in the raw JSON.
func (n *jsonNode) omitted() int { return n.Count - len(n.Items) - len(n.Folded) }

// unit names what an array or object holds, for "show more".
func (n *jsonNode) unit() string {
	if n.Kind == jsonObject {
		return "key"
	}
	return "item"
}

// open says whether the array or object is unfolded when the page opens.
func (n *jsonNode) open() bool { return n.Depth < contextOpenDepth }

// multiline says whether a string is shown as a block under its key.
func (n *jsonNode) multiline() bool {
	return strings.Contains(n.Text, "\n") || n.More != ""
}

// scalarClass colours a scalar by its kind.
func (n *jsonNode) scalarClass() string {
	switch n.Kind {
	case jsonString:
		if n.multiline() {
			return "ctx-text"
		}
		return "ctx-str"
	case jsonNumber:
		return "ctx-num"
	}
	return "ctx-lit"
}

// moreLabel says what "show more" unfolds.
func moreLabel(n int, unit string) string {
	return "show " + plural(n, "more "+unit)
}

// plural is n and unit, with an s unless n is 1: "1 item", "115,400
// characters".
func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	digits := strconv.Itoa(n)
	for i := len(digits) - 3; i > 0 && digits[i-1] != '-'; i -= 3 {
		digits = digits[:i] + "," + digits[i:]
	}
	return digits + " " + unit + "s"
}

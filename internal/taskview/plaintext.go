package taskview

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// PlainText is a task's context as plain text of at most max bytes, for a
// message that carries no markup (a chat message, a notification): each
// view as a person would write it out — "user: …" lines for a
// conversation, "Tool call: name" and its arguments, "[image …]", a diff's
// lines, a Markdown document's source, an amount and its currency — and
// the rest as indented "key: value" lines. A text cut at max ends with
// "…". It returns "" for a task without a context.
func PlainText(context json.RawMessage, max int) string {
	c := Parse(context, nil)
	if c == nil || max <= 0 {
		return ""
	}
	w := &textWriter{max: max, buf: make([]byte, 0, min(max, 4096))}
	if c.Root == nil {
		w.write(c.Raw)
	} else {
		w.value(c.Root, 0)
	}
	return w.String()
}

// textWriter writes plain text up to max bytes, then ignores the rest.
type textWriter struct {
	buf  []byte
	max  int
	full bool
}

// String is the text written, cut at max bytes with "…" when it was
// longer.
func (w *textWriter) String() string { return string(w.buf) }

// Len is how many bytes were written.
func (w *textWriter) Len() int { return len(w.buf) }

// write adds s; when that passes max, the text is cut so that it ends
// with "…" within max bytes, at a character boundary.
func (w *textWriter) write(s string) {
	if w.full {
		return
	}
	if len(w.buf)+len(s) <= w.max {
		w.buf = append(w.buf, s...)
		return
	}
	w.full = true
	w.buf = append(w.buf, s[:min(len(s), w.max+1-len(w.buf))]...)
	end := w.max - len("…")
	if end < 0 {
		w.buf = w.buf[:0]
		return
	}
	for end > 0 && !utf8.RuneStart(w.buf[end]) {
		end--
	}
	w.buf = append(w.buf[:end], "…"...)
}

// line starts a new line indented by depth levels, unless the text is
// empty.
func (w *textWriter) line(depth int) {
	if w.Len() > 0 {
		w.write("\n")
	}
	w.write(strings.Repeat("  ", depth))
}

// value writes n, after whatever began its line, at depth levels of
// indentation.
func (w *textWriter) value(n *Node, depth int) {
	if w.full {
		return
	}
	if n.View != nil {
		w.view(n.View, depth)
		return
	}
	switch n.Kind {
	case Object, Array:
		if n.Count == 0 {
			w.write(n.Label())
			return
		}
		for _, c := range n.Members() {
			w.line(depth)
			if n.Kind == Object {
				w.write(c.Key + ": ")
			} else {
				w.write("- ")
			}
			w.value(c, depth+1)
		}
		if n.Omitted() > 0 {
			w.line(depth)
			w.write("… " + Plural(n.Omitted(), "more "+n.Unit()))
		}
	case Elided:
		w.write("…")
	case String:
		w.write(n.Str())
	default:
		w.write(n.Text)
	}
}

// view writes a value that has a view.
func (w *textWriter) view(v *View, depth int) {
	switch v.Kind {
	case ViewConversation:
		for _, m := range v.Messages {
			w.line(depth)
			w.write(m.Role + ": ")
			for i, p := range m.Parts {
				if i > 0 {
					w.write(" ")
				}
				switch {
				case p.Image != nil:
					w.image(p.Image)
				case p.Call != nil:
					w.call(p.Call, depth+1)
				case p.Node != nil:
					w.value(p.Node, depth+1)
				default:
					w.write(p.Text)
				}
			}
			for _, c := range m.Calls {
				w.line(depth + 1)
				w.call(c, depth+2)
			}
		}
		if v.MessagesOmitted > 0 {
			w.line(depth)
			w.write("… " + Plural(v.MessagesOmitted, "more message"))
		}
	case ViewToolCall:
		w.call(v.Tool, depth+1)
	case ViewImage:
		w.image(v.Image)
	case ViewDiff:
		w.write("diff +" + strconv.Itoa(v.Diff.Added) + " -" + strconv.Itoa(v.Diff.Deleted))
		for _, l := range v.Diff.Lines {
			w.line(depth)
			w.write(l.Text)
		}
		if v.Diff.Rest != "" {
			w.line(depth)
			w.write(strings.TrimSuffix(v.Diff.Rest, "\n"))
		}
	case ViewMarkdown:
		w.write(v.Text)
	case ViewLink:
		w.link(v.Link)
	case ViewDate:
		w.write(v.Time.Format("2006-01-02 15:04:05 UTC"))
	case ViewMoney:
		w.write(v.Amount + " " + v.Currency)
	}
}

// call writes a tool call: its name, then its arguments one a line.
func (w *textWriter) call(c *ToolCall, depth int) {
	w.write("Tool call: " + c.Name)
	if c.Args == nil {
		w.write(" " + c.ArgsText)
		return
	}
	for _, a := range c.Args.Members() {
		w.line(depth)
		w.write(a.Key + ": ")
		w.value(a, depth+1)
	}
}

// image writes what an image is, never its data.
func (w *textWriter) image(img *Image) {
	switch {
	case img.DataURL != "":
		w.write("[image: " + img.Type + ", " + Plural(img.Bytes, "byte") + "]")
	case img.URL != nil:
		w.write("[image, not loaded: ")
		w.link(img.URL)
		w.write("]")
	default:
		w.write("[image not shown: " + img.Refused + "]")
	}
}

// link writes a URL, marked when it leads into a private network.
func (w *textWriter) link(l *Link) {
	w.write(l.URL)
	if l.Private {
		w.write(" (private address)")
	}
}

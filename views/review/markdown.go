package review

import (
	"bytes"

	"github.com/a-h/templ"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"

	"github.com/arbiterhq/arbiter/internal/taskview"
)

// markdown renders a task's Markdown safely: goldmark's HTML renderer
// without html.WithUnsafe leaves raw HTML out, and safeLinks keeps only
// links to public http and https addresses (with rel="noopener noreferrer
// nofollow") and turns images into such links, so that nothing in the
// document is loaded into the reviewer's browser or runs there. A task
// list's checkboxes are named by their item's text (labelledCheckBoxes).
var markdown = goldmark.New(
	goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.TaskList),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(safeLinks{}, 100))),
	// Before the task list's own renderer (500), which leaves the box unnamed.
	goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(labelledCheckBoxes{}, 100))),
)

// linkRel is the rel of every link a task's content makes.
const linkRel = "noopener noreferrer nofollow"

// renderMarkdown is the HTML of a Markdown document from a task's context,
// or its text when goldmark fails.
func renderMarkdown(src string) templ.Component {
	var buf bytes.Buffer
	if err := markdown.Convert([]byte(src), &buf); err != nil {
		return templ.Raw(templ.EscapeString(src))
	}
	return templ.Raw(buf.String())
}

// safeLinks rewrites a Markdown document's links and images: a link to
// anything but a public http or https address keeps its text and loses
// its link (javascript:, data:, relative paths, a private network); an
// image becomes a link to where it is, labelled as an image.
type safeLinks struct{}

// Transform implements parser.ASTTransformer.
func (safeLinks) Transform(doc *ast.Document, reader text.Reader, _ parser.Context) {
	var links []ast.Node
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			switch n.(type) {
			case *ast.Link, *ast.AutoLink, *ast.Image:
				links = append(links, n)
			}
		}
		return ast.WalkContinue, nil
	})
	source := reader.Source()
	for _, n := range links {
		switch n := n.(type) {
		case *ast.Link:
			if !publicURL(string(n.Destination)) {
				unwrap(n)
				continue
			}
			n.Title = nil
			n.SetAttributeString("rel", []byte(linkRel))
		case *ast.AutoLink:
			u := string(n.URL(source))
			if !publicURL(u) {
				n.Parent().ReplaceChild(n.Parent(), n, ast.NewString(n.Label(source)))
				continue
			}
			n.SetAttributeString("rel", []byte(linkRel))
		case *ast.Image:
			label := ast.NewString([]byte("image: "))
			if !publicURL(string(n.Destination)) {
				n.InsertBefore(n, n.FirstChild(), label)
				unwrap(n)
				continue
			}
			link := ast.NewLink()
			link.Destination = n.Destination
			link.SetAttributeString("rel", []byte(linkRel))
			link.AppendChild(link, label)
			for c := n.FirstChild(); c != nil; {
				next := c.NextSibling()
				link.AppendChild(link, c)
				c = next
			}
			n.Parent().ReplaceChild(n.Parent(), n, link)
		}
	}
}

// unwrap puts n's children in its place.
func unwrap(n ast.Node) {
	parent := n.Parent()
	for c := n.FirstChild(); c != nil; {
		next := c.NextSibling()
		parent.InsertBefore(parent, n, c)
		c = next
	}
	parent.RemoveChild(parent, n)
}

// publicURL reports whether u is an absolute http or https URL to a
// public host: the only links a task's content may make.
func publicURL(u string) bool {
	l := taskview.LinkOf(u)
	return l != nil && !l.Private
}

// labelledCheckBoxes renders a Markdown task list's checkbox ("- [x] Call
// the customer") as goldmark does, read-only, and names it by the text of
// its item, so that a screen reader says what was done and an accessibility
// check finds no form field without a label.
type labelledCheckBoxes struct{}

// RegisterFuncs implements renderer.NodeRenderer.
func (labelledCheckBoxes) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(extast.KindTaskCheckBox, renderCheckBox)
}

// maxCheckBoxLabel bounds the label taken from an item's text, in bytes.
const maxCheckBoxLabel = 200

// renderCheckBox writes a task list's checkbox, checked or not, disabled,
// with its item's text as its aria-label ("Task" when the item has none).
func renderCheckBox(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	var label []byte
	for n := node.NextSibling(); n != nil && len(label) < maxCheckBoxLabel; n = n.NextSibling() {
		label = appendText(label, source, n)
	}
	label = bytes.TrimSpace(label)
	if len(label) > maxCheckBoxLabel {
		label = append(bytes.ToValidUTF8(label[:maxCheckBoxLabel], nil), "…"...)
	}
	if len(label) == 0 {
		label = []byte("Task")
	}
	_, _ = w.WriteString(`<input type="checkbox" disabled=""`)
	if node.(*extast.TaskCheckBox).IsChecked {
		_, _ = w.WriteString(` checked=""`)
	}
	_, _ = w.WriteString(` aria-label="`)
	_, _ = w.Write(util.EscapeHTML(label))
	_, _ = w.WriteString(`"> `)
	return ast.WalkContinue, nil
}

// appendText appends the text n shows (its text, its strings, its
// children's), without markup.
func appendText(dst, source []byte, n ast.Node) []byte {
	switch n := n.(type) {
	case *ast.Text:
		dst = append(dst, n.Value(source)...)
		if n.SoftLineBreak() || n.HardLineBreak() {
			dst = append(dst, ' ')
		}
		return dst
	case *ast.String:
		return append(dst, n.Value...)
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		dst = appendText(dst, source, c)
	}
	return dst
}

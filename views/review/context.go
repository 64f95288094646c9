package review

import (
	"strings"

	"github.com/arbiterhq/arbiter"
	"github.com/arbiterhq/arbiter/internal/taskview"
)

// contextOf prepares a task's context for the desk, or returns nil when the
// task has none: the bounded tree, with its values of well-known shapes
// given their views (see package taskview).
func contextOf(t *arbiter.Task) *taskview.Context {
	return taskview.Parse(t.Context, t.Display)
}

// cutNote ends the raw JSON when it was cut.
func cutNote(c *taskview.Context) string {
	if c.RawCut {
		return "… (cut here)"
	}
	return ""
}

// multiline says whether a string is shown as a block under its key.
func multiline(n *taskview.Node) bool {
	return strings.Contains(n.Text, "\n") || n.More != ""
}

// scalarClass colours a scalar by its kind.
func scalarClass(n *taskview.Node) string {
	switch n.Kind {
	case taskview.String:
		if multiline(n) {
			return "ctx-text"
		}
		return "ctx-str"
	case taskview.Number:
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
func plural(n int, unit string) string { return taskview.Plural(n, unit) }

// cutText splits s into its first part, at most chars characters and lines
// lines, and the rest.
func cutText(s string, chars, lines int) (shown, rest string) {
	return taskview.CutText(s, chars, lines)
}

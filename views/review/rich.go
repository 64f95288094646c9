package review

import (
	"strconv"
	"strings"
	"time"

	"github.com/arbiterhq/arbiter/internal/taskview"
)

// How much of a view shows before the rest folds behind "show more".
const (
	// messageChars and messageLines bound the part of a message shown
	// at first: more than a tree's string, since a transcript is read.
	messageChars = 2000
	messageLines = 40
	// diffShownLines is how many lines of a diff show at first.
	diffShownLines = 80
)

// cutMessage splits a message's text into the part shown at first and the
// rest.
func cutMessage(s string) (shown, rest string) {
	return taskview.CutText(s, messageChars, messageLines)
}

// roleClass colours a message by its role.
func roleClass(role string) string {
	switch strings.ToLower(role) {
	case "user":
		return "rv-msg rv-msg-user"
	case "assistant", "model":
		return "rv-msg rv-msg-assistant"
	case "tool", "function":
		return "rv-msg rv-msg-tool"
	}
	return "rv-msg rv-msg-system"
}

// shownMessages and foldedMessages split a conversation's messages at
// taskview.ShownMessages.
func shownMessages(v *taskview.View) []taskview.Message {
	return v.Messages[:min(len(v.Messages), taskview.ShownMessages)]
}

func foldedMessages(v *taskview.View) []taskview.Message {
	return v.Messages[min(len(v.Messages), taskview.ShownMessages):]
}

// diffLines splits a diff's marked lines into those shown at first and
// those folded.
func diffLines(d *taskview.Diff) (shown, folded []taskview.DiffLine) {
	n := min(len(d.Lines), diffShownLines)
	return d.Lines[:n], d.Lines[n:]
}

// diffFolded says how many lines of a diff fold behind "show more".
func diffFolded(d *taskview.Diff) int {
	_, folded := diffLines(d)
	return len(folded) + strings.Count(d.Rest, "\n") + boolInt(d.Rest != "" && !strings.HasSuffix(d.Rest, "\n"))
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// diffClass colours a line of a diff.
func diffClass(k taskview.DiffLineKind) string {
	switch k {
	case taskview.DiffAdded:
		return "diff-add"
	case taskview.DiffDeleted:
		return "diff-del"
	case taskview.DiffHunk:
		return "diff-hunk"
	case taskview.DiffHeader:
		return "diff-meta"
	}
	return "diff-ctx"
}

// diffStat is a diff's count of added and deleted lines.
func diffStat(d *taskview.Diff) string {
	return "+" + strconv.Itoa(d.Added) + " −" + strconv.Itoa(d.Deleted)
}

// diffLabel names a diff's region for a screen reader: "Diff: 1 line
// added, 2 lines deleted".
func diffLabel(d *taskview.Diff) string {
	return "Diff: " + plural(d.Added, "line") + " added, " + plural(d.Deleted, "line") + " deleted"
}

// dateText is a date as the desk shows it: in UTC, to the second.
func dateText(t time.Time) string {
	return t.Format("2006-01-02 15:04:05 UTC")
}

// imageCaption says what a shown data URL is: "PNG image, 12 KiB".
func imageCaption(img *taskview.Image) string {
	kind := strings.ToUpper(strings.TrimPrefix(img.Type, "image/"))
	if img.Bytes < 1024 {
		return kind + " image, " + plural(img.Bytes, "byte")
	}
	return kind + " image, " + strconv.Itoa(img.Bytes>>10) + " KiB"
}

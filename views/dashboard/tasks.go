package dashboard

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/arbiterhq/arbiter"
)

// statusLabel names a task status for people.
func statusLabel(status string) string {
	switch status {
	case arbiter.StatusPending:
		return "Pending"
	case arbiter.StatusAgentRunning:
		return "With the verifier"
	case arbiter.StatusHumanNeeded:
		return "Waiting for a human"
	case arbiter.StatusCompleted:
		return "Completed"
	}
	return status
}

// statusColour is a task status's badge colour.
func statusColour(status string) string {
	switch status {
	case arbiter.StatusCompleted:
		return "green"
	case arbiter.StatusHumanNeeded:
		return "amber"
	case arbiter.StatusAgentRunning:
		return "blue"
	}
	return "grey"
}

// orDash is s, or an en dash standing for nothing.
func orDash(s *string) string {
	if s == nil || *s == "" {
		return "–"
	}
	return *s
}

// percent writes a confidence as a percentage, or an en dash.
func percent(c *float64) string {
	if c == nil {
		return "–"
	}
	return strconv.Itoa(int(*c*100+0.5)) + "%"
}

// MaxContextPreviewBytes bounds the context a task's page shows: past it,
// the indented JSON is cut and the page says how much is left out.
const MaxContextPreviewBytes = 16 << 10

// contextPreview is a task's context indented for reading, at most
// MaxContextPreviewBytes of it, and how many bytes of the indented text were
// left out. It is "" for a task without a context.
func contextPreview(raw json.RawMessage) (text string, omitted int) {
	if len(raw) == 0 {
		return "", 0
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		buf.Reset()
		buf.Write(raw)
	}
	b := buf.Bytes()
	if len(b) <= MaxContextPreviewBytes {
		return string(b), 0
	}
	cut := MaxContextPreviewBytes
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return string(b[:cut]), len(b) - cut
}

// formatBytes writes a size for people: 812 bytes, 14 KB, 2.3 MB.
func formatBytes(n int) string {
	switch {
	case n < 1024:
		return strconv.Itoa(n) + " bytes"
	case n < 1024*1024:
		return strconv.Itoa((n+512)/1024) + " KB"
	}
	return strconv.FormatFloat(float64(n)/(1024*1024), 'f', 1, 64) + " MB"
}

// attemptWho names who made an attempt: the reviewer, or the verifier's
// model.
func attemptWho(a arbiter.Attempt) string {
	if a.Tier == arbiter.TierHuman {
		return "Reviewer " + orDash(a.Reviewer)
	}
	if a.Model != nil && *a.Model != "" {
		return "Verifier " + *a.Model
	}
	return "Verifier"
}

func itoa(n int) string { return strconv.Itoa(n) }

// Package review holds the reviewer site's pages: the human queue, the task
// on the reviewer's desk, and the anonymous demo.
package review

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/arbiterhq/arbiter"
)

// QueueView is the account's queue of tasks waiting for a human.
type QueueView struct {
	Tasks  []*arbiter.Task
	Total  int
	Notice string // a message after the last decision
	Now    time.Time
}

// TaskView is one task on the reviewer's desk, a real one or a demo one.
type TaskView struct {
	Task *arbiter.Task
	// Action is where the verdict form posts.
	Action string
	// Prev and Next are the neighbouring tasks' pages; "" at the ends.
	Prev, Next string
	// Position counts from 1 within Total tasks of the queue; 0 when the
	// task is not in the queue (decided already, say).
	Position, Total int
	// Notice reports the previous decision; Error why this one failed.
	Notice, Error string
	// Demo marks the anonymous demo, with how many verdicts this visitor
	// has given.
	Demo     bool
	DemoDone int
	Now      time.Time
}

// WelcomeView is the reviewer site for a visitor who is not signed in.
type WelcomeView struct {
	SignInURL string
	DemoTasks int
}

// DemoDoneView ends the demo.
type DemoDoneView struct {
	Done, Total int
}

// contextJSON formats a task's context for reading, or "" when it has none.
func contextJSON(t *arbiter.Task) string {
	if len(t.Context) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, t.Context, "", "  "); err != nil {
		return string(t.Context)
	}
	return buf.String()
}

// shortcut is the key that picks the i-th verdict, "" past the ninth.
func shortcut(i int) string {
	if i >= 9 {
		return ""
	}
	return strconv.Itoa(i + 1)
}

// percent writes a confidence as a percentage.
func percent(c *float64) string {
	if c == nil {
		return "–"
	}
	return strconv.Itoa(int(*c*100+0.5)) + "%"
}

func deref(s *string, none string) string {
	if s == nil || *s == "" {
		return none
	}
	return *s
}

func itoa(n int) string { return strconv.Itoa(n) }

package arbiter

import (
	"encoding/base64"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Page sizes of an account's task list.
const (
	DefaultTaskPageSize = 20
	MaxTaskPageSize     = 100
)

// TaskStatuses lists every task status, in lifecycle order.
var TaskStatuses = []string{StatusPending, StatusAgentRunning, StatusHumanNeeded, StatusCompleted}

// ValidTaskStatus reports whether s is one of TaskStatuses.
func ValidTaskStatus(s string) bool {
	for _, status := range TaskStatuses {
		if s == status {
			return true
		}
	}
	return false
}

// TaskFilter selects one page of an account's tasks, newest first. Empty
// fields match every task; the label filters (task type, source,
// touchpoint) match exactly.
type TaskFilter struct {
	Status     string
	TaskType   string
	Source     string
	Touchpoint string
	FinalTier  string // TierAgent or TierHuman: completed tasks decided by that tier

	// CreatedAfter and CreatedBefore bound created_at, both exclusive.
	CreatedAfter, CreatedBefore *Timestamp

	// After continues the list after that position (exclusive): the
	// cursor of the previous page's last task. Nil starts at the newest.
	After *TaskCursor

	// Limit is the page size, 1 to MaxTaskPageSize; 0 means
	// DefaultTaskPageSize.
	Limit int
}

// Validate checks the filter and fills in the default page size. Every
// failure is an EINVALID *Error naming the field at fault.
func (f *TaskFilter) Validate() error {
	if f.Status != "" && !ValidTaskStatus(f.Status) {
		return Errorf(EINVALID, "status must be one of %s.", strings.Join(TaskStatuses, ", "))
	}
	if f.FinalTier != "" && f.FinalTier != TierAgent && f.FinalTier != TierHuman {
		return Errorf(EINVALID, "final_tier must be %s or %s.", TierAgent, TierHuman)
	}
	for _, label := range []struct{ name, value string }{
		{"task_type", f.TaskType}, {"source", f.Source}, {"touchpoint", f.Touchpoint},
	} {
		if utf8.RuneCountInString(label.value) > MaxLabelChars || !utf8.ValidString(label.value) {
			return Errorf(EINVALID, "%s must be valid text of at most %d characters.", label.name, MaxLabelChars)
		}
	}
	switch {
	case f.Limit == 0:
		f.Limit = DefaultTaskPageSize
	case f.Limit < 1 || f.Limit > MaxTaskPageSize:
		return Errorf(EINVALID, "limit must be between 1 and %d.", MaxTaskPageSize)
	}
	if f.After != nil && !ValidTaskID(f.After.ID) {
		return errBadCursor
	}
	return nil
}

// TaskPage is one page of an account's tasks, newest first.
type TaskPage struct {
	Tasks []*Task
	// HasMore reports whether tasks follow the last one of the page.
	HasMore bool
}

// Next returns the cursor that continues after the page, or nil on the
// last page.
func (p TaskPage) Next() *TaskCursor {
	if !p.HasMore || len(p.Tasks) == 0 {
		return nil
	}
	c := CursorOf(p.Tasks[len(p.Tasks)-1])
	return &c
}

// TaskCursor is a position in an account's task list, which is ordered by
// (created_at, id), newest first: the key of the task before the position.
type TaskCursor struct {
	CreatedAt Timestamp
	ID        string
}

// CursorOf returns the position right after t.
func CursorOf(t *Task) TaskCursor { return TaskCursor{CreatedAt: t.CreatedAt, ID: t.ID} }

// String encodes the cursor for a URL. Callers treat it as opaque: it is
// read back only by ParseTaskCursor.
func (c TaskCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(int64(c.CreatedAt), 10) + "." + c.ID))
}

var errBadCursor = Errorf(EINVALID, "The page cursor is not valid; start again from the first page.")

// ParseTaskCursor reads a cursor made by TaskCursor.String. Anything else
// is EINVALID.
func ParseTaskCursor(s string) (TaskCursor, error) {
	if len(s) > 128 {
		return TaskCursor{}, errBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return TaskCursor{}, errBadCursor
	}
	ms, id, ok := strings.Cut(string(raw), ".")
	if !ok || !ValidTaskID(id) {
		return TaskCursor{}, errBadCursor
	}
	created, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || created < 0 {
		return TaskCursor{}, errBadCursor
	}
	return TaskCursor{CreatedAt: Timestamp(created), ID: id}, nil
}

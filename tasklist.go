package arbiter

import (
	"encoding/base64"
	"maps"
	"math"
	"net/url"
	"slices"
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
var TaskStatuses = []string{StatusPending, StatusAgentRunning, StatusHumanNeeded, StatusCompleted, StatusExpired}

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
	FinalTier  string // TierAgent, TierHuman or TierFallback: completed tasks decided by that tier

	// CreatedAfter and CreatedBefore bound created_at, both exclusive.
	CreatedAfter, CreatedBefore *Timestamp

	// After continues the list after that position (exclusive): the
	// cursor of the previous page's last task. Nil starts at the newest.
	After *TaskCursor

	// StartingAfter continues the list after the account's task with this
	// id, as the API's starting_after does; the store finds its position.
	// It may not be set with After.
	StartingAfter string

	// Limit is the page size, 1 to MaxTaskPageSize; 0 means
	// DefaultTaskPageSize.
	Limit int
}

// Validate checks the filter and fills in the default page size. Every
// failure is an EINVALID *Error naming the field at fault.
func (f *TaskFilter) Validate() error {
	if f.Status != "" && !ValidTaskStatus(f.Status) {
		return FieldErrorf("status", "status must be one of %s.", strings.Join(TaskStatuses, ", "))
	}
	if f.FinalTier != "" && f.FinalTier != TierAgent && f.FinalTier != TierHuman && f.FinalTier != TierFallback {
		return FieldErrorf("final_tier", "final_tier must be %s, %s or %s.", TierAgent, TierHuman, TierFallback)
	}
	for _, label := range []struct{ name, value string }{
		{"task_type", f.TaskType}, {"source", f.Source}, {"touchpoint", f.Touchpoint},
	} {
		if err := checkLabel(label.name, label.value); err != nil {
			return err
		}
	}
	switch {
	case f.Limit == 0:
		f.Limit = DefaultTaskPageSize
	case f.Limit < 1 || f.Limit > MaxTaskPageSize:
		return FieldErrorf("limit", "limit must be between 1 and %d.", MaxTaskPageSize)
	}
	if f.After != nil && !ValidTaskID(f.After.ID) {
		return errBadCursor
	}
	if f.StartingAfter != "" {
		if f.After != nil {
			return Errorf(EINVALID, "A list continues after a cursor or after a task, not both.")
		} else if !ValidTaskID(f.StartingAfter) {
			return ErrStartingAfterUnknown
		}
	}
	return nil
}

// ErrStartingAfterUnknown is the EINVALID error of a starting_after that is
// not the id of one of the account's tasks.
var ErrStartingAfterUnknown = FieldErrorf("starting_after", "starting_after must be the id of one of the account's tasks.")

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

// maxEpochSeconds bounds the times a list query accepts: the last second of
// the year 9999.
const maxEpochSeconds = 253402300799

// taskListParameters are the query parameters of GET /v1/tasks.
var taskListParameters = []string{"status", "task_type", "source", "touchpoint", "final_tier",
	"created_after", "created_before", "limit", "starting_after"}

// ParseTaskListQuery reads the query of GET /v1/tasks: status, task_type,
// source, touchpoint, final_tier, created_after, created_before (epoch
// seconds, both exclusive), limit and starting_after, each at most once and
// none of them empty. Every failure, an unknown parameter among them, is an
// EINVALID *Error naming the parameter; the filter it returns is validated.
func ParseTaskListQuery(rawQuery string) (TaskFilter, error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return TaskFilter{}, Errorf(EINVALID, "The query string could not be read; escape it as a URL query.")
	}
	var f TaskFilter
	for _, name := range slices.Sorted(maps.Keys(q)) {
		values := q[name]
		if !slices.Contains(taskListParameters, name) {
			return TaskFilter{}, Errorf(EINVALID, "%.64q is not a parameter of the task list; it takes %s.", name, strings.Join(taskListParameters, ", "))
		} else if len(values) != 1 {
			return TaskFilter{}, FieldErrorf(name, "%s may be given once.", name)
		}
		v := values[0]
		if v == "" {
			return TaskFilter{}, FieldErrorf(name, "%s must not be empty; leave it out to match every task.", name)
		}
		switch name {
		case "status":
			f.Status = v
		case "task_type":
			f.TaskType = v
		case "source":
			f.Source = v
		case "touchpoint":
			f.Touchpoint = v
		case "final_tier":
			f.FinalTier = v
		case "created_after", "created_before":
			ts, err := parseEpochSeconds(name, v)
			if err != nil {
				return TaskFilter{}, err
			}
			if name == "created_after" {
				f.CreatedAfter = &ts
			} else {
				f.CreatedBefore = &ts
			}
		case "limit":
			n, ok := parseSmallInt(v)
			if !ok || n < 1 || n > MaxTaskPageSize {
				return TaskFilter{}, FieldErrorf("limit", "limit must be a whole number from 1 to %d.", MaxTaskPageSize)
			}
			f.Limit = n
		case "starting_after":
			f.StartingAfter = v
		}
	}
	if err := f.Validate(); err != nil {
		return TaskFilter{}, err
	}
	return f, nil
}

// parseEpochSeconds reads a time given as Unix epoch seconds, fractional or
// not, as the API writes them.
func parseEpochSeconds(name, v string) (Timestamp, error) {
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(secs) || secs < 0 || secs > maxEpochSeconds {
		return 0, FieldErrorf(name, "%s must be a time in seconds since the Unix epoch, such as 1795415525 or 1795415525.173.", name)
	}
	return Timestamp(math.Round(secs * 1000)), nil
}

// parseSmallInt reads 1 to 4 decimal digits, with no sign or space.
func parseSmallInt(v string) (int, bool) {
	if len(v) == 0 || len(v) > 4 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
		n = n*10 + int(v[i]-'0')
	}
	return n, true
}

// checkLabel is the one rule for a task label (task_type, touchpoint or
// source), on create and in a list filter alike: valid UTF-8 of at most
// MaxLabelChars characters, without NUL, which Postgres cannot store or
// compare in text.
func checkLabel(name, value string) error {
	if !utf8.ValidString(value) || utf8.RuneCountInString(value) > MaxLabelChars {
		return FieldErrorf(name, "%s must be valid text of at most %d characters.", name, MaxLabelChars)
	} else if strings.IndexByte(value, 0) >= 0 {
		return FieldErrorf(name, "%s must not contain NUL characters.", name)
	}
	return nil
}

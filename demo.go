package arbiter

import (
	"context"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// DemoTaskIDPrefix starts the id of every task in the curated demo queue.
const DemoTaskIDPrefix = "tsk_demo_"

// Limits on a demo verdict submission.
const (
	MaxRationaleChars     = 4000
	MaxAnonSessionIDChars = 128
)

// DemoTask is a task of the curated demo queue as /demo/tasks lists it.
type DemoTask struct {
	ID              string          `json:"id"`
	Source          string          `json:"source"`
	Prompt          string          `json:"prompt"`
	AllowedVerdicts []string        `json:"allowed_verdicts"`
	Context         json.RawMessage `json:"context"`
	CreatedAt       Timestamp       `json:"created_at"`
}

// DemoVerdict is an anonymous verdict on a demo task, kept as evaluation
// signal. It never changes the demo task.
type DemoVerdict struct {
	ID            string    `json:"id"`
	TaskID        string    `json:"task_id"`
	Verdict       string    `json:"verdict"`
	Rationale     *string   `json:"rationale"`
	AnonSessionID *string   `json:"anon_session_id"`
	CreatedAt     Timestamp `json:"created_at"`
}

// DemoVerdictCreate is a validated demo verdict submission.
type DemoVerdictCreate struct {
	TaskID        string
	Verdict       string
	Rationale     *string
	AnonSessionID *string
}

type demoVerdictRequest struct {
	TaskID        *string `json:"task_id"`
	Verdict       *string `json:"verdict"`
	Rationale     *string `json:"rationale"`
	AnonSessionID *string `json:"anon_session_id"`
}

var demoVerdictTypeErrors = map[string]string{
	"task_id":         "task_id must be a string.",
	"verdict":         "verdict must be a string.",
	"rationale":       "rationale must be a string.",
	"anon_session_id": "anon_session_id must be a string.",
}

// ParseDemoVerdictCreate decodes and validates a demo verdict body.
// Every failure is an EINVALID *Error.
func ParseDemoVerdictCreate(body []byte) (DemoVerdictCreate, error) {
	var req demoVerdictRequest
	if err := DecodeJSONStrict(body, &req, demoVerdictTypeErrors); err != nil {
		return DemoVerdictCreate{}, err
	}
	if req.TaskID == nil || *req.TaskID == "" {
		return DemoVerdictCreate{}, Errorf(EINVALID, "task_id is required.")
	} else if req.Verdict == nil || *req.Verdict == "" {
		return DemoVerdictCreate{}, Errorf(EINVALID, "verdict is required.")
	}
	in := DemoVerdictCreate{TaskID: *req.TaskID, Verdict: *req.Verdict}
	if r := req.Rationale; r != nil && *r != "" {
		if utf8.RuneCountInString(*r) > MaxRationaleChars || strings.IndexByte(*r, 0) >= 0 {
			return DemoVerdictCreate{}, Errorf(EINVALID, "rationale must be at most %d characters of text.", MaxRationaleChars)
		}
		in.Rationale = r
	}
	if s := req.AnonSessionID; s != nil && *s != "" {
		if utf8.RuneCountInString(*s) > MaxAnonSessionIDChars || strings.IndexByte(*s, 0) >= 0 {
			return DemoVerdictCreate{}, Errorf(EINVALID, "anon_session_id must be at most %d characters of text.", MaxAnonSessionIDChars)
		}
		in.AnonSessionID = s
	}
	return in, nil
}

// DemoService serves the curated demo queue.
type DemoService interface {
	// ListDemoTasks returns the demo queue, oldest first.
	ListDemoTasks(ctx context.Context) ([]*DemoTask, error)

	// FindDemoTask returns a demo task as a Task, for the reviewer site's
	// demo mode. Returns ENOTFOUND for any id the demo account does not own.
	FindDemoTask(ctx context.Context, id string) (*Task, error)

	// FindDemoPlace returns where a demo task stands in the demo queue, as
	// FindQueuePlace does for an account's queue.
	FindDemoPlace(ctx context.Context, id string) (QueuePlace, error)

	// CountDemoVerdicts returns how many verdicts an anonymous session has
	// given.
	CountDemoVerdicts(ctx context.Context, anonSessionID string) (int, error)

	// CreateDemoVerdict records a verdict on a demo task.
	// Returns ENOTFOUND when the demo account owns no task with the id and
	// EINVALID when the verdict is not one of the task's allowed verdicts.
	CreateDemoVerdict(ctx context.Context, in DemoVerdictCreate) (*DemoVerdict, error)
}

// HealthService reports whether the store answers and a worker is alive.
type HealthService interface {
	// Health returns nil when healthy, else EUNAVAILABLE with the reason.
	Health(ctx context.Context) error
}

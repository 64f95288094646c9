package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// ExecutionClaim claims the execution of a task's approved action
// (ClaimExecution).
type ExecutionClaim struct {
	// Digest is the digest of the action about to run: the task's
	// approved action's.
	Digest string `json:"digest"`
	// ClaimID names this claim: new for each claim (a random id), the
	// same when the claim is sent again.
	ClaimID string `json:"claim_id"`
	// Executor says who runs the action, for people; optional.
	Executor string `json:"executor,omitempty"`
	// Verdicts, when set, are the final verdicts that approve running
	// the action; a task decided otherwise is refused.
	Verdicts []string `json:"verdicts,omitempty"`
}

// Execution is the claim that holds on a task's approved action.
type Execution struct {
	TaskID    string
	Digest    string
	ClaimID   string
	Executor  string
	ClaimedAt time.Time
}

// executionWire is Execution as the API spells it.
type executionWire struct {
	TaskID    string `json:"task_id"`
	Digest    string `json:"digest"`
	ClaimID   string `json:"claim_id"`
	Executor  string `json:"executor"`
	ClaimedAt epoch  `json:"claimed_at"`
}

// UnmarshalJSON reads the API's Execution object.
func (e *Execution) UnmarshalJSON(b []byte) error {
	var w executionWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*e = Execution{w.TaskID, w.Digest, w.ClaimID, w.Executor, w.ClaimedAt.time()}
	return nil
}

// MarshalJSON writes the API's Execution object.
func (e Execution) MarshalJSON() ([]byte, error) {
	return json.Marshal(executionWire{e.TaskID, e.Digest, e.ClaimID, e.Executor, epoch(e.ClaimedAt)})
}

// ClaimExecution claims the execution of the approved action of task id:
// run the action only when it returns no error, and then once. The first
// claim of a task holds; the same claim sent again (same ClaimID) is
// answered the same, so the client retries it when its outcome is
// unknown. Another claim gets an error for which IsAlreadyExecuted is
// true; a task not decided, without an action, decided with another
// verdict or approving another digest gets one for which IsConflict is.
func (c *Client) ClaimExecution(ctx context.Context, id string, in ExecutionClaim) (*Execution, error) {
	var e Execution
	cl := call{method: http.MethodPost, path: "/v1/tasks/" + url.PathEscape(id) + "/execution", auth: true, body: in,
		repeatable: true, noRetryConflict: true}
	if err := c.do(ctx, cl, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// CodeAlreadyExecuted is the Error.Code of a claim refused because another
// claim holds the execution of the task's action.
const CodeAlreadyExecuted = "already_executed"

// IsAlreadyExecuted reports whether the server refused an execution claim
// because another claim holds: the action ran, or is running, elsewhere.
func IsAlreadyExecuted(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusConflict && e.Code == CodeAlreadyExecuted
}

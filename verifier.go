package arbiter

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Verification is a verifier's answer on one task.
type Verification struct {
	// Decided is false when the verifier declines to answer (the none
	// backend, or no rule matched); the task then goes to a human.
	Decided    bool
	Verdict    string
	Confidence float64 // in [0, 1]
	Rationale  string
	Model      string // which backend or model answered, for the attempt record
}

// Verifier is the agent tier: an automated verifier backend.
type Verifier interface {
	// Verify asks for a verdict on the task within ctx's deadline, the one
	// limit on the call. An error is a failed attempt that the worker
	// retries; a *VerifierError says why in words fit for API callers.
	Verify(ctx context.Context, t *Task) (Verification, error)
}

// Reasons a verifier call failed, as a failed attempt's error records them
// for API callers: short, and free of addresses, keys and the model
// server's own words, which go to the log with the full error.
const (
	VerifierUnreachable          = "the verifier could not be reached"
	VerifierTimedOut             = "the verifier timed out"
	VerifierUnreadable           = "the verifier's answer could not be read"
	VerifierRefused              = "the verifier refused to answer"
	VerifierVerdictOutsideSet    = "the verifier answered a verdict outside the allowed set"
	VerifierConfidenceOutOfRange = "the verifier's confidence is not between 0 and 1"
	VerifierFailed               = "the verifier failed"
	// VerifierLost is a call whose worker stopped (was killed, or hung
	// past its lease) before it recorded an answer.
	VerifierLost = "the worker making the call stopped before it answered"
	// VerifierThrottled is a task sent to a human because its calls were
	// still throttled (ThrottledError) when its deadline neared.
	VerifierThrottled = "calls to the verifier were throttled until the deadline neared"
)

// VerifierHTTPStatus is the reason for a model server that answered with
// the HTTP status code, e.g. "the verifier answered HTTP 500".
func VerifierHTTPStatus(code int) string { return fmt.Sprintf("the verifier answered HTTP %d", code) }

// VerifierError is a failed verifier call: Reason is one of the reasons
// above, fit for API callers; Err is the full cause, for the log only.
type VerifierError struct {
	Reason string
	Err    error
}

// Error returns the reason and the full cause.
func (e *VerifierError) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

// Unwrap returns the full cause.
func (e *VerifierError) Unwrap() error { return e.Err }

// ThrottledError is a call the verifier's provider turned away for now
// (HTTP 429, or 503 with Retry-After), or one the backend's limiter held
// back while the provider throttles. It is not the verifier failing on the
// task: NextAgentStep counts no failure and has the task asked again after
// RetryAfter.
type ThrottledError struct {
	// RetryAfter is how long the task waits before its next call: what
	// the provider's Retry-After asked, or the backend's backoff when it
	// asked nothing.
	RetryAfter time.Duration
	// Err is the full cause, for the log only.
	Err error
}

// Error says that the call was throttled, and why.
func (e *ThrottledError) Error() string {
	msg := fmt.Sprintf("throttled; retry after %s", e.RetryAfter)
	if e.Err == nil {
		return msg
	}
	return msg + ": " + e.Err.Error()
}

// Unwrap returns the full cause.
func (e *ThrottledError) Unwrap() error { return e.Err }

// VerifierFailureReason returns what a failed attempt records for the call
// error err: the reason of a *VerifierError, VerifierTimedOut for a
// deadline that passed, and VerifierFailed for anything else, whose words
// could hold what callers must not see.
func VerifierFailureReason(err error) string {
	var ve *VerifierError
	switch {
	case errors.As(err, &ve):
		return ve.Reason
	case errors.Is(err, context.DeadlineExceeded):
		return VerifierTimedOut
	}
	return VerifierFailed
}

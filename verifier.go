package arbiter

import "context"

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
	// Verify asks for a verdict on the task. An error (including a timeout
	// through ctx) is a failed attempt that the worker retries.
	Verify(ctx context.Context, t *Task) (Verification, error)
}

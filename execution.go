package arbiter

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// An execution claim is how whoever runs a task's approved action (the
// gateway, an SDK, an adapter) makes sure it runs at most once: before
// calling the tool it claims the execution of the task's approved action,
// and only the first claim of a task holds. The claim lives beside the
// task, in the store every process that may see the approval reaches, so
// that a retry, a restart or a second process asks the same question and
// gets one answer. A claim repeated with the same claim id (a lost answer,
// retried) is the same claim; any other is refused with
// ReasonAlreadyExecuted. The claim names the digest of the action about to
// run, which must be the approved one.

// Limits on an execution claim.
const (
	MaxClaimIDLen        = 128 // bytes of printable ASCII in claim_id
	MaxExecutorChars     = 200 // characters in executor
	MaxExecutionVerdicts = 64  // entries in verdicts, as in allowed_verdicts
)

// ExecutionClaim is a request to run a task's approved action.
type ExecutionClaim struct {
	// Digest is the digest of the action about to run: the task's
	// approved action's.
	Digest string
	// ClaimID names this claim; the same claim sent again (its answer
	// lost) holds again. 1 to MaxClaimIDLen printable ASCII characters.
	ClaimID string
	// Executor says who runs the action, for people reading the record:
	// "arbiter gateway on host-1", say. Optional.
	Executor string
	// Verdicts, when not empty, are the final verdicts that approve
	// running the action: a task decided otherwise is refused.
	Verdicts []string
}

// Execution is the record of the claim that holds for a task: the action
// (by its digest) it runs, who claimed it and when.
type Execution struct {
	TaskID    string    `json:"task_id"`
	Digest    string    `json:"digest"`
	ClaimID   string    `json:"claim_id"`
	Executor  string    `json:"executor"`
	ClaimedAt Timestamp `json:"claimed_at"`
}

// executionClaimRequest is the wire form of an execution claim.
type executionClaimRequest struct {
	Digest   *string   `json:"digest"`
	ClaimID  *string   `json:"claim_id"`
	Executor *string   `json:"executor" null:"refuse"`
	Verdicts []*string `json:"verdicts" null:"refuse"`
}

var executionClaimTypeErrors = map[string]string{
	"digest":   "digest must be a string: the digest of the approved action, sha256: and 64 hex digits.",
	"claim_id": "claim_id must be a string of 1 to 128 printable ASCII characters.",
	"executor": "executor must be a string: who runs the action.",
	"verdicts": "verdicts must be an array of the verdicts that approve running the action.",
}

// ParseExecutionClaim decodes and checks the body of an execution claim:
// a digest of the form the server gives ("sha256:" and 64 lowercase hex
// digits), a claim id, and optionally an executor and the verdicts that
// approve running the action. Every failure is an EINVALID *Error naming
// its field.
func ParseExecutionClaim(body []byte) (ExecutionClaim, error) {
	var req executionClaimRequest
	if err := decodeStrict(body, &req, executionClaimTypeErrors, "The request body"); err != nil {
		return ExecutionClaim{}, err
	}
	var c ExecutionClaim
	if req.Digest == nil || !validDigest(*req.Digest) {
		return c, FieldErrorf("digest", "digest is required: the digest of the approved action, sha256: and 64 lowercase hex digits, as the task's approved_action.digest.")
	}
	c.Digest = *req.Digest
	if req.ClaimID == nil {
		return c, FieldErrorf("claim_id", "claim_id is required: 1 to %d printable ASCII characters naming this claim, so that sending it again is the same claim.", MaxClaimIDLen)
	}
	if err := printableASCII(*req.ClaimID, MaxClaimIDLen); err != nil {
		return c, FieldErrorf("claim_id", "claim_id must be 1 to %d printable ASCII characters.", MaxClaimIDLen)
	}
	c.ClaimID = *req.ClaimID
	if req.Executor != nil {
		e := *req.Executor
		if !isText(e) || strings.ContainsFunc(e, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return c, FieldErrorf("executor", "executor must be text without control characters.")
		}
		if utf8.RuneCountInString(e) > MaxExecutorChars {
			return c, FieldErrorf("executor", "executor must be at most %d characters.", MaxExecutorChars)
		}
		c.Executor = e
	}
	if len(req.Verdicts) > MaxExecutionVerdicts {
		return c, FieldErrorf("verdicts", "verdicts may name at most %d verdicts.", MaxExecutionVerdicts)
	}
	for i, v := range req.Verdicts {
		if v == nil || *v == "" {
			return c, FieldErrorf("verdicts", "verdicts must hold verdicts; entry %d is empty.", i)
		}
		c.Verdicts = append(c.Verdicts, *v)
	}
	return c, nil
}

// validDigest reports whether d is a digest as the server writes them.
func validDigest(d string) bool {
	hex, ok := strings.CutPrefix(d, DigestPrefix)
	if !ok || len(hex) != 64 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// printableASCII returns an error unless s is 1 to max printable ASCII
// characters (space to tilde).
func printableASCII(s string, max int) error {
	if len(s) == 0 || len(s) > max {
		return fmt.Errorf("%d bytes", len(s))
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' {
			return fmt.Errorf("byte %d", i)
		}
	}
	return nil
}

// CheckExecution returns nil when the claim c may run t's approved action,
// and an ECONFLICT *Error saying why not otherwise: t has no action, is not
// completed, was decided with a verdict c does not name, or approved
// another action than the one whose digest c gives.
func (t *Task) CheckExecution(c ExecutionClaim) error {
	switch {
	case t.Action == nil:
		return Errorf(ECONFLICT, "Task %s has no action to execute: its create gave none.", t.ID)
	case t.Status != StatusCompleted || t.ApprovedAction == nil || t.FinalVerdict == nil:
		return Errorf(ECONFLICT, "Task %s is %s, not decided: its action may not run yet.", t.ID, t.Status)
	case len(c.Verdicts) > 0 && !slices.Contains(c.Verdicts, *t.FinalVerdict):
		return Errorf(ECONFLICT, "Task %s was decided %q, which is not one of the verdicts that approve running its action (%s): it must not run.",
			t.ID, *t.FinalVerdict, strings.Join(c.Verdicts, ", "))
	case c.Digest != t.ApprovedAction.Digest:
		return Errorf(ECONFLICT, "The digest %s is not the approved action's (%s): run the approved action, whose name and args the task answers as approved_action.",
			c.Digest, t.ApprovedAction.Digest)
	}
	return nil
}

// ErrAlreadyExecuted returns the error of a claim on a task whose action
// was claimed by another claim, prior: ECONFLICT with ReasonAlreadyExecuted,
// saying when and by whom.
func ErrAlreadyExecuted(prior *Execution) error {
	by := ""
	if prior.Executor != "" {
		by = " by " + prior.Executor
	}
	return &Error{Code: ECONFLICT, Reason: ReasonAlreadyExecuted,
		Message: fmt.Sprintf("The action of task %s was already claimed for execution at %s%s; it runs once, and must not run again.",
			prior.TaskID, prior.ClaimedAt.Time().Format("2006-01-02 15:04:05 UTC"), by)}
}

// NewExecutionAuditEvent returns the audit event of the claim e made by
// the actor.
func NewExecutionAuditEvent(accountID string, by Actor, e *Execution) *AuditEvent {
	detail := "task " + e.TaskID + ", action " + ShortDigest(e.Digest)
	if e.Executor != "" {
		detail += ", by " + e.Executor
	}
	return &AuditEvent{AccountID: accountID, Kind: AuditActionExecuted, Actor: cmp.Or(by.Email, "an API key"), Detail: detail,
		ClientIP: by.Client.IP, UserAgent: by.Client.UserAgent}
}

// ExecutionService records the executions of tasks' approved actions.
type ExecutionService interface {
	// ClaimExecution claims the execution of the approved action of the
	// account's task id, and returns the claim that holds: this one, or
	// the same claim (by its ClaimID) made before. Returns ENOTFOUND for
	// an unknown or foreign task, ECONFLICT when CheckExecution refuses,
	// and ECONFLICT with ReasonAlreadyExecuted when another claim holds.
	// The account's audit log records the claim, by the actor.
	ClaimExecution(ctx context.Context, accountID, id string, c ExecutionClaim, by Actor) (*Execution, error)
}

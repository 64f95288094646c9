package arbiter

import (
	"errors"
	"fmt"
	"time"
)

// Error codes shared by every layer. The HTTP layer maps each one to a status
// code; the store and services return them so callers never inspect SQL or
// driver errors.
const (
	EINVALID      = "invalid"      // the caller sent something malformed or out of range
	EUNAUTHORIZED = "unauthorized" // missing, malformed, unknown or revoked credentials
	ENOTFOUND     = "not_found"    // no such object, or not visible to this account
	ECONFLICT     = "conflict"     // the object is not in a state that allows the change
	EMISMATCH     = "mismatch"     // well formed, but an earlier request with the same idempotency key asked for something else
	ERATELIMIT    = "rate_limited" // a quota such as the daily task cap is used up
	ETOOLARGE     = "too_large"    // the request body exceeds the size limit
	EUNAVAILABLE  = "unavailable"  // a dependency such as the store or the worker is down
	EINTERNAL     = "internal"     // a bug or an unexpected failure; never shown in detail
)

// Error is a domain error: a code for programs and a message for people.
// Messages of non-internal errors are safe to show to API callers.
type Error struct {
	Code    string
	Message string
	// Field, on an EINVALID error, names the request field at fault, as
	// the request spells it ("deadline_seconds").
	Field string
	// Reason, when set, is a finer API code than Code's (one of the
	// Reason constants), such as ReasonDailyCap for an ERATELIMIT.
	Reason string
	// RetryAfter, when set on an ERATELIMIT error, tells the caller how long
	// to wait before the quota frees up.
	RetryAfter time.Duration
}

// Error implements the error interface.
func (e *Error) Error() string {
	return fmt.Sprintf("arbiter error: code=%s message=%s", e.Code, e.Message)
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code string, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldErrorf returns an EINVALID *Error about the request field named
// field, with a formatted message that names it too.
func FieldErrorf(field, format string, args ...any) *Error {
	return &Error{Code: EINVALID, Field: field, Message: fmt.Sprintf(format, args...)}
}

// The API codes: what an API answer's "code" says, stable for programs to
// switch on while the sentence beside it may change. APICode derives them.
const (
	CodeInvalidRequest       = "invalid_request"        // EINVALID about no one field
	CodeInvalidField         = "invalid_field"          // EINVALID about the field in "field"
	CodeUnauthorized         = "unauthorized"           // EUNAUTHORIZED
	CodeNotFound             = "not_found"              // ENOTFOUND, or no such route
	CodeConflict             = "conflict"               // ECONFLICT
	CodeIdempotencyMismatch  = "idempotency_mismatch"   // EMISMATCH
	CodeRateLimited          = "rate_limited"           // ERATELIMIT
	CodePayloadTooLarge      = "payload_too_large"      // ETOOLARGE
	CodeUnavailable          = "unavailable"            // EUNAVAILABLE
	CodeInternal             = "internal_error"         // EINTERNAL
	CodeMethodNotAllowed     = "method_not_allowed"     // the route does not take the method
	CodeUnsupportedMediaType = "unsupported_media_type" // the body is not JSON
	CodeHeadersTooLarge      = "headers_too_large"      // the request's header is too large
	CodeForbidden            = "forbidden"              // a cross-origin write to a page
	CodeNotAcceptable        = "not_acceptable"         // the answer's media type is not one the client accepts

	// Reasons: finer codes an *Error may carry in Reason.
	ReasonDailyCap            = "daily_cap_exceeded"    // ERATELIMIT: the account's daily task cap is used up
	ReasonIdempotencyInFlight = "idempotency_in_flight" // ECONFLICT: the key's first request is not finished
	ReasonTaskExpired         = "task_expired"          // ECONFLICT: the task's deadline passed
	ReasonAlreadyExecuted     = "already_executed"      // ECONFLICT: another claim holds the execution of the task's action
)

// APICodes lists every API code, in the order the API's documents list
// them.
var APICodes = []string{
	CodeInvalidRequest, CodeInvalidField, CodeUnauthorized, CodeNotFound, CodeMethodNotAllowed,
	CodeConflict, ReasonIdempotencyInFlight, ReasonTaskExpired, ReasonAlreadyExecuted, CodePayloadTooLarge,
	CodeUnsupportedMediaType, CodeIdempotencyMismatch, CodeRateLimited, ReasonDailyCap,
	CodeHeadersTooLarge, CodeForbidden, CodeNotAcceptable, CodeInternal, CodeUnavailable,
}

// apiCodeOf is the API code of each error code.
var apiCodeOf = map[string]string{
	EINVALID:      CodeInvalidRequest,
	EUNAUTHORIZED: CodeUnauthorized,
	ENOTFOUND:     CodeNotFound,
	ECONFLICT:     CodeConflict,
	EMISMATCH:     CodeIdempotencyMismatch,
	ERATELIMIT:    CodeRateLimited,
	ETOOLARGE:     CodePayloadTooLarge,
	EUNAVAILABLE:  CodeUnavailable,
	EINTERNAL:     CodeInternal,
}

// APICode returns the API code of err (see the Code constants): the first
// *Error's Reason when it has one, invalid_field for an EINVALID naming a
// field, else its code's; internal_error for any other error and "" for
// nil.
func APICode(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case !errors.As(err, &e):
		return CodeInternal
	case e.Reason != "":
		return e.Reason
	case e.Code == EINVALID && e.Field != "":
		return CodeInvalidField
	}
	if c, ok := apiCodeOf[e.Code]; ok {
		return c
	}
	return CodeInternal
}

// ErrorField returns the Field of the first *Error in err's chain, or "".
func ErrorField(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL for
// any other non-nil error and "" for nil.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message of the first *Error in err's chain, or a
// generic sentence for any other error so internal details never leak.
func ErrorMessage(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}

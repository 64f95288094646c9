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

package storelink

import (
	"context"
	"errors"
	"fmt"
)

// Error codes. Each maps to one HTTP status in httpapi; the set is small on
// purpose so that every caller can decide what to do from the code alone.
const (
	EINVALID       = "invalid"              // malformed input: 400
	EUNAUTHORIZED  = "unauthorized"         // no or unknown credentials: 401
	EFORBIDDEN     = "forbidden"            // valid credentials for something else: 403
	EAUTHLIMIT     = "auth_limited"         // this address failed to authenticate too often: 429
	ENOTFOUND      = "not_found"            // 404
	EGONE          = "gone"                 // it existed and is no longer kept: 410
	ECONFLICT      = "conflict"             // the current state does not allow it: 409
	ECURSORAHEAD   = "cursor_ahead"         // a feed's cursor is past its newest event: 409
	ETOOLARGE      = "too_large"            // 413
	EUNSUPPORTED   = "unsupported"          // unsupported media type: 415
	EPRECONDITION  = "precondition_failed"  // the thing is not at the version the caller names: 412
	EUNPROCESSABLE = "unprocessable"        // well-formed but semantically wrong: 422
	ERATELIMIT     = "rate_limited"         // capacity used up: 429
	EBACKLOG       = "too_many_waiting"     // too many of the client's uploads wait: 429
	EBUSY          = "partner_busy"         // the partner holds its share of a shared pool: 429
	EINFLIGHT      = "uploads_in_flight"    // the partner has as many uploads in flight as allowed: 429
	EBODYTIMEOUT   = "body_timeout"         // the body did not arrive in full in time: 408
	ENOSPACE       = "insufficient_storage" // the disk is full, nothing stored: 507
	EINTERNAL      = "internal"             // a bug or an outage: 500
	EUNAVAILABLE   = "unavailable"          // shutting down or database unreachable: 503
)

// Error is the one error type that crosses the domain boundary. Message is
// safe to show to the caller; anything that is not an *Error is an internal
// error whose text is logged but never shown.
type Error struct {
	Code    string
	Message string
	// RetryAfter is set on ERATELIMIT, EBACKLOG and EBUSY (whole seconds after
	// which the same request should fit) and on EUNAVAILABLE (when to try
	// again).
	RetryAfter int
	// Cursor is set on ECURSORAHEAD: the feed's newest cursor.
	Cursor string
}

func (e *Error) Error() string { return fmt.Sprintf("storelink: %s: %s", e.Code, e.Message) }

// Errorf returns an *Error with the code and a formatted, caller-safe message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err, or EINTERNAL when err is not an *Error.
func ErrorCode(err error) string {
	var e *Error
	if err == nil {
		return ""
	} else if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the caller-safe message of err; internal errors get a
// fixed text so that nothing of SQL, paths or secrets leaks.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}

// CursorAhead is the answer to a feed read with a cursor past the feed's
// newest event, newest ("0" when the feed has none yet).
func CursorAhead(after, newest string) *Error {
	if len(after) > 64 {
		after = after[:64]
	}
	return &Error{Code: ECURSORAHEAD, Cursor: newest, Message: fmt.Sprintf(
		"after %q is not an event of this feed, whose newest is %s: this database did not give it out, or has been restored from a backup taken before that event. Read on with after=%s.",
		after, newest, newest)}
}

// NoSpace is the answer to a write that found the disk full, whichever
// database found it: the write is undone, so nothing of it was stored.
func NoSpace() *Error {
	return Errorf(ENOSPACE, "The server has no space left to store this; nothing was stored.")
}

// Ended tells why a call's context ended, for an error that came of it: a
// timeout (the *Error with EUNAVAILABLE that the context was ended with, as
// the API's database deadlines end theirs), or nil with gone set when the
// caller went away (a plain cancellation). A context that has not ended
// gives (nil, false).
func Ended(ctx context.Context) (timeout error, gone bool) {
	if ctx.Err() == nil {
		return nil, false
	}
	if cause := context.Cause(ctx); ErrorCode(cause) == EUNAVAILABLE {
		return cause, false
	}
	return nil, true
}

package openai

import (
	"fmt"
	"strconv"
	"time"
)

// Error is an API error: an HTTP status and OpenAI's error object. Parsers
// and validators return *Error (nil when all is well); keep it as *Error
// rather than storing a nil *Error in an error interface.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Message is for humans; it names the offending parameter and the fix.
	Message string
	// Type is OpenAI's error type ("invalid_request_error", ...).
	Type string
	// Param is the offending request parameter ("max_tokens",
	// "messages[2].role", "kv_transfer_params.remote_port"), or "".
	Param string
	// Code is OpenAI's error code ("model_not_found", ...), or "".
	Code string
	// RetryAfter, when positive, is how long the client should wait
	// before retrying; the HTTP edge sends it as a Retry-After header.
	RetryAfter time.Duration
}

// Error types and codes, as OpenAI spells them.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeNotFound       = "not_found_error"
	TypeRateLimit      = "rate_limit_exceeded"
	TypeServer         = "server_error"

	CodeModelNotFound      = "model_not_found"
	CodeRequestTooLarge    = "request_too_large"
	CodeRateLimitExceeded  = "rate_limit_exceeded"
	CodeServiceUnavailable = "service_unavailable"
)

func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("openai: %d %s (param %s): %s", e.Status, e.Type, e.Param, e.Message)
	}
	return fmt.Sprintf("openai: %d %s: %s", e.Status, e.Type, e.Message)
}

// BadRequest returns a 400 invalid_request_error about param ("" when the
// request as a whole is at fault).
func BadRequest(param, format string, args ...any) *Error {
	return &Error{Status: 400, Type: TypeInvalidRequest, Param: param, Message: fmt.Sprintf(format, args...)}
}

// NotFound returns a 404 not_found_error, for unknown paths or objects.
func NotFound(format string, args ...any) *Error {
	return &Error{Status: 404, Type: TypeNotFound, Message: fmt.Sprintf(format, args...)}
}

// ModelNotFound returns the 404 for a request naming a model this server
// does not serve.
func ModelNotFound(model string) *Error {
	return &Error{Status: 404, Type: TypeNotFound, Param: "model", Code: CodeModelNotFound,
		Message: fmt.Sprintf("The model `%s` does not exist.", model)}
}

// TooLarge returns a 413: the body, or the prompt, is over a limit.
func TooLarge(format string, args ...any) *Error {
	return &Error{Status: 413, Type: TypeInvalidRequest, Code: CodeRequestTooLarge, Message: fmt.Sprintf(format, args...)}
}

// Overloaded returns a 429: the server is at capacity (queue full). A
// positive retryAfter is added to the message and carried in RetryAfter.
func Overloaded(retryAfter time.Duration, format string, args ...any) *Error {
	msg := fmt.Sprintf(format, args...)
	if retryAfter > 0 {
		msg += "; retry after " + retryAfter.String()
	}
	return &Error{Status: 429, Type: TypeRateLimit, Code: CodeRateLimitExceeded, Message: msg, RetryAfter: retryAfter}
}

// Unavailable returns a 503: the server cannot take requests now (starting,
// draining, shutting down).
func Unavailable(format string, args ...any) *Error {
	return &Error{Status: 503, Type: TypeServer, Code: CodeServiceUnavailable, Message: fmt.Sprintf(format, args...)}
}

// Internal returns a 500 server_error.
func Internal(format string, args ...any) *Error {
	return &Error{Status: 500, Type: TypeServer, Message: fmt.Sprintf(format, args...)}
}

// RetryAfterSeconds returns the Retry-After header value for e: whole
// seconds, rounded up, at least 1; "" when e carries no retry hint.
func (e *Error) RetryAfterSeconds() string {
	if e.RetryAfter <= 0 {
		return ""
	}
	s := (e.RetryAfter + time.Second - 1) / time.Second
	return strconv.FormatInt(int64(s), 10)
}

// AppendError appends e as OpenAI's error body:
//
//	{"error":{"message":"…","type":"…","param":"…"|null,"code":"…"|null}}
//
// The same bytes framed with AppendSSE report an error inside a stream.
func AppendError(dst []byte, e *Error) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = appendString(dst, e.Message)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, e.Type)
	dst = append(dst, `,"param":`...)
	dst = appendStringOrNull(dst, e.Param)
	dst = append(dst, `,"code":`...)
	dst = appendStringOrNull(dst, e.Code)
	return append(dst, "}}"...)
}

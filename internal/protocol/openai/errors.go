package openai

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
)

// errorTypes gives an HTTP status the error type of OpenAI's envelope.
// OpenAI documents invalid_request_error for a 400 and server_error for a
// 500; for the other statuses its SDKs raise an error class of their own
// (AuthenticationError, PermissionDeniedError, NotFoundError,
// RateLimitError), whose name the type follows. ErrorType answers for the
// statuses not here.
var errorTypes = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusMethodNotAllowed:      "invalid_request_error",
	http.StatusRequestTimeout:        "invalid_request_error",
	http.StatusRequestEntityTooLarge: "invalid_request_error",
	http.StatusTooManyRequests:       "rate_limit_error",
	http.StatusInternalServerError:   "server_error",
}

// ErrorType is the error type of an OpenAI error answered with an HTTP
// status: the table's, else server_error for a server error and
// invalid_request_error for any other. Every error body Sluice writes in
// OpenAI's envelope without an upstream's own type, its own errors and a
// translated upstream's, takes its type from here.
func ErrorType(status int) string {
	if t, ok := errorTypes[status]; ok {
		return t
	}
	if status >= http.StatusInternalServerError {
		return "server_error"
	}
	return "invalid_request_error"
}

// typeStatuses gives an error type that an OpenAI error (a stream's, which
// has no HTTP status of its own) may carry the HTTP status it stands for:
// ErrorType's types, OpenAI's rate-limit and quota types, and the types a
// chat stream translated from Anthropic's carries (overloaded_error,
// timeout_error). A quota run out is a billing failure (402), and an
// overload the 503 of a service unavailable for now.
var typeStatuses = map[string]int{
	"invalid_request_error": http.StatusBadRequest,
	"authentication_error":  http.StatusUnauthorized,
	"permission_error":      http.StatusForbidden,
	"not_found_error":       http.StatusNotFound,
	"rate_limit_error":      http.StatusTooManyRequests,
	"rate_limit_exceeded":   http.StatusTooManyRequests,
	"tokens":                http.StatusTooManyRequests,
	"requests":              http.StatusTooManyRequests,
	"insufficient_quota":    http.StatusPaymentRequired,
	"overloaded_error":      http.StatusServiceUnavailable,
	"timeout_error":         http.StatusGatewayTimeout,
}

// TypeStatus is the HTTP status an error of type typ stands for, 500 for
// a type not known: how a translator renders a stream's error in another
// protocol's envelope, through that protocol's status table.
func TypeStatus(typ string) int {
	if s, ok := typeStatuses[typ]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Envelope renders Sluice's error e, answered with HTTP status, in
// OpenAI's envelope, {"error":{"message","type","param","code"}} in that
// order, code being Sluice's. Only e.Msg and e.Code reach the caller.
func Envelope(e *sluice.Error, status int) []byte {
	type body struct {
		Message string      `json:"message"`
		Type    string      `json:"type"`
		Param   *string     `json:"param"`
		Code    sluice.Code `json:"code"`
	}
	out, _ := json.Marshal(struct {
		Error body `json:"error"`
	}{body{e.Msg, ErrorType(status), nil, e.Code}})
	return out
}

// ErrorEnvelopeOf returns the error body, in the envelope chat and
// Responses share, for an upstream's error answer of that status: the
// upstream's own error when the body is one (its type, when it has none,
// ErrorType's), else one that names the status (an unreadable body is not
// passed on: it may be anything).
func ErrorEnvelopeOf(status int, body []byte) []byte {
	var e ErrorEnvelope
	if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
		e = ErrorEnvelope{Error: ErrorBody{Message: fmt.Sprintf("the upstream answered %d %s", status, http.StatusText(status))}}
	}
	if e.Error.Type == "" {
		e.Error.Type = ErrorType(status)
	}
	out, _ := json.Marshal(e) // every member decoded from JSON or is a string
	return out
}

// ResponsesStreamError is the data of the error event that ends a
// Responses stream, {"type":"error","code","message","param"}, for
// Sluice's error e: its code is Sluice's.
func ResponsesStreamError(e *sluice.Error, _ int) []byte {
	body, _ := json.Marshal(struct {
		Type    string      `json:"type"`
		Code    sluice.Code `json:"code"`
		Message string      `json:"message"`
		Param   *string     `json:"param"`
	}{"error", e.Code, e.Msg, nil})
	return body
}

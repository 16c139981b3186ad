package anthropic

import (
	"encoding/json"
	"net/http"

	"github.com/sluicehq/sluice"
)

// StatusOverloaded is Anthropic's 529, which net/http does not name: the
// API is overloaded for everyone, not the caller's limits.
const StatusOverloaded = 529

// errorTypes gives each HTTP status Anthropic documents the error type
// it sends with it, and 503, which Anthropic does not send, the type of
// what it means (an overload). ErrorType answers for the others.
var errorTypes = map[int]string{
	http.StatusBadRequest:            "invalid_request_error",
	http.StatusUnauthorized:          "authentication_error",
	http.StatusPaymentRequired:       "billing_error",
	http.StatusForbidden:             "permission_error",
	http.StatusNotFound:              "not_found_error",
	http.StatusRequestEntityTooLarge: "request_too_large",
	http.StatusTooManyRequests:       "rate_limit_error",
	http.StatusInternalServerError:   "api_error",
	http.StatusServiceUnavailable:    "overloaded_error",
	http.StatusGatewayTimeout:        "timeout_error",
	StatusOverloaded:                 "overloaded_error",
}

// ErrorType is the error type of an Anthropic error answered with an HTTP
// status: the documented one, else api_error for a server error and
// invalid_request_error for any other (Anthropic uses it for the 4xx it
// gives no type of their own). The SDKs map the type to their error
// classes; every error body Sluice writes in Anthropic's envelope, its own
// and a translated upstream's, takes its type from here.
func ErrorType(status int) string {
	if t, ok := errorTypes[status]; ok {
		return t
	}
	if status >= http.StatusInternalServerError {
		return "api_error"
	}
	return "invalid_request_error"
}

// Envelope renders Sluice's error e, answered with HTTP status, in
// Anthropic's envelope, {"type":"error","error":{"type","message"}} in
// that order, with Sluice's code in error.code (the SDKs keep members they
// do not know: the Go SDK's apierror.Error has it in its raw JSON). Only
// e.Msg and e.Code reach the caller.
func Envelope(e *sluice.Error, status int) []byte {
	type body struct {
		Type    string      `json:"type"`
		Message string      `json:"message"`
		Code    sluice.Code `json:"code"`
	}
	out, _ := json.Marshal(struct {
		Type  string `json:"type"`
		Error body   `json:"error"`
	}{"error", body{ErrorType(status), e.Msg, e.Code}})
	return out
}

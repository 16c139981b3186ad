package gemini

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice"
)

// statuses gives each HTTP status the gRPC status name Google's envelope
// carries with it: the ones Gemini documents, the canonical ones of
// Google's other APIs (401, 409, 499, 501), and for the statuses Google
// does not send the name of what they mean: a payment refusal is the
// failed precondition Gemini answers an account without billing, a
// request that took too long is past its deadline, and a bad gateway or
// an upstream's overload (Anthropic's 529) is a service unavailable for
// now. Status answers for the others.
var statuses = map[int]string{
	http.StatusBadRequest:          "INVALID_ARGUMENT",
	http.StatusUnauthorized:        "UNAUTHENTICATED",
	http.StatusPaymentRequired:     "FAILED_PRECONDITION",
	http.StatusForbidden:           "PERMISSION_DENIED",
	http.StatusNotFound:            "NOT_FOUND",
	http.StatusRequestTimeout:      "DEADLINE_EXCEEDED",
	http.StatusConflict:            "ABORTED",
	http.StatusTooManyRequests:     "RESOURCE_EXHAUSTED",
	499:                            "CANCELLED",
	http.StatusInternalServerError: "INTERNAL",
	http.StatusNotImplemented:      "UNIMPLEMENTED",
	http.StatusBadGateway:          "UNAVAILABLE",
	http.StatusServiceUnavailable:  "UNAVAILABLE",
	http.StatusGatewayTimeout:      "DEADLINE_EXCEEDED",
	529:                            "UNAVAILABLE",
}

// Status is the gRPC status name of a Google error answered with an HTTP
// status: the table's, else INTERNAL for a server error and
// INVALID_ARGUMENT for any other. Every error body Sluice writes in
// Google's envelope, its own and a translated upstream's, takes its
// status from here.
func Status(code int) string {
	if s, ok := statuses[code]; ok {
		return s
	}
	if code >= http.StatusInternalServerError {
		return "INTERNAL"
	}
	return "INVALID_ARGUMENT"
}

// Envelope renders Sluice's error e, answered with HTTP status, in
// Google's envelope, {"error":{"code","message","status","details"}} in
// that order, with Sluice's code as the reason of an ErrorInfo detail (the
// SDKs expose details: go-genai's APIError.Details) and, on a refusal to
// be retried, a RetryInfo detail with the wait (beside the Retry-After
// header). Only e.Msg, e.Code and e.RetryAfter reach the caller.
func Envelope(e *sluice.Error, status int) []byte {
	// detail is an ErrorInfo (Reason, Domain) or a RetryInfo (RetryDelay).
	type detail struct {
		Type       string      `json:"@type"`
		Reason     sluice.Code `json:"reason,omitempty"`
		Domain     string      `json:"domain,omitempty"`
		RetryDelay string      `json:"retryDelay,omitempty"`
	}
	details := []detail{{Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: e.Code, Domain: "sluice"}}
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		details = append(details, detail{Type: "type.googleapis.com/google.rpc.RetryInfo", RetryDelay: strconv.FormatInt(secs, 10) + "s"})
	}
	type body struct {
		Code    int      `json:"code"`
		Message string   `json:"message"`
		Status  string   `json:"status"`
		Details []detail `json:"details"`
	}
	out, _ := json.Marshal(struct {
		Error body `json:"error"`
	}{body{status, e.Msg, Status(status), details}})
	return out
}

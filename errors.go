package sluice

import (
	"net/http"
	"time"
)

// Code is a stable, public error code (docs/errors.md). Codes are API: add
// new ones, never rename one. Prefixes name the area at fault.
type Code string

// Public error codes. Each maps to exactly one HTTP status in codeStatus.
const (
	CodeNoCredentials        Code = "no_credentials"
	CodeKeyUnbound           Code = "access_key_unbound"
	CodeCredentialInactive   Code = "access_credential_inactive"
	CodeScopeDenied          Code = "access_scope_denied"
	CodeBillingExhausted     Code = "billing_quota_exhausted"
	CodeConcurrencyExceeded  Code = "access_concurrency_exceeded"
	CodeCapacityWaitTimeout  Code = "capacity_wait_timeout"
	CodeBindingUnavailable   Code = "upstream_binding_unavailable"
	CodePriceUnavailable     Code = "billing_price_unavailable"
	CodeNoUpstreamAvailable  Code = "no_upstream_available"
	CodeModelNotFound        Code = "model_not_found"
	CodeInvalidRequest       Code = "invalid_request"
	CodeRequestTooLarge      Code = "request_too_large"
	CodeRequestTimeout       Code = "request_timeout"
	CodeNotFound             Code = "not_found"
	CodeMethodNotAllowed     Code = "method_not_allowed"
	CodeUpstreamTimeout      Code = "upstream_timeout"
	CodeUpstreamStreamFailed Code = "upstream_stream_failed"
	CodeInternal             Code = "internal"
	// CodeStateUnavailable: the shared state (Redis) cannot be reached, so
	// no claim can be taken; retry after the Retry-After.
	CodeStateUnavailable Code = "state_unavailable"
	// CodeServerBusy: this server cannot take the request now — its budget
	// for request bodies held in memory is spent, or it is shutting down —
	// retry after the Retry-After (another replica may take it).
	CodeServerBusy Code = "server_busy"
	// CodeProfileDenied: the request named a quota profile
	// (X-Sluice-Profile) but its key may not assert one.
	CodeProfileDenied Code = "access_profile_denied"
	// CodeAuthThrottled: too many failed keys (or admin tokens) came from
	// the caller's address; retry after the Retry-After.
	CodeAuthThrottled Code = "access_auth_throttled"
	// CodeBillingAccountSuspended: the key's billing account is suspended
	// by an operator; nothing is served for it until it is resumed.
	CodeBillingAccountSuspended Code = "billing_account_suspended"
	// CodeTenantSuspended: the key's tenant is suspended by an operator;
	// nothing is served for it until it is resumed.
	CodeTenantSuspended Code = "tenant_suspended"
	// CodeSensitiveDataBlocked: a redaction policy that applies to the
	// request blocks a kind of value its text holds; the message names
	// the detector, never the value. Nothing was sent upstream.
	CodeSensitiveDataBlocked Code = "sensitive_data_blocked"
)

var codeStatus = map[Code]int{
	CodeNoCredentials:        http.StatusUnauthorized,
	CodeKeyUnbound:           http.StatusForbidden,
	CodeCredentialInactive:   http.StatusForbidden,
	CodeScopeDenied:          http.StatusForbidden,
	CodeProfileDenied:        http.StatusForbidden,
	CodeBillingExhausted:     http.StatusTooManyRequests,
	CodeConcurrencyExceeded:  http.StatusTooManyRequests,
	CodeCapacityWaitTimeout:  http.StatusTooManyRequests,
	CodeAuthThrottled:        http.StatusTooManyRequests,
	CodeBindingUnavailable:   http.StatusServiceUnavailable,
	CodePriceUnavailable:     http.StatusServiceUnavailable,
	CodeNoUpstreamAvailable:  http.StatusServiceUnavailable,
	CodeModelNotFound:        http.StatusNotFound,
	CodeInvalidRequest:       http.StatusBadRequest,
	CodeSensitiveDataBlocked: http.StatusBadRequest,
	CodeRequestTooLarge:      http.StatusRequestEntityTooLarge,
	CodeRequestTimeout:       http.StatusRequestTimeout,
	CodeNotFound:             http.StatusNotFound,
	CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	CodeUpstreamTimeout:      http.StatusGatewayTimeout,
	CodeUpstreamStreamFailed: http.StatusBadGateway,
	CodeInternal:             http.StatusInternalServerError,
	CodeStateUnavailable:     http.StatusServiceUnavailable,
	CodeServerBusy:           http.StatusServiceUnavailable,

	// Suspensions, refused at admission.
	CodeBillingAccountSuspended: http.StatusForbidden,
	CodeTenantSuspended:         http.StatusForbidden,
}

// Status is the HTTP status of the code; unknown codes are 500.
func (c Code) Status() int {
	if s, ok := codeStatus[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Codes lists every public code, for tests and documentation.
func Codes() []Code {
	out := make([]Code, 0, len(codeStatus))
	for c := range codeStatus {
		out = append(out, c)
	}
	return out
}

// Error is a failure with a public face. Msg is safe to send to callers; Err
// is the internal cause, logged and never rendered.
type Error struct {
	Code       Code
	Msg        string
	RetryAfter time.Duration // sent as Retry-After when > 0
	Err        error
}

// Errorf is shorthand for an Error without a cause.
func Errorf(code Code, msg string) *Error { return &Error{Code: code, Msg: msg} }

// Error returns "code: msg: cause" for logs.
func (e *Error) Error() string {
	s := string(e.Code) + ": " + e.Msg
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap exposes the cause to errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// Is lets errors.Is(err, &Error{Code: c}) match by Code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

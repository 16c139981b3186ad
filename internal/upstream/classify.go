package upstream

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Class is what a failed execution means for the gateway. The class alone
// decides what happens next (CONVENTIONS.md, "Errors").
type Class int

// Failure classes (reference/upstream-errors.md §0).
const (
	ClassNone       Class = iota // success
	ClassRate                    // throttled: cool the account, try another account
	ClassAuth                    // this credential is bad: disable it, try the next edge
	ClassBilling                 // the account is out of money: try another account
	ClassEndpoint                // the upstream or network is unhealthy: breaker, next edge
	ClassRequest                 // the request is bad: return it unchanged, no retry
	ClassCallerGone              // the caller left: stop, penalise no one
)

var classNames = [...]string{"ok", "rate", "auth", "billing", "endpoint", "request", "caller_gone"}

func (c Class) String() string { return classNames[c] }

// Retryable reports whether another edge may be tried after this failure.
func (c Class) Retryable() bool {
	return c == ClassRate || c == ClassAuth || c == ClassBilling || c == ClassEndpoint
}

// openAIError is the error envelope of OpenAI-compatible upstreams.
type openAIError struct {
	Error struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"` // a string, a number or null
	} `json:"error"`
}

// Classify sorts an upstream HTTP failure of an OpenAI-compatible endpoint.
// It uses the status, the error code and type, and for the documented cases
// the message; never the status alone.
func Classify(status int, body []byte) Class {
	var e openAIError
	_ = json.Unmarshal(body, &e) // an HTML or empty body leaves e empty, which is informative too
	code := strings.Trim(string(e.Error.Code), `"`)
	typ, msg := e.Error.Type, strings.ToLower(e.Error.Message)
	switch {
	case code == "insufficient_quota" || typ == "insufficient_quota" || code == "account_deactivated" ||
		code == "billing_hard_limit_reached" || strings.Contains(msg, "check your plan and billing") ||
		strings.Contains(msg, "credit balance is too low") || code == "Arrearage" ||
		strings.HasSuffix(code, "BillOverdue"):
		return ClassBilling
	case status == http.StatusTooManyRequests:
		return ClassRate
	case code == "unsupported_country_region_territory":
		return ClassEndpoint // an egress problem, not the key's fault
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		code == "invalid_api_key" || strings.Contains(msg, "api key not valid"):
		return ClassAuth
	case status == http.StatusPaymentRequired:
		return ClassBilling
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		return ClassEndpoint
	default:
		return ClassRequest
	}
}

// maxRetryAfter bounds what an upstream can ask for; longer hints are
// treated as this long (the account's cooldown.max caps it further).
const maxRetryAfter = 24 * time.Hour

// RetryAfter reads the upstream's wait hint: retry-after-ms, then
// retry-after in seconds or as an HTTP date. Zero when absent or unreadable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if d, ok := parseAmount(h.Get("Retry-After-Ms"), time.Millisecond); ok {
		return d
	}
	v := h.Get("Retry-After")
	if d, ok := parseAmount(v, time.Second); ok {
		return d
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// parseAmount reads a positive decimal number of units, capped at maxRetryAfter.
func parseAmount(v string, unit time.Duration) (time.Duration, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f > 0) { // !(f > 0) also rejects NaN
		return 0, false
	}
	if f >= float64(maxRetryAfter/unit) {
		return maxRetryAfter, true
	}
	return time.Duration(f * float64(unit)), true
}

// Errors that end an execution without an upstream status. They are causes
// of the execution's context, so the class of a failed read is known.
var (
	errFirstByteTimeout = errors.New("no response from upstream within the first-byte timeout")
	errIdleTimeout      = errors.New("upstream stream idle for longer than the idle timeout")
	errTotalTimeout     = errors.New("upstream call exceeded the total timeout")
	errStreamTruncated  = errors.New("upstream stream ended without [DONE]")
)

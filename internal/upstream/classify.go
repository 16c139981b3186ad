package upstream

import (
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Class is what a failed execution means for the gateway. The class alone
// decides what happens next (docs/architecture.md, "Errors inside the code").
type Class int

// Failure classes (docs/failure-classes.md).
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

// errorBody reads the error dialects of the upstreams Sluice speaks to:
// OpenAI and its compatibles ({"error":{"message","type","code"}}),
// Anthropic ({"type":"error","error":{"type","message"}}), Google's
// ({"error":{"code","message","status","details"}}), DashScope's
// native one ({"code":"Throttling.RateQuota","message"}) and fal's ({"detail"}).
type errorBody struct {
	Error struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"` // a string, a number or null
		// Google's envelope (Gemini): a gRPC status name and typed details.
		Status  string         `json:"status"`
		Details []googleDetail `json:"details"`
	} `json:"error"`
	Code    string          `json:"code"`
	Message string          `json:"message"`
	Detail  json.RawMessage `json:"detail"` // fal: a string, or a list of validation errors

	// whole says the body decoded without error. A body that did not
	// (not JSON, or a field of another type) still classifies by what
	// did decode, but says nothing of a model's quota or a wait.
	whole bool
}

// decodeError decodes an error answer's body once, for everything that
// reads it: its class, whether a rate limit is one model's, and the wait
// Google's envelope asks for.
func decodeError(body []byte) errorBody {
	var e errorBody
	e.whole = json.Unmarshal(body, &e) == nil // an HTML or empty body leaves e empty, which is informative too
	return e
}

// rateMarkers are codes and message texts that mean a throttle whatever the
// status (DashScope answers some with 400 or 403).
var rateMarkers = []string{
	"rate_limit_exceeded", "rate_limit_error", "limit_requests", "limit_burst_rate",
	"throttling", "requests rate limit exceeded", "allocated quota exceeded",
	"request rate increased too quickly", "requests throttling triggered",
}

// billingMarkers are codes and message texts that mean the account cannot
// pay, whatever the status.
var billingMarkers = []string{
	"insufficient_quota", "billing_hard_limit_reached", "billing_error", "account_deactivated",
	"check your plan and billing", "credit balance is too low", "arrearage", "billoverdue",
	"free allocated quota exceeded", "exhausted balance", "user is locked",
	"invalid_payment_instrument", // Bedrock's AccessDeniedException for a Marketplace model the account cannot pay for
}

// Classify sorts an upstream HTTP failure. It uses the status, the error
// code and type, and for the documented cases the message; never the status
// alone (docs/failure-classes.md).
func Classify(status int, body []byte) Class {
	e := decodeError(body)
	return e.class(status)
}

// class is Classify of a decoded body.
func (e *errorBody) class(status int) Class {
	code := strings.ToLower(strings.Trim(string(e.Error.Code), `"`) + " " + e.Error.Type + " " + e.Code)
	msg := strings.ToLower(e.Error.Message + " " + e.Message + " " + string(e.Detail))
	has := func(markers []string) bool {
		for _, m := range markers {
			if strings.Contains(code, m) || strings.Contains(msg, m) {
				return true
			}
		}
		return false
	}
	if class, ok := classifyGoogle(e); ok {
		return class // before the markers: Gemini's per-minute 429 says "check your plan and billing"
	}
	switch {
	case has(billingMarkers) && !strings.Contains(msg, "allocated quota exceeded, please increase"):
		return ClassBilling
	case status == http.StatusTooManyRequests || has(rateMarkers):
		return ClassRate
	case strings.Contains(code, "unsupported_country_region_territory"):
		return ClassEndpoint // an egress problem, not the key's fault
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		strings.Contains(code, "invalid_api_key") || strings.Contains(code, "authentication_error") ||
		strings.Contains(msg, "api key not valid"):
		return ClassAuth
	case status == http.StatusPaymentRequired:
		return ClassBilling
	case status == http.StatusRequestTimeout || status == http.StatusConflict || status >= 500:
		return ClassEndpoint
	default:
		return ClassRequest
	}
}

// Exhausted reads the provider's rate-limit headers of a successful answer
// and returns how long to hold off when they say no request is left in the
// window (0 otherwise), so the account cools before the upstream's 429.
// OpenAI sends x-ratelimit-remaining-requests with a reset like "6m0s";
// Anthropic anthropic-ratelimit-requests-remaining with an RFC 3339 reset,
// and the same for its token limits (whose remaining counts are rounded to
// the thousand: 0 is less than 500 left), of which the latest reset counts.
func Exhausted(h http.Header, now time.Time) time.Duration {
	if h.Get("X-Ratelimit-Remaining-Requests") == "0" {
		if d, err := time.ParseDuration(h.Get("X-Ratelimit-Reset-Requests")); err == nil && d > 0 {
			return min(d, maxRetryAfter)
		}
	}
	var wait time.Duration
	for _, l := range anthropicLimits {
		if h.Get(l.remaining) == "0" {
			if t, err := time.Parse(time.RFC3339, h.Get(l.reset)); err == nil && t.After(now) {
				wait = max(wait, min(t.Sub(now), maxRetryAfter))
			}
		}
	}
	return wait // 0: room left, or no reset to wait for
}

// anthropicLimits are the remaining and reset headers of Anthropic's
// limits, in canonical form.
var anthropicLimits = [...]struct{ remaining, reset string }{
	{"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Reset"},
	{"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset"},
	{"Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Reset"},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset"},
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
	errStreamTruncated  = errors.New("upstream stream ended before its last event ([DONE], message_stop)")
)

// modelScopedMarkers are the codes of DashScope's throttles, whose limits
// are set per model at the root-account level (docs/failure-classes.md,
// DashScope): the RPM/RPS, burst and TPM/TPS quotas of one model.
var modelScopedMarkers = []string{
	"throttling.ratequota", "throttling.burstrate", "throttling.allocationquota",
	"limit_requests", "limit_burst_rate",
}

// openAIModelLimit matches OpenAI's rate-limit message, which names the
// model whose per-organization limit was hit: "Rate limit reached for
// gpt-4o-mini in organization org-… on tokens per min (TPM)".
var openAIModelLimit = regexp.MustCompile(`rate limit reached for (\S+) in organization`)

// modelScoped reports whether a rate limit's body (its class is
// ClassRate) says the limit is the upstream's quota of one model rather
// than of the whole account: DashScope's per-model throttles (also its
// compatible mode's TPM throttle, insufficient_quota with "Allocated quota
// exceeded, please increase your quota limit"), and OpenAI's
// rate_limit_exceeded naming a model. Anything else — a bare throttle, a
// provider that does not say — is the account's: when unsure, the account
// cools.
func (e *errorBody) modelScoped() bool {
	if !e.whole {
		return false
	}
	code := strings.ToLower(strings.Trim(string(e.Error.Code), `"`) + " " + e.Error.Type + " " + e.Code)
	msg := strings.ToLower(e.Error.Message + " " + e.Message)
	for _, m := range modelScopedMarkers {
		if strings.Contains(code, m) {
			return true
		}
	}
	if strings.Contains(msg, "allocated quota exceeded, please increase") {
		return true
	}
	if strings.Contains(code, "rate_limit_exceeded") {
		if m := openAIModelLimit.FindStringSubmatch(msg); m != nil && m[1] != "requests" && m[1] != "tokens" {
			return true
		}
	}
	return false
}

package upstream

import (
	"encoding/json"
	"strings"
	"time"
)

// googleDetail is the part of a google.rpc detail of an error that Sluice
// reads: ErrorInfo's reason, RetryInfo's retryDelay, QuotaFailure's
// violations.
type googleDetail struct {
	Type       string `json:"@type"`
	Reason     string `json:"reason"`
	RetryDelay string `json:"retryDelay"`
	Violations []struct {
		QuotaID string `json:"quotaId"`
	} `json:"violations"`
}

// UnmarshalJSON decodes a detail of a Google error, leaving one that does
// not decode (not an object, a field of another type) empty, so that it
// says nothing and the rest of the error body still decodes.
func (d *googleDetail) UnmarshalJSON(b []byte) error {
	type plain googleDetail // without this method
	var p plain
	if json.Unmarshal(b, &p) == nil {
		*d = googleDetail(p)
	}
	return nil
}

// classifyGoogle sorts an error in Google's envelope (a gRPC status name
// in error.status), as docs/failure-classes.md says: ok is false
// for one it leaves to the status rules. A 429 RESOURCE_EXHAUSTED is a
// rate limit whatever its message says (Gemini's per-minute limits too
// "check your plan and billing"), but for prepaid credits run out; a key
// that is not valid is a 400 INVALID_ARGUMENT with the ErrorInfo reason
// API_KEY_INVALID; a 400 FAILED_PRECONDITION is an account without
// billing where the free tier is not offered.
func classifyGoogle(e *errorBody) (Class, bool) {
	if e.Error.Status == "" {
		return ClassNone, false
	}
	msg := strings.ToLower(e.Error.Message)
	switch e.Error.Status {
	case "RESOURCE_EXHAUSTED":
		if strings.Contains(msg, "credits are depleted") {
			return ClassBilling, true
		}
		return ClassRate, true
	case "FAILED_PRECONDITION":
		return ClassBilling, true
	case "PERMISSION_DENIED":
		for _, d := range e.Error.Details {
			if d.Reason == "BILLING_DISABLED" {
				return ClassBilling, true // Vertex AI on a project whose billing is off
			}
		}
		if strings.Contains(msg, "requires billing to be enabled") {
			return ClassBilling, true
		}
		return ClassAuth, true
	case "UNAUTHENTICATED":
		return ClassAuth, true
	case "INVALID_ARGUMENT":
		for _, d := range e.Error.Details {
			if d.Reason == "API_KEY_INVALID" {
				return ClassAuth, true
			}
		}
		if strings.Contains(msg, "api key not valid") || strings.Contains(msg, "api key not found") || strings.Contains(msg, "api key expired") {
			return ClassAuth, true
		}
		return ClassRequest, true
	}
	return ClassNone, false
}

// googleRetryAfter reads the wait a Gemini 429 asks for from its body: the
// RetryInfo detail's retryDelay (a protobuf duration, "26s"), else the
// "Please retry in 26.1s" of its message. A per-day quota (a QuotaFailure
// whose quotaId says PerDay) is not back before its daily reset, midnight
// Pacific time, so the wait runs at least until then (the account's
// cooldown.max caps it). 0 when the body says nothing, and for a body
// that is not in Google's envelope (no error.status).
func (e *errorBody) googleRetryAfter(now time.Time) time.Duration {
	if !e.whole || e.Error.Status == "" {
		return 0
	}
	var wait time.Duration
	daily := false
	for _, d := range e.Error.Details {
		if d.RetryDelay != "" {
			if v, ok := parseAmount(strings.TrimSuffix(d.RetryDelay, "s"), time.Second); ok {
				wait = v
			}
		}
		for _, v := range d.Violations {
			daily = daily || strings.Contains(v.QuotaID, "PerDay")
		}
	}
	if wait == 0 {
		wait = retryInMessage(e.Error.Message)
	}
	if daily {
		wait = max(wait, untilPacificMidnight(now))
	}
	return wait
}

// retryInMessage reads "retry in 26.1s" in a message, 0 when absent.
func retryInMessage(msg string) time.Duration {
	_, rest, ok := strings.Cut(strings.ToLower(msg), "retry in ")
	if !ok {
		return 0
	}
	n := strings.IndexFunc(rest, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if n <= 0 || rest[n] != 's' {
		return 0
	}
	d, _ := parseAmount(rest[:n], time.Second)
	return d
}

// pacific is the zone of Gemini's daily quota reset, at standard time: in
// summer the reset comes an hour before Sluice expects it, so an account
// waits an hour longer than it must, never shorter.
var pacific = time.FixedZone("PST", -8*60*60)

// untilPacificMidnight is the time from now to the next midnight Pacific.
func untilPacificMidnight(now time.Time) time.Duration {
	t := now.In(pacific)
	next := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, pacific)
	return next.Sub(now)
}

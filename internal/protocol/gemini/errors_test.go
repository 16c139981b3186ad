package gemini

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestStatus checks the status table against the status names the Gemini
// API documents for each HTTP status, then the canonical ones of Google's
// APIs that Gemini's table leaves out, then Sluice's choice for the
// statuses Google does not send.
func TestStatus(t *testing.T) {
	tests := []struct {
		name string
		give int
		want string
	}{
		{"documented 400", 400, "INVALID_ARGUMENT"},
		{"documented 403", 403, "PERMISSION_DENIED"},
		{"documented 404", 404, "NOT_FOUND"},
		{"documented 429", 429, "RESOURCE_EXHAUSTED"},
		{"documented 500", 500, "INTERNAL"},
		{"documented 503", 503, "UNAVAILABLE"},
		{"documented 504", 504, "DEADLINE_EXCEEDED"},
		{"canonical 401", 401, "UNAUTHENTICATED"},
		{"canonical 409", 409, "ABORTED"},
		{"canonical 499", 499, "CANCELLED"},
		{"canonical 501", 501, "UNIMPLEMENTED"},
		{"402 is billing's failed precondition", 402, "FAILED_PRECONDITION"},
		{"408 is past the deadline", 408, "DEADLINE_EXCEEDED"},
		{"502 is unavailable for now", 502, "UNAVAILABLE"},
		{"an overload (529) is unavailable", 529, "UNAVAILABLE"},
		{"another client error", 422, "INVALID_ARGUMENT"},
		{"another server error", 507, "INTERNAL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Status(tt.give); got != tt.want {
				t.Errorf("Status(%d) = %s, want %s", tt.give, got, tt.want)
			}
		})
	}
}

// TestEnvelope checks that Sluice's error reaches the caller in Google's
// shape, its code as an ErrorInfo reason and its wait as a RetryInfo.
func TestEnvelope(t *testing.T) {
	body := Envelope(&sluice.Error{Code: sluice.CodeCapacityWaitTimeout, Msg: "busy", RetryAfter: 1500 * time.Millisecond}, 429)
	var got struct {
		Error struct {
			Code    int
			Message string
			Status  string
			Details []struct {
				Type       string `json:"@type"`
				Reason     string
				Domain     string
				RetryDelay string
			}
		}
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("Envelope = %s: %v", body, err)
	}
	e := got.Error
	if e.Code != 429 || e.Message != "busy" || e.Status != "RESOURCE_EXHAUSTED" || len(e.Details) != 2 ||
		e.Details[0].Reason != string(sluice.CodeCapacityWaitTimeout) || e.Details[0].Domain != "sluice" || e.Details[1].RetryDelay != "2s" {
		t.Errorf("Envelope = %s, want 429 RESOURCE_EXHAUSTED with Sluice's code as the reason and a 2s retry delay", body)
	}
}

package anthropic

import (
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestErrorType checks the status table against the error types
// Anthropic documents for each status, then the ones it does not give:
// its own overload type for a 503, api_error for another server error,
// invalid_request_error for another client error.
func TestErrorType(t *testing.T) {
	tests := []struct {
		name string
		give int
		want string
	}{
		{"documented 400", 400, "invalid_request_error"},
		{"documented 401", 401, "authentication_error"},
		{"documented 402", 402, "billing_error"},
		{"documented 403", 403, "permission_error"},
		{"documented 404", 404, "not_found_error"},
		{"documented 413", 413, "request_too_large"},
		{"documented 429", 429, "rate_limit_error"},
		{"documented 500", 500, "api_error"},
		{"documented 504", 504, "timeout_error"},
		{"documented 529", 529, "overloaded_error"},
		{"503 is an overload", 503, "overloaded_error"},
		{"another server error", 502, "api_error"},
		{"another client error", 422, "invalid_request_error"},
		{"method not allowed", 405, "invalid_request_error"},
		{"request timeout", 408, "invalid_request_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ErrorType(tt.give); got != tt.want {
				t.Errorf("ErrorType(%d) = %q, want %q", tt.give, got, tt.want)
			}
		})
	}
}

// TestEnvelope checks that Sluice's error reaches the caller in
// Anthropic's shape, its code beside the type and the message.
func TestEnvelope(t *testing.T) {
	var got ErrorEnvelope
	var code struct {
		Error struct{ Code string } `json:"error"`
	}
	body := Envelope(&sluice.Error{Code: sluice.CodeModelNotFound, Msg: "model: nope"}, 404)
	if json.Unmarshal(body, &got) != nil || json.Unmarshal(body, &code) != nil {
		t.Fatalf("Envelope = %s, not JSON", body)
	}
	if got.Type != "error" || got.Error.Type != "not_found_error" || got.Error.Message != "model: nope" || code.Error.Code != string(sluice.CodeModelNotFound) {
		t.Errorf("Envelope = %s, want an error of type not_found_error with the message and Sluice's code", body)
	}
}

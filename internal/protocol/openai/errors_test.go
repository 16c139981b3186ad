package openai

import (
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice"
)

// TestErrorType checks the status table against the types OpenAI
// documents (400 and 500), then the types named after the SDKs' error
// class for a status, then the fallbacks.
func TestErrorType(t *testing.T) {
	tests := []struct {
		name string
		give int
		want string
	}{
		{"documented 400", 400, "invalid_request_error"},
		{"documented 500", 500, "server_error"},
		{"401 AuthenticationError", 401, "authentication_error"},
		{"403 PermissionDeniedError", 403, "permission_error"},
		{"404 NotFoundError", 404, "not_found_error"},
		{"429 RateLimitError", 429, "rate_limit_error"},
		{"method not allowed", 405, "invalid_request_error"},
		{"request timeout", 408, "invalid_request_error"},
		{"too large", 413, "invalid_request_error"},
		{"another client error", 422, "invalid_request_error"},
		{"another server error", 503, "server_error"},
		{"an overload (529)", 529, "server_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ErrorType(tt.give); got != tt.want {
				t.Errorf("ErrorType(%d) = %q, want %q", tt.give, got, tt.want)
			}
		})
	}
}

// TestTypeStatus checks that every type ErrorType gives stands for a
// status ErrorType gives that type, and the statuses of the types a
// stream's error may carry otherwise.
func TestTypeStatus(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 429, 500} {
		if back := ErrorType(TypeStatus(ErrorType(status))); back != ErrorType(status) {
			t.Errorf("ErrorType(TypeStatus(%q)) = %q", ErrorType(status), back)
		}
	}
	tests := []struct {
		give string
		want int
	}{
		{"tokens", 429},
		{"requests", 429},
		{"insufficient_quota", 402},
		{"overloaded_error", 503},
		{"timeout_error", 504},
		{"server_error", 500},
		{"something_new", 500},
	}
	for _, tt := range tests {
		if got := TypeStatus(tt.give); got != tt.want {
			t.Errorf("TypeStatus(%q) = %d, want %d", tt.give, got, tt.want)
		}
	}
}

// TestEnvelopes checks Sluice's own error and an upstream's in OpenAI's
// envelope: an upstream's type is kept, and one without a type gets the
// status's.
func TestEnvelopes(t *testing.T) {
	tests := []struct {
		name string
		give []byte
		want ErrorBody
	}{
		{"sluice's", Envelope(&sluice.Error{Code: sluice.CodeModelNotFound, Msg: "no such model"}, 404),
			ErrorBody{Message: "no such model", Type: "not_found_error", Code: json.RawMessage(`"model_not_found"`)}},
		{"an upstream's", ErrorEnvelopeOf(429, []byte(`{"error":{"message":"slow down","type":"tokens","code":"rate_limit_exceeded"}}`)),
			ErrorBody{Message: "slow down", Type: "tokens", Code: json.RawMessage(`"rate_limit_exceeded"`)}},
		{"an upstream's without a type", ErrorEnvelopeOf(401, []byte(`{"error":{"message":"bad key"}}`)),
			ErrorBody{Message: "bad key", Type: "authentication_error", Code: json.RawMessage(`null`)}},
		{"not an error body", ErrorEnvelopeOf(502, []byte(`<html>`)),
			ErrorBody{Message: "the upstream answered 502 Bad Gateway", Type: "server_error", Code: json.RawMessage(`null`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got ErrorEnvelope
			if err := json.Unmarshal(tt.give, &got); err != nil {
				t.Fatalf("%s: %v", tt.give, err)
			}
			if got.Error.Message != tt.want.Message || got.Error.Type != tt.want.Type || string(got.Error.Code) != string(tt.want.Code) || got.Error.Param != nil {
				t.Errorf("envelope = %s, want %+v (code %s)", tt.give, tt.want, tt.want.Code)
			}
		})
	}
}

package messages

import (
	"encoding/json"
	"testing"

	"github.com/sluicehq/sluice"
)

func TestContentRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		give string
	}{
		{"String", `"hi"`},
		{"Blocks", `[{"type":"text","text":"hi"},{"type":"tool_result","tool_use_id":"t","content":"ok","is_error":true}]`},
		{"NoBlocks", `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c Content
			if err := json.Unmarshal([]byte(tt.give), &c); err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(c)
			if err != nil || string(got) != tt.give {
				t.Errorf("Marshal(Unmarshal(%s)) = %s, %v", tt.give, got, err)
			}
		})
	}
}

// TestUsage checks that Anthropic's usage, whose input counts only the
// uncached prompt, and Sluice's, whose prompt includes the cache reads and
// writes, convert both ways.
func TestUsage(t *testing.T) {
	a := Usage{InputTokens: 12, CacheCreationInputTokens: 100, CacheReadInputTokens: 1800, OutputTokens: 95, OutputTokensDetails: &OutputTokensDetails{ThinkingTokens: 40}}
	want := sluice.Usage{PromptTokens: 1912, CompletionTokens: 95, CachedTokens: 1800, CacheWriteTokens: 100, ReasoningTokens: 40, TotalTokens: 2007, Measured: true}
	got := a.Sluice()
	if got != want {
		t.Errorf("Sluice() = %+v, want %+v", got, want)
	}
	a.OutputTokensDetails = nil // Anthropic's usage has no field for Sluice's reasoning count
	if back := UsageOf(got); back != a {
		t.Errorf("UsageOf(%+v) = %+v, want %+v", got, back, a)
	}
}

func TestErrorType(t *testing.T) {
	tests := []struct {
		give int
		want string
	}{
		{400, "invalid_request_error"},
		{401, "authentication_error"},
		{402, "billing_error"},
		{403, "permission_error"},
		{404, "not_found_error"},
		{413, "request_too_large"},
		{422, "invalid_request_error"},
		{429, "rate_limit_error"},
		{500, "api_error"},
		{502, "api_error"},
		{503, "overloaded_error"},
		{504, "timeout_error"},
		{529, "overloaded_error"},
	}
	for _, tt := range tests {
		if got := ErrorType(tt.give); got != tt.want {
			t.Errorf("ErrorType(%d) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

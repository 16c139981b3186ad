package openai

import (
	"testing"

	"github.com/sluicehq/sluice"
)

// TestUsageValue checks how chat's and Responses' usage objects map to
// Sluice's usage, which is chat's: the prompt includes the cached tokens,
// the completion the reasoning tokens.
func TestUsageValue(t *testing.T) {
	tests := []struct {
		name string
		read func([]byte) sluice.Usage
		give string
		want sluice.Usage
	}{
		{"chat", UsageValue, `{"prompt_tokens":146,"completion_tokens":100,"total_tokens":246,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":8}}`,
			sluice.Usage{PromptTokens: 146, CompletionTokens: 100, CachedTokens: 64, ReasoningTokens: 8, TotalTokens: 246, Measured: true}},
		{"chat without a total", UsageValue, `{"prompt_tokens":3,"completion_tokens":4}`, sluice.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, Measured: true}},
		{"responses", ResponsesUsageValue, `{"input_tokens":5,"input_tokens_details":{"cached_tokens":2},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":8}`,
			sluice.Usage{PromptTokens: 5, CompletionTokens: 3, CachedTokens: 2, ReasoningTokens: 1, TotalTokens: 8, Measured: true}},
		{"responses read by encoding/json", ResponsesUsageValue, `{"Input_Tokens":5}`, sluice.Usage{PromptTokens: 5, TotalTokens: 5, Measured: true}},
		{"null", UsageValue, `null`, sluice.Usage{}},
		{"not decodable", ResponsesUsageValue, `{"input_tokens":"5"}`, sluice.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.read([]byte(tt.give)); got != tt.want {
				t.Errorf("usage of %s = %+v, want %+v", tt.give, got, tt.want)
			}
		})
	}
}

// FuzzScanUsage checks the scan against encoding/json: a usage object the
// scan takes, encoding/json decodes to the same counts, as chat's usage and
// as Responses' usage.
func FuzzScanUsage(f *testing.F) {
	for _, s := range []string{`{"prompt_tokens":146,"completion_tokens":100,"total_tokens":246,"prompt_tokens_details":{"cached_tokens":64}}`,
		`{"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":-1}}`,
		`{"prompt_tokens":1e2}`, `{"Prompt_tokens":1}`, `{}`, `{"total_tokens":9223372036854775807}`,
		`{"input_tokens":5,"input_tokens_details":{"cached_tokens":2},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":8}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, give string) {
		for _, n := range []*usageNames{chatUsageNames, responsesUsageNames} {
			got, ok := scanUsage([]byte(give), n)
			if !ok {
				continue
			}
			want, ok := n.decode([]byte(give))
			if !ok {
				t.Fatalf("scanUsage(%q, %s) = %+v, but encoding/json refuses it", give, n.prompt, got)
			}
			if got != want {
				t.Fatalf("scanUsage(%q, %s) = %+v, encoding/json reads %+v", give, n.prompt, got, want)
			}
		}
	})
}

// TestUsageValueDoesNotAllocate guards the read every answer passed
// through goes through.
func TestUsageValueDoesNotAllocate(t *testing.T) {
	chat := []byte(`{"prompt_tokens":146,"completion_tokens":100,"total_tokens":246,"prompt_tokens_details":{"cached_tokens":64},"completion_tokens_details":{"reasoning_tokens":8}}`)
	responses := []byte(`{"input_tokens":5,"input_tokens_details":{"cached_tokens":2},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":8}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = UsageValue(chat), ResponsesUsageValue(responses) }); n != 0 {
		t.Errorf("reading usage allocates %v times, want 0", n)
	}
}

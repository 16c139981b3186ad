package gemini

import (
	"testing"

	"github.com/sluicehq/sluice"
)

// TestUsage checks that Gemini's usage, whose candidates count excludes
// the thoughts, and Sluice's, whose completion includes them, convert both
// ways; the tool-use prompt counts as prompt.
func TestUsage(t *testing.T) {
	g := UsageMetadata{PromptTokenCount: 2100, CachedContentTokenCount: 1800, CandidatesTokenCount: 40, ThoughtsTokenCount: 120, ToolUsePromptTokenCount: 10, TotalTokenCount: 2270}
	want := sluice.Usage{PromptTokens: 2110, CompletionTokens: 160, CachedTokens: 1800, ReasoningTokens: 120, TotalTokens: 2270, Measured: true}
	got := g.Sluice()
	if got != want {
		t.Errorf("Sluice() = %+v, want %+v", got, want)
	}
	back := UsageMetadata{PromptTokenCount: 2110, CachedContentTokenCount: 1800, CandidatesTokenCount: 40, ThoughtsTokenCount: 120, TotalTokenCount: 2270}
	if u := UsageOf(got); *u != back {
		t.Errorf("UsageOf(%+v) = %+v, want %+v", got, *u, back)
	}
}

// TestUsageValue checks the read of a usageMetadata object as it comes,
// which maps through UsageMetadata.Sluice.
func TestUsageValue(t *testing.T) {
	tests := []struct {
		name string
		give string
		want sluice.Usage
	}{
		{"whole", `{"promptTokenCount":2100,"cachedContentTokenCount":1800,"candidatesTokenCount":40,"thoughtsTokenCount":120,"toolUsePromptTokenCount":10,"totalTokenCount":2270}`,
			sluice.Usage{PromptTokens: 2110, CompletionTokens: 160, CachedTokens: 1800, ReasoningTokens: 120, TotalTokens: 2270, Measured: true}},
		{"no total", `{"promptTokenCount":3,"candidatesTokenCount":4}`, sluice.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, Measured: true}},
		{"unknown members pass", `{"promptTokensDetails":[{"modality":"TEXT","tokenCount":3}],"promptTokenCount":3,"candidatesTokenCount":4}`, sluice.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, Measured: true}},
		{"none", ``, sluice.Usage{}},
		{"null", `null`, sluice.Usage{}},
		{"not decodable", `{"promptTokenCount":"x"}`, sluice.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UsageValue([]byte(tt.give)); got != tt.want {
				t.Errorf("UsageValue(%s) = %+v, want %+v", tt.give, got, tt.want)
			}
		})
	}
}

// TestUsageValueDoesNotAllocate guards the read every answer and every
// stream chunk that carries usage goes through.
func TestUsageValueDoesNotAllocate(t *testing.T) {
	v := []byte(`{"promptTokenCount":2100,"cachedContentTokenCount":1800,"candidatesTokenCount":40,"thoughtsTokenCount":120,"totalTokenCount":2260}`)
	if n := testing.AllocsPerRun(100, func() { _ = UsageValue(v) }); n != 0 {
		t.Errorf("reading usage allocates %v times, want 0", n)
	}
}

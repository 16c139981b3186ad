package upstream

import (
	"testing"

	"github.com/sluicehq/sluice"
)

func TestResponsesAnswerUsage(t *testing.T) {
	got := OpenAIResponses.Usage([]byte(`{"input_tokens":1812,"input_tokens_details":{"cached_tokens":1800},"output_tokens":95,"output_tokens_details":{"reasoning_tokens":40},"total_tokens":1907}`))
	want := sluice.Usage{PromptTokens: 1812, CompletionTokens: 95, CachedTokens: 1800, ReasoningTokens: 40, TotalTokens: 1907, Measured: true}
	if got != want {
		t.Errorf("usage = %+v, want %+v", got, want)
	}
	if got := OpenAIResponses.Usage([]byte(`{"input_tok\u0065ns":5}`)); got != (sluice.Usage{PromptTokens: 5, TotalTokens: 5, Measured: true}) {
		t.Errorf("usage read by encoding/json = %+v, want 5 prompt tokens", got)
	}
}

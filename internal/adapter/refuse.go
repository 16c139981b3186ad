package adapter

import (
	"slices"

	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// RefuseOneChoice returns the 400 for the first request-level field of
// chat request r that an upstream answering with one text choice and no log
// probabilities (Anthropic Messages, Gemini) cannot express, naming that
// upstream; nil when there is none. The translators to those upstreams
// share it so a caller gets the same refusal from either.
func RefuseOneChoice(r *openai.ChatRequest, upstream string) error {
	switch {
	case r.N != nil && *r.N > 1:
		return Untranslatable("n > 1 is not supported by this model's upstream (%s answers with one choice per request)", upstream)
	case r.Logprobs || r.TopLogprobs != nil:
		return Untranslatable("logprobs are not supported by this model's upstream (%s)", upstream)
	case Present(r.LogitBias):
		return Untranslatable("logit_bias is not supported by this model's upstream (%s)", upstream)
	case Present(r.Audio) || slices.Contains(r.Modalities, "audio"):
		return Untranslatable("audio output is not supported by this model's upstream (%s)", upstream)
	case Present(r.Functions) || Present(r.FunctionCall):
		return Untranslatable("functions and function_call are deprecated and not translated; use tools and tool_choice")
	case Present(r.WebSearchOptions):
		return Untranslatable("web_search_options are not supported by this model's upstream (%s): Sluice does not turn them into its web search tool", upstream)
	}
	return nil
}

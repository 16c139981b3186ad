package upstream

import (
	"bytes"
	"encoding/json"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
)

var usageField = []byte(`"usage"`)

// openAIUsage is the usage object of chat completions and embeddings.
type openAIUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

// usageOf reads the top-level usage object of an OpenAI answer or chunk.
// Measured is false when there is none (or it is null).
func usageOf(obj []byte) sluice.Usage {
	s, e, ok, err := jsonfield.Find(obj, "usage")
	if err != nil || !ok || obj[s] != '{' {
		return sluice.Usage{}
	}
	var u openAIUsage
	if json.Unmarshal(obj[s:e], &u) != nil {
		return sluice.Usage{}
	}
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return sluice.Usage{
		PromptTokens:     u.PromptTokens,
		CompletionTokens: u.CompletionTokens,
		CachedTokens:     u.PromptTokensDetails.CachedTokens,
		ReasoningTokens:  u.CompletionTokensDetails.ReasoningTokens,
		TotalTokens:      total,
		Measured:         true,
	}
}

// isUsageOnly reports whether a chunk is the final usage chunk, whose
// choices are empty.
func isUsageOnly(chunk []byte) bool {
	s, e, ok, err := jsonfield.Find(chunk, "choices")
	return err == nil && ok && len(bytes.TrimSpace(chunk[s+1:e-1])) == 0 && chunk[s] == '['
}

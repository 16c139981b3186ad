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
// Measured is false when there is none (or it is null), or it does not
// decode.
func usageOf(obj []byte) sluice.Usage {
	s, e, ok, err := jsonfield.Find(obj, "usage")
	if err != nil || !ok || obj[s] != '{' {
		return sluice.Usage{}
	}
	u, ok := scanUsage(obj[s:e])
	if !ok {
		if u, ok = decodeUsage(obj[s:e]); !ok {
			return sluice.Usage{}
		}
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

// scanUsage decodes a usage object without reflection, exactly as
// encoding/json decodes it into an openAIUsage, for the objects upstreams
// send: plain keys, integer counts, details as objects or null. ok is false
// for anything else, which encoding/json then decodes (or refuses).
func scanUsage(obj []byte) (u openAIUsage, ok bool) {
	err := jsonfield.PlainMembers(obj, func(key, value []byte) error {
		switch string(key) {
		case "prompt_tokens":
			return jsonfield.DecodeInt(&u.PromptTokens, value)
		case "completion_tokens":
			return jsonfield.DecodeInt(&u.CompletionTokens, value)
		case "total_tokens":
			return jsonfield.DecodeInt(&u.TotalTokens, value)
		case "prompt_tokens_details":
			return scanDetail(&u.PromptTokensDetails.CachedTokens, "cached_tokens", value)
		case "completion_tokens_details":
			return scanDetail(&u.CompletionTokensDetails.ReasoningTokens, "reasoning_tokens", value)
		}
		return nil
	})
	return u, err == nil
}

// decodeUsage decodes a usage object with encoding/json, the reference, for
// the objects scanUsage leaves to it.
func decodeUsage(obj []byte) (u openAIUsage, ok bool) {
	return u, json.Unmarshal(obj, &u) == nil
}

// scanDetail reads the count name of a details object into dst. As for
// encoding/json (the details are structs, not pointers), null changes
// nothing and a second object keeps what the first set unless it sets it.
func scanDetail(dst *int64, name string, value []byte) error {
	if string(value) == "null" {
		return nil
	}
	if value[0] != '{' {
		return jsonfield.ErrNotPlain
	}
	return jsonfield.PlainMembers(value, func(key, value []byte) error {
		if string(key) == name {
			return jsonfield.DecodeInt(dst, value)
		}
		return nil
	})
}

// isUsageOnly reports whether a chunk is the final usage chunk, whose
// choices are empty.
func isUsageOnly(chunk []byte) bool {
	s, e, ok, err := jsonfield.Find(chunk, "choices")
	return err == nil && ok && len(bytes.TrimSpace(chunk[s+1:e-1])) == 0 && chunk[s] == '['
}

package openai

import (
	"encoding/json"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
)

// ChatUsage is a chat answer's usage. PromptTokens includes the cached and
// cache-write tokens, CompletionTokens the reasoning tokens.
type ChatUsage struct {
	PromptTokens            int64                    `json:"prompt_tokens"`
	CompletionTokens        int64                    `json:"completion_tokens"`
	TotalTokens             int64                    `json:"total_tokens"`
	PromptTokensDetails     *PromptTokensDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *CompletionTokensDetails `json:"completion_tokens_details,omitempty"`
}

// PromptTokensDetails splits the prompt tokens.
type PromptTokensDetails struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// CompletionTokensDetails splits the completion tokens.
type CompletionTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// Sluice returns the usage in Sluice's terms (which are OpenAI's).
func (u *ChatUsage) Sluice() sluice.Usage {
	s := sluice.Usage{
		PromptTokens:     u.PromptTokens,
		CompletionTokens: u.CompletionTokens,
		TotalTokens:      u.TotalTokens,
		Measured:         true,
	}
	if s.TotalTokens == 0 {
		s.TotalTokens = s.PromptTokens + s.CompletionTokens
	}
	if d := u.PromptTokensDetails; d != nil {
		s.CachedTokens = d.CachedTokens
		s.CacheWriteTokens = d.CacheWriteTokens
	}
	if d := u.CompletionTokensDetails; d != nil {
		s.ReasoningTokens = d.ReasoningTokens
	}
	return s
}

// UsageOf returns a usage in OpenAI's terms for a usage in Sluice's.
func UsageOf(s sluice.Usage) *ChatUsage {
	return &ChatUsage{
		PromptTokens:            s.PromptTokens,
		CompletionTokens:        s.CompletionTokens,
		TotalTokens:             s.PromptTokens + s.CompletionTokens,
		PromptTokensDetails:     &PromptTokensDetails{CachedTokens: s.CachedTokens, CacheWriteTokens: s.CacheWriteTokens},
		CompletionTokensDetails: &CompletionTokensDetails{ReasoningTokens: s.ReasoningTokens},
	}
}

// ResponsesUsage is a Responses answer's usage. InputTokens includes the
// cached tokens, OutputTokens the reasoning tokens, as chat's do.
type ResponsesUsage struct {
	InputTokens         int64               `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int64               `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int64               `json:"total_tokens"`
}

// InputTokensDetails splits the input tokens.
type InputTokensDetails struct {
	CachedTokens     int64 `json:"cached_tokens"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
}

// OutputTokensDetails splits the output tokens.
type OutputTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// Sluice returns the usage in Sluice's terms.
func (u *ResponsesUsage) Sluice() sluice.Usage {
	return (&ChatUsage{
		PromptTokens:            u.InputTokens,
		CompletionTokens:        u.OutputTokens,
		TotalTokens:             u.TotalTokens,
		PromptTokensDetails:     &PromptTokensDetails{CachedTokens: u.InputTokensDetails.CachedTokens, CacheWriteTokens: u.InputTokensDetails.CacheWriteTokens},
		CompletionTokensDetails: &CompletionTokensDetails{ReasoningTokens: u.OutputTokensDetails.ReasoningTokens},
	}).Sluice()
}

// ResponsesUsageOf returns a usage in Responses' terms for one in Sluice's.
func ResponsesUsageOf(s sluice.Usage) *ResponsesUsage {
	return &ResponsesUsage{
		InputTokens:         s.PromptTokens,
		InputTokensDetails:  InputTokensDetails{CachedTokens: s.CachedTokens, CacheWriteTokens: s.CacheWriteTokens},
		OutputTokens:        s.CompletionTokens,
		OutputTokensDetails: OutputTokensDetails{ReasoningTokens: s.ReasoningTokens},
		TotalTokens:         s.PromptTokens + s.CompletionTokens,
	}
}

// UsageValue reads a chat completions (or embeddings) usage object, the
// raw value of an answer's or a chunk's "usage" member, as
// ChatUsage.Sluice maps it. Measured is false when there is none (or it is
// null), or it does not decode. It reads the object without reflection
// when it can (scanUsage), as it is called for every answer passed
// through.
func UsageValue(v []byte) sluice.Usage { return readUsage(v, chatUsageNames) }

// ResponsesUsageValue reads a Responses usage object (the raw value of a
// response's "usage" member) as UsageValue reads chat's: input tokens, of
// which cached, are the prompt; output tokens, of which reasoning, the
// completion.
func ResponsesUsageValue(v []byte) sluice.Usage { return readUsage(v, responsesUsageNames) }

// flatUsage holds the counts of a usage object Sluice reads, under chat's
// names, as encoding/json decodes chat's.
type flatUsage struct {
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

// usageNames are the members of one protocol's usage object that hold
// what sluice.Usage counts, and decode, the reference reader (encoding/json)
// for what scanUsage leaves to it.
type usageNames struct {
	prompt, completion, promptDetails, completionDetails string
	decode                                               func(obj []byte) (flatUsage, bool)
}

// chatUsageNames are the members of a chat completions usage object.
var chatUsageNames = &usageNames{
	prompt: "prompt_tokens", completion: "completion_tokens",
	promptDetails: "prompt_tokens_details", completionDetails: "completion_tokens_details",
	decode: decodeUsage,
}

// responsesUsageNames are the members of a Responses usage object.
var responsesUsageNames = &usageNames{
	prompt: "input_tokens", completion: "output_tokens",
	promptDetails: "input_tokens_details", completionDetails: "output_tokens_details",
	decode: decodeResponsesUsage,
}

// readUsage reads a usage object whose members are named n.
func readUsage(v []byte, n *usageNames) sluice.Usage {
	if len(v) == 0 || v[0] != '{' {
		return sluice.Usage{}
	}
	u, ok := scanUsage(v, n)
	if !ok {
		if u, ok = n.decode(v); !ok {
			return sluice.Usage{}
		}
	}
	return (&ChatUsage{
		PromptTokens:            u.PromptTokens,
		CompletionTokens:        u.CompletionTokens,
		TotalTokens:             u.TotalTokens,
		PromptTokensDetails:     &PromptTokensDetails{CachedTokens: u.PromptTokensDetails.CachedTokens},
		CompletionTokensDetails: &CompletionTokensDetails{ReasoningTokens: u.CompletionTokensDetails.ReasoningTokens},
	}).Sluice()
}

// scanUsage decodes a usage object whose members are named n without
// reflection, exactly as n.decode decodes it, for the objects upstreams
// send: plain keys, integer counts, details as objects or null. ok is false
// for anything else, which n.decode then decodes (or refuses).
func scanUsage(obj []byte, n *usageNames) (u flatUsage, ok bool) {
	err := jsonfield.PlainMembers(obj, func(key, value []byte) error {
		switch string(key) {
		case n.prompt:
			return jsonfield.DecodeInt(&u.PromptTokens, value)
		case n.completion:
			return jsonfield.DecodeInt(&u.CompletionTokens, value)
		case "total_tokens":
			return jsonfield.DecodeInt(&u.TotalTokens, value)
		case n.promptDetails:
			return scanDetail(&u.PromptTokensDetails.CachedTokens, "cached_tokens", value)
		case n.completionDetails:
			return scanDetail(&u.CompletionTokensDetails.ReasoningTokens, "reasoning_tokens", value)
		}
		return nil
	})
	return u, err == nil
}

// decodeUsage decodes a chat usage object with encoding/json, the
// reference, for the objects scanUsage leaves to it.
func decodeUsage(obj []byte) (u flatUsage, ok bool) {
	return u, json.Unmarshal(obj, &u) == nil
}

// decodeResponsesUsage decodes a Responses usage object with
// encoding/json, the reference, for the objects scanUsage leaves to it.
func decodeResponsesUsage(obj []byte) (u flatUsage, ok bool) {
	var r ResponsesUsage
	if json.Unmarshal(obj, &r) != nil {
		return u, false
	}
	u.PromptTokens, u.CompletionTokens, u.TotalTokens = r.InputTokens, r.OutputTokens, r.TotalTokens
	u.PromptTokensDetails.CachedTokens = r.InputTokensDetails.CachedTokens
	u.CompletionTokensDetails.ReasoningTokens = r.OutputTokensDetails.ReasoningTokens
	return u, true
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

package upstream

import (
	"bytes"
	"encoding/json"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol/gemini"
)

// answerFields are the top-level members Sluice reads of an answer
// (OpenAI's, or Anthropic's, whose "usage" is top-level too) or an OpenAI
// stream chunk, as raw values: nil when absent, the last one when
// repeated (as encoding/json reads a repeated key).
type answerFields struct {
	usage, choices []byte
	// id, object and store name a stored Responses response (storedID).
	id, object, store []byte
}

// readAnswer checks that obj is one well-formed JSON object and picks the
// members Sluice reads, in one pass that does not allocate. ok is false
// for anything else: an upstream that answers a JSON route with something
// that is not a JSON object (an HTML page, a cut chunk) has failed. Keys
// are matched as written ("usage", not "Usage" or an escaped spelling that
// encoding/json would also take): upstreams write them plainly.
func readAnswer(obj []byte) (f answerFields, ok bool) {
	err := jsonfield.Members(obj, func(key, value []byte) error {
		switch string(key) {
		case "usage", gemini.UsageKey:
			f.usage = value
		case "choices":
			f.choices = value
		case "id":
			f.id = value
		case "object":
			f.object = value
		case "store":
			f.store = value
		}
		return nil
	})
	return f, err == nil
}

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

// usageNames are the members of one protocol's usage object that hold
// what sluice.Usage counts, and decode, the reference reader (encoding/json)
// for what scanUsage leaves to it.
type usageNames struct {
	prompt, completion, promptDetails, completionDetails string
	decode                                               func(obj []byte) (openAIUsage, bool)
}

// chatUsageNames are the members of a chat completions usage object.
var chatUsageNames = &usageNames{
	prompt: "prompt_tokens", completion: "completion_tokens",
	promptDetails: "prompt_tokens_details", completionDetails: "completion_tokens_details",
	decode: decodeUsage,
}

// usageValue reads an OpenAI usage object (the raw value of an answer's
// "usage" member). Measured is false when there is none (or it is null), or
// it does not decode.
func usageValue(v []byte) sluice.Usage { return readUsage(v, chatUsageNames) }

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

// scanUsage decodes a usage object whose members are named n without
// reflection, exactly as n.decode decodes it, for the objects upstreams
// send: plain keys, integer counts, details as objects or null. ok is false
// for anything else, which n.decode then decodes (or refuses).
func scanUsage(obj []byte, n *usageNames) (u openAIUsage, ok bool) {
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

// isUsageOnly reports whether a chunk whose "choices" member is choices is
// the final usage chunk, whose choices are empty.
func isUsageOnly(choices []byte) bool {
	return len(choices) > 0 && choices[0] == '[' && len(bytes.TrimSpace(choices[1:len(choices)-1])) == 0
}

package gemini

import (
	"encoding/json"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
)

// Sluice returns the usage in Sluice's terms: the prompt is
// promptTokenCount (cached tokens included, as Gemini counts them) plus
// the tool results fed back (toolUsePromptTokenCount, input too); the
// completion is the candidates' tokens and the thoughts, as OpenAI's
// completion tokens include reasoning; the thoughts are the reasoning
// tokens. A total Gemini leaves out is the prompt and the completion.
func (u *UsageMetadata) Sluice() sluice.Usage {
	s := sluice.Usage{
		PromptTokens:     u.PromptTokenCount + u.ToolUsePromptTokenCount,
		CompletionTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CachedTokens:     u.CachedContentTokenCount,
		ReasoningTokens:  u.ThoughtsTokenCount,
		TotalTokens:      u.TotalTokenCount,
		Measured:         true,
	}
	if s.TotalTokens == 0 {
		s.TotalTokens = s.PromptTokens + s.CompletionTokens
	}
	return s
}

// UsageOf returns a usage in Gemini's terms for a usage in Sluice's. The
// cache-write count has no Gemini field (it stays in the prompt count).
func UsageOf(s sluice.Usage) *UsageMetadata {
	return &UsageMetadata{
		PromptTokenCount:        s.PromptTokens,
		CachedContentTokenCount: s.CachedTokens,
		CandidatesTokenCount:    s.CompletionTokens - s.ReasoningTokens,
		ThoughtsTokenCount:      s.ReasoningTokens,
		TotalTokenCount:         s.PromptTokens + s.CompletionTokens,
	}
}

// UsageValue reads a usageMetadata object (the raw value of an answer's or
// a chunk's usageMetadata member) as Sluice's usage (UsageMetadata.Sluice).
// Measured is false when there is none or it does not decode. It reads
// the object without reflection when it can, as it is called for every
// chunk of a stream that carries usage.
func UsageValue(v []byte) sluice.Usage {
	if len(v) == 0 || v[0] != '{' {
		return sluice.Usage{}
	}
	var g UsageMetadata
	err := jsonfield.Members(v, func(key, value []byte) error {
		switch string(key) {
		case "promptTokenCount":
			return jsonfield.DecodeInt(&g.PromptTokenCount, value)
		case "cachedContentTokenCount":
			return jsonfield.DecodeInt(&g.CachedContentTokenCount, value)
		case "candidatesTokenCount":
			return jsonfield.DecodeInt(&g.CandidatesTokenCount, value)
		case "thoughtsTokenCount":
			return jsonfield.DecodeInt(&g.ThoughtsTokenCount, value)
		case "toolUsePromptTokenCount":
			return jsonfield.DecodeInt(&g.ToolUsePromptTokenCount, value)
		case "totalTokenCount":
			return jsonfield.DecodeInt(&g.TotalTokenCount, value)
		}
		return nil
	})
	if err != nil {
		return decodeUsage(v)
	}
	return g.Sluice()
}

// decodeUsage reads a usageMetadata object with encoding/json, the
// reference, for the objects UsageValue leaves to it. (Its own variable:
// one that encoding/json decodes into lives on the heap, and the plain
// read would allocate.)
func decodeUsage(v []byte) sluice.Usage {
	var g UsageMetadata
	if json.Unmarshal(v, &g) != nil {
		return sluice.Usage{}
	}
	return g.Sluice()
}

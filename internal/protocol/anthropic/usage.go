package anthropic

import (
	"encoding/json"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
)

// Sluice returns the usage in Sluice's terms, whose prompt tokens include
// the cached and cache-write ones: input_tokens is only the uncached part
// of the prompt, the cache reads are the cached tokens and the writes the
// cache-write tokens.
func (u *Usage) Sluice() sluice.Usage {
	s := sluice.Usage{
		PromptTokens:     u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
		CompletionTokens: u.OutputTokens,
		CachedTokens:     u.CacheReadInputTokens,
		CacheWriteTokens: u.CacheCreationInputTokens,
		Measured:         true,
	}
	if u.OutputTokensDetails != nil {
		s.ReasoningTokens = u.OutputTokensDetails.ThinkingTokens
	}
	s.TotalTokens = s.PromptTokens + s.CompletionTokens
	return s
}

// UsageOf returns a usage in Anthropic's terms for one in Sluice's.
func UsageOf(s sluice.Usage) Usage {
	return Usage{
		InputTokens:              max(s.PromptTokens-s.CachedTokens-s.CacheWriteTokens, 0),
		CacheCreationInputTokens: s.CacheWriteTokens,
		CacheReadInputTokens:     s.CachedTokens,
		OutputTokens:             s.CompletionTokens,
	}
}

// UsageValue reads the usage of a whole Messages answer (the raw value of
// its "usage" member). Measured is false when there is none or it does
// not decode.
func UsageValue(v []byte) sluice.Usage {
	var u sluice.Usage
	AddUsage(&u, v)
	return u
}

// AddUsage adds a usage object of a stream (message_start's, or a
// message_delta's) to *s. Anthropic's counts are cumulative, and those an
// event carries replace earlier ones; those it leaves out stay. It reads
// the object without reflection when it can, as it is called once per
// event that carries usage.
func AddUsage(s *sluice.Usage, v []byte) {
	a, ok := readUsage(v)
	if !ok {
		return
	}
	m := (&Usage{
		InputTokens: max(a.InputTokens, 0), OutputTokens: max(a.OutputTokens, 0),
		CacheCreationInputTokens: max(a.CacheCreationInputTokens, 0), CacheReadInputTokens: max(a.CacheReadInputTokens, 0),
	}).Sluice()
	if a.InputTokens >= 0 {
		s.PromptTokens, s.CachedTokens, s.CacheWriteTokens = m.PromptTokens, m.CachedTokens, m.CacheWriteTokens
	}
	if a.OutputTokens >= 0 {
		s.CompletionTokens = m.CompletionTokens
	}
	s.TotalTokens = s.PromptTokens + s.CompletionTokens
	s.Measured = true
}

// eventUsage is a usage object as a stream event carries it. Counts it
// does not carry are -1 (see AddUsage).
type eventUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// readUsage reads a usage object, plainly when it can (as encoding/json
// would) and with encoding/json otherwise.
func readUsage(v []byte) (eventUsage, bool) {
	u := eventUsage{-1, -1, -1, -1}
	if len(v) == 0 || v[0] != '{' {
		return u, false
	}
	err := jsonfield.PlainMembers(v, func(key, value []byte) error {
		switch string(key) {
		case "input_tokens":
			return jsonfield.DecodeInt(&u.InputTokens, value)
		case "output_tokens":
			return jsonfield.DecodeInt(&u.OutputTokens, value)
		case "cache_creation_input_tokens":
			return jsonfield.DecodeInt(&u.CacheCreationInputTokens, value)
		case "cache_read_input_tokens":
			return jsonfield.DecodeInt(&u.CacheReadInputTokens, value)
		}
		return nil
	})
	if err != nil {
		return decodeUsage(v)
	}
	return u, true
}

// decodeUsage decodes a usage object with encoding/json, the reference,
// for the objects readUsage leaves to it. (Its own variable: one that
// encoding/json decodes into lives on the heap, and the plain read, once
// per event that carries usage, would allocate.)
func decodeUsage(v []byte) (eventUsage, bool) {
	u := eventUsage{-1, -1, -1, -1}
	return u, json.Unmarshal(v, &u) == nil
}

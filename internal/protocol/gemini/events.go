package gemini

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/sse"
)

// Event reads an event of a Gemini stream (a protocol.EventFunc),
// skimming it first: each is a whole answer chunk. Its usageMetadata
// replaces what came before (Gemini's counts are cumulative and the last
// one holds). The chunk that carries a finishReason, or a
// promptFeedback.blockReason (a prompt refused: no candidates), is the
// last: Gemini sends no end marker. One whose JSON is {"error":…} is the
// upstream's own failure.
var Event = protocol.Skimmed(EventMarkers, ReadEvent)

// EventMarkers are what a Gemini chunk is skimmed for (protocol.Markers):
// the members ReadEvent acts on (an "error" even when null).
var EventMarkers = protocol.NewMarkers(
	protocol.Marker{Quoted: `"` + UsageKey + `"`, Kind: protocol.AsMember}, protocol.Marker{Quoted: `"finishReason"`, Kind: protocol.AsMember},
	protocol.Marker{Quoted: `"blockReason"`, Kind: protocol.AsMember}, protocol.Marker{Quoted: `"error"`, Kind: protocol.AsKey})

// ReadEvent reads a chunk of a Gemini stream whole: the reference the
// skim agrees with.
func ReadEvent(ev sse.Event, _ *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error) {
	var usage, candidates, feedback, failure []byte
	if err := jsonfield.Members(ev.Data, func(key, value []byte) error {
		switch string(key) {
		case UsageKey:
			usage = value
		case "candidates":
			candidates = value
		case "promptFeedback":
			feedback = value
		case "error":
			failure = value
		}
		return nil
	}); err != nil || ev.Data[0] != '{' {
		return u, false, false, protocol.ErrMalformedEvent
	}
	if failure != nil {
		return u, false, false, protocol.ErrUpstreamErrorEvent
	}
	if v := UsageValue(usage); v.Measured {
		u = v
	}
	return u, false, finished(candidates) || blocked(feedback), nil
}

// finished reports whether a chunk's candidates include one with a
// finishReason: the answer's end.
func finished(candidates []byte) bool {
	end := false
	eachElement(candidates, func(c []byte) {
		if c[0] == '{' {
			_ = jsonfield.Members(c, func(key, value []byte) error {
				end = end || string(key) == "finishReason" && len(value) > 2 && value[0] == '"'
				return nil
			})
		}
	})
	return end
}

// eachElement calls fn with each element of arr, a JSON array that is
// known to be well-formed (part of a value Members checked); anything else
// than an array has none.
func eachElement(arr []byte, fn func(elem []byte)) {
	jsonfield.Elements(arr, func(start, end int) { fn(arr[start:end]) })
}

// blocked reports whether a promptFeedback names a blockReason.
func blocked(feedback []byte) bool {
	if len(feedback) == 0 || feedback[0] != '{' {
		return false
	}
	var reason bool
	_ = jsonfield.Members(feedback, func(key, value []byte) error {
		reason = reason || string(key) == "blockReason" && value[0] == '"'
		return nil
	})
	return reason
}

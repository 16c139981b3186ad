package openai

import (
	"bytes"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/sse"
)

// doneData is the data of the event that ends a chat stream.
var doneData = []byte("[DONE]")

// ChatEventMarkers are what a chat chunk is skimmed for
// (protocol.Markers): its usage, the only member Sluice reads of it.
var ChatEventMarkers = protocol.NewMarkers(protocol.Marker{Quoted: `"usage"`, Kind: protocol.AsMember})

// ChatEvent reads an event of a chat stream (a protocol.EventFunc),
// skimming it first: unnamed chunks, and [DONE] at the end. The usage-only
// chunk before the end exists when Sluice asked for it for a caller that
// did not (stream_options.include_usage): that caller never sees it.
func ChatEvent(ev sse.Event, req *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error) {
	switch {
	case ev.Data == nil:
		return u, false, false, nil // a keep-alive comment
	case bytes.Equal(ev.Data, doneData):
		return u, false, true, nil
	}
	if read, err := ChatEventMarkers.Skim(ev.Data); !read {
		return u, false, false, err
	}
	return ReadChatEvent(ev, req, u)
}

// ReadChatEvent reads a chunk of a chat stream whole, the reference the
// skim agrees with: one JSON object, its usage and choices picked in a
// check that does not allocate; anything else is
// protocol.ErrMalformedEvent.
func ReadChatEvent(ev sse.Event, req *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error) {
	var usage, choices []byte
	if jsonfield.Members(ev.Data, func(key, value []byte) error {
		switch string(key) {
		case "usage":
			usage = value
		case "choices":
			choices = value
		}
		return nil
	}) != nil {
		return u, false, false, protocol.ErrMalformedEvent
	}
	if v := UsageValue(usage); v.Measured {
		u = v
		drop = !req.IncludeUsage && isUsageOnly(choices)
	}
	return u, drop, false, nil
}

// isUsageOnly reports whether a chunk whose "choices" member is choices is
// the final usage chunk, whose choices are empty.
func isUsageOnly(choices []byte) bool {
	return len(choices) > 0 && choices[0] == '[' && len(bytes.TrimSpace(choices[1:len(choices)-1])) == 0
}

// ResponsesEventMarkers are what a Responses event is skimmed for
// (protocol.Markers): the types ReadResponsesEvent acts on.
var ResponsesEventMarkers = protocol.NewMarkers(
	protocol.Marker{Quoted: `"response.completed"`}, protocol.Marker{Quoted: `"response.incomplete"`},
	protocol.Marker{Quoted: `"error"`}, protocol.Marker{Quoted: `"response.failed"`})

// ResponsesEvent reads an event of a Responses stream (a
// protocol.EventFunc), skimming it first. Events are JSON objects; unknown
// ones pass (OpenAI adds event types over time). The stream ends with
// response.completed or response.incomplete, whose response carries the
// usage; an error or response.failed is the upstream's failure.
var ResponsesEvent = protocol.Skimmed(ResponsesEventMarkers, ReadResponsesEvent)

// ReadResponsesEvent reads an event of a Responses stream whole: the
// reference the skim agrees with.
func ReadResponsesEvent(ev sse.Event, _ *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error) {
	var typ, response []byte
	if err := jsonfield.Members(ev.Data, func(key, value []byte) error {
		switch string(key) {
		case "type":
			typ = value
		case "response":
			response = value
		}
		return nil
	}); err != nil {
		return u, false, false, protocol.ErrMalformedEvent
	}
	switch string(typ) {
	case `"response.completed"`, `"response.incomplete"`:
		var usage []byte
		if jsonfield.Members(response, func(key, value []byte) error {
			if string(key) == "usage" {
				usage = value
			}
			return nil
		}) == nil {
			if v := ResponsesUsageValue(usage); v.Measured {
				u = v
			}
		}
		return u, false, true, nil
	case `"error"`, `"response.failed"`:
		return u, false, false, protocol.ErrUpstreamErrorEvent
	}
	return u, false, false, nil
}

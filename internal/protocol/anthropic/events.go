package anthropic

import (
	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/sse"
)

// EventMarkers are what an event of a Messages stream is skimmed for
// (protocol.Markers): the types ReadEvent acts on.
var EventMarkers = protocol.NewMarkers(
	protocol.Marker{Quoted: `"message_start"`}, protocol.Marker{Quoted: `"message_delta"`},
	protocol.Marker{Quoted: `"message_stop"`}, protocol.Marker{Quoted: `"error"`})

// Event reads an event of a Messages stream (a protocol.EventFunc),
// skimming it first. Events are JSON objects; unknown ones pass (Anthropic
// adds event types over time). A stream ends with message_stop, and an
// error event is the upstream's failure after the 200.
var Event = protocol.Skimmed(EventMarkers, ReadEvent)

// ReadEvent reads an event of a Messages stream whole: the reference the
// skim agrees with. The usage of message_start (in its message) and of
// message_delta add up (AddUsage).
func ReadEvent(ev sse.Event, _ *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error) {
	var typ, message, usage []byte
	if err := jsonfield.Members(ev.Data, func(key, value []byte) error {
		switch string(key) {
		case "type":
			typ = value
		case "message":
			message = value
		case "usage":
			usage = value
		}
		return nil
	}); err != nil {
		return u, false, false, protocol.ErrMalformedEvent
	}
	switch string(typ) {
	case `"message_start"`:
		if len(message) > 0 && message[0] == '{' {
			_ = jsonfield.Members(message, func(key, value []byte) error {
				if string(key) == "usage" {
					usage = value
				}
				return nil
			})
		}
		AddUsage(&u, usage)
	case `"message_delta"`:
		AddUsage(&u, usage)
	case `"message_stop"`:
		return u, false, true, nil
	case `"error"`:
		return u, false, false, protocol.ErrUpstreamErrorEvent
	}
	return u, false, false, nil
}

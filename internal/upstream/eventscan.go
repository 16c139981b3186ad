package upstream

import (
	"bytes"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonvalid"
	"github.com/sluicehq/sluice/internal/sse"
)

// A stream passes dozens of events, and almost all of them are content
// deltas that carry nothing Sluice reads. Reading each one whole (the JSON
// validated, its members picked) was most of what a passed-through stream
// cost Sluice beyond a bare proxy. So a dialect first skims an event's
// bytes for its markers: the quoted words that any member it reads would
// have to contain, as written ("usage" as a key, or a type such as
// "message_stop" as a value; the dialects match keys and types as
// written, never an escaped spelling). An event without any is only
// checked to be a JSON object (jsonvalid, which neither decodes nor
// allocates: the caller's SDK parses every event, and one that is not JSON
// fails it with a parse error before the stream's error event could say
// why); one with a marker is read whole as before. A marker is a necessary
// condition, not a sufficient one (it may sit in a nested object, or a
// string that happens to be it): a false hit costs the whole read, never a
// wrong answer. The skim and the whole read agree on every event
// (FuzzEventSkimAgreesWithRead).
//
// Each marker is searched for from a byte less common than its opening
// quote, and the bytes before that checked where it is found: JSON has a
// quote every few bytes, and a search that starts with one stops at each
// (bytes.Index finds its first byte, then compares). That was most of
// what the skim cost on Messages and Responses events, skimmed for four
// markers each (against chat's one). The search starts from a marker's
// first '.' (Responses' "response.completed": every Responses event holds
// "response." but few a ".completed"), else from the byte after its quote
// ('_' would be no better: JSON keys are snake_case).

// eventFunc is a dialect's read of a stream event (Dialect.Event).
type eventFunc = func(ev sse.Event, req *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error)

// skimmedEvent is the Event of a dialect whose events are JSON objects
// with no end marker of their own: a comment (no data) passes, an event
// without any of m's markers is only skimmed, and one with a marker is
// read whole by read.
func skimmedEvent(m *eventMarkers, read eventFunc) eventFunc {
	return func(ev sse.Event, req *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error) {
		if ev.Data == nil {
			return u, false, false, nil // a comment
		}
		if marked, err := m.skim(ev.Data); !marked {
			return u, false, false, err
		}
		return read(ev, req, u)
	}
}

// markerKind is where a marker's occurrence makes an event one to read.
type markerKind uint8

const (
	// asValue: wherever it is not a key (not followed, past white space,
	// by a colon). The event types a dialect acts on.
	asValue markerKind = iota
	// asMember: as a key whose value is not null. OpenAI sends
	// "usage":null in every chunk of a stream that asked for usage, and
	// only the last one's counts.
	asMember
	// asKey: as a key, whatever its value. Gemini's "error" is a failure
	// even when null.
	asKey
)

// marker is a quoted string a dialect's events are skimmed for.
type marker struct {
	quoted string // with its quotes, as written
	kind   markerKind
}

// eventMarkers are what a dialect's events are skimmed for.
type eventMarkers struct {
	markers []marker
	anchors []int // where in each marker its search starts: see newEventMarkers
}

// newEventMarkers returns the markers ms, each a quoted string, each
// searched for from its first '.', else from the byte after its quote.
func newEventMarkers(ms ...marker) *eventMarkers {
	m := &eventMarkers{markers: ms, anchors: make([]int, len(ms))}
	for i, mk := range ms {
		if len(mk.quoted) < 3 || mk.quoted[0] != '"' || mk.quoted[len(mk.quoted)-1] != '"' {
			panic("upstream: an event marker is a quoted string: " + mk.quoted)
		}
		m.anchors[i] = 1 + max(strings.IndexByte(mk.quoted[1:], '.'), 0)
	}
	return m
}

// skim checks that data (an event's data, not nil) is a JSON object,
// errMalformedEvent otherwise, and reports whether it holds one of m's
// markers, so must be read whole. It does not allocate.
func (m *eventMarkers) skim(data []byte) (read bool, err error) {
	if !jsonvalid.Valid(data) {
		return false, errMalformedEvent
	}
	for n := range m.markers {
		mk := &m.markers[n]
		at := m.anchors[n]
		head, tail := asBytes(mk.quoted[:at]), asBytes(mk.quoted[at:])
		for i := at; i < len(data); {
			j := bytes.Index(data[i:], tail)
			if j < 0 {
				break
			}
			i += j + len(tail) // past this occurrence of the tail
			if bytes.Equal(data[i-len(mk.quoted):i-len(tail)], head) && mk.found(data, i) {
				return true, nil
			}
		}
	}
	return false, nil
}

// found reports whether an occurrence of mk that ends at b[end] makes the
// event one to read.
func (mk *marker) found(b []byte, end int) bool {
	k := skipBlank(b, end)
	key := k < len(b) && b[k] == ':'
	switch mk.kind {
	case asValue:
		return !key
	case asMember:
		return key && !bytes.HasPrefix(b[skipBlank(b, k+1):], nullValue)
	}
	return key
}

var nullValue = []byte("null")

// skipBlank returns the index of the first byte of b from i on that is not
// JSON white space, or len(b).
func skipBlank(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// Package protocol holds what the wire protocols' packages
// (protocol/openai, protocol/anthropic, protocol/gemini) share to read a
// stream: the signature of an event's read, the two ways a stream's event
// fails, and the skim that spares most events the whole read. It imports
// nothing of ours but package sluice and the leaves sse and jsonvalid.
package protocol

import (
	"bytes"
	"errors"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonvalid"
	"github.com/sluicehq/sluice/internal/sse"
)

// EventFunc reads one event of a stream: it returns the usage so far, u
// with what the event says added, whether the caller does not get the
// event (drop: one that Sluice asked for and the caller did not) and
// whether it ends the stream (done). An event that is malformed
// (ErrMalformedEvent), or is the upstream's own error
// (ErrUpstreamErrorEvent), is an error: the stream failed. (Values in and
// out: a pointer through a func value would cost an allocation per
// stream.)
type EventFunc = func(ev sse.Event, req *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error)

// ErrMalformedEvent ends a stream with a data event that is not JSON (nor
// the end marker of a protocol that has one, OpenAI chat's [DONE]).
var ErrMalformedEvent = errors.New("upstream stream event is neither a JSON object nor [DONE]")

// ErrUpstreamErrorEvent ends a stream in which the upstream sent its own
// error event (an overload after the 200, say).
var ErrUpstreamErrorEvent = errors.New("upstream stream sent an error event")

// A stream passes dozens of events, and almost all of them are content
// deltas that carry nothing Sluice reads. Reading each one whole (the JSON
// validated, its members picked) was most of what a passed-through stream
// cost Sluice beyond a bare proxy. So a protocol's event read first skims an event's
// bytes for its markers: the quoted words that any member it reads would
// have to contain, as written ("usage" as a key, or a type such as
// "message_stop" as a value; the protocols' reads match keys and types as
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

// Skimmed is the EventFunc of a protocol whose events are JSON objects
// with no end marker of their own: a comment (no data) passes, an event
// without any of m's markers is only skimmed, and one with a marker is
// read whole by read.
func Skimmed(m *Markers, read EventFunc) EventFunc {
	return func(ev sse.Event, req *sluice.Request, u sluice.Usage) (_ sluice.Usage, drop, done bool, err error) {
		if ev.Data == nil {
			return u, false, false, nil // a comment
		}
		if marked, err := m.Skim(ev.Data); !marked {
			return u, false, false, err
		}
		return read(ev, req, u)
	}
}

// MarkerKind is where a marker's occurrence makes an event one to read.
type MarkerKind uint8

const (
	// AsValue: wherever it is not a key (not followed, past white space,
	// by a colon). The event types a protocol acts on.
	AsValue MarkerKind = iota
	// AsMember: as a key whose value is not null. OpenAI sends
	// "usage":null in every chunk of a stream that asked for usage, and
	// only the last one's counts.
	AsMember
	// AsKey: as a key, whatever its value. Gemini's "error" is a failure
	// even when null.
	AsKey
)

// Marker is a quoted string a protocol's events are skimmed for.
type Marker struct {
	Quoted string // with its quotes, as written
	Kind   MarkerKind
}

// Markers are what a protocol's events are skimmed for. Immutable once
// made; safe for concurrent use.
type Markers struct {
	kinds []MarkerKind
	// Each marker split where its search starts (see NewMarkers): head
	// before, tail from there.
	heads, tails [][]byte
}

// NewMarkers returns the markers ms, each a quoted string, each searched
// for from its first '.', else from the byte after its quote. It panics on
// a marker that is not a quoted string: markers are fixed at start.
func NewMarkers(ms ...Marker) *Markers {
	m := &Markers{}
	for _, mk := range ms {
		if len(mk.Quoted) < 3 || mk.Quoted[0] != '"' || mk.Quoted[len(mk.Quoted)-1] != '"' {
			panic("protocol: an event marker is a quoted string: " + mk.Quoted)
		}
		at := 1 + max(strings.IndexByte(mk.Quoted[1:], '.'), 0)
		m.kinds = append(m.kinds, mk.Kind)
		m.heads = append(m.heads, []byte(mk.Quoted[:at]))
		m.tails = append(m.tails, []byte(mk.Quoted[at:]))
	}
	return m
}

// Skim checks that data (an event's data, not nil) is a JSON object,
// ErrMalformedEvent otherwise, and reports whether it holds one of m's
// markers, so must be read whole. It does not allocate.
func (m *Markers) Skim(data []byte) (read bool, err error) {
	if !jsonvalid.Valid(data) {
		return false, ErrMalformedEvent
	}
	for n, tail := range m.tails {
		head := m.heads[n]
		for i := len(head); i < len(data); {
			j := bytes.Index(data[i:], tail)
			if j < 0 {
				break
			}
			i += j + len(tail) // past this occurrence of the tail
			if bytes.Equal(data[i-len(tail)-len(head):i-len(tail)], head) && found(m.kinds[n], data, i) {
				return true, nil
			}
		}
	}
	return false, nil
}

// found reports whether an occurrence of a marker of kind k that ends at
// b[end] makes the event one to read.
func found(k MarkerKind, b []byte, end int) bool {
	i := skipBlank(b, end)
	key := i < len(b) && b[i] == ':'
	switch k {
	case AsValue:
		return !key
	case AsMember:
		return key && !bytes.HasPrefix(b[skipBlank(b, i+1):], nullValue)
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

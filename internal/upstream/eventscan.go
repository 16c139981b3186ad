package upstream

import "bytes"

// A stream passes dozens of events, and almost all of them are content
// deltas that carry nothing Sluice reads. Reading each one whole (the JSON
// validated, its members picked) was most of what a passed-through stream
// cost Sluice beyond a bare proxy. So a dialect first skims an event's
// bytes for its markers: the quoted words that any member it reads would
// have to contain, as written ("usage" as a key, or a type such as
// "message_stop" as a value; the dialects match keys and types as
// written, never an escaped spelling). An event without any is only
// checked to be shaped like a JSON object; one with a marker is read whole
// as before. A marker is a necessary condition, not a sufficient one (it
// may sit in a nested object, or a string that happens to be it): a false
// hit costs the whole read, never a wrong answer. For any JSON object the
// skim and the whole read agree (FuzzEventSkimAgreesWithRead); the skim
// only lets through malformed JSON that is shaped like an object, where
// the whole read refused it too.

// eventMarkers are what a dialect's events are skimmed for.
type eventMarkers struct {
	// values are quoted strings that matter wherever they are not a key:
	// the event types a dialect acts on.
	values []string
	// members are quoted keys that matter when their value is not null.
	members []string
}

// skim checks that data (an event's data, not nil) is shaped like a JSON
// object, errMalformedEvent otherwise, and reports whether it holds one of
// m's markers, so must be read whole. It does not allocate.
func (m *eventMarkers) skim(data []byte) (read bool, err error) {
	if !objectShaped(data) {
		return false, errMalformedEvent
	}
	for _, q := range m.values {
		if hasValue(data, q) {
			return true, nil
		}
	}
	for _, q := range m.members {
		if hasMember(data, q) {
			return true, nil
		}
	}
	return false, nil
}

// objectShaped reports whether the first and last bytes of b other than
// white space are "{" and "}". What upstreams send when a stream breaks
// (an HTML page, plain text, a chunk cut short) is not.
func objectShaped(b []byte) bool {
	b = bytes.Trim(b, " \t\r\n")
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}'
}

// hasValue reports whether the quoted string q occurs in b other than as a
// key (followed, past white space, by a colon): wherever a member's value
// is q, it does.
func hasValue(b []byte, q string) bool {
	for i := 0; ; {
		j := bytes.Index(b[i:], asBytes(q))
		if j < 0 {
			return false
		}
		i += j + len(q)
		if k := skipBlank(b, i); k == len(b) || b[k] != ':' {
			return true
		}
	}
}

// hasMember reports whether the quoted string q occurs in b as a key whose
// value is not null: wherever a member named q has such a value, it does.
// (OpenAI sends "usage":null in every chunk of a stream that asked for
// usage, and only the last one's counts.)
func hasMember(b []byte, q string) bool {
	for i := 0; ; {
		j := bytes.Index(b[i:], asBytes(q))
		if j < 0 {
			return false
		}
		i += j + len(q)
		if k := skipBlank(b, i); k < len(b) && b[k] == ':' {
			if !bytes.HasPrefix(b[skipBlank(b, k+1):], nullValue) {
				return true
			}
		}
	}
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

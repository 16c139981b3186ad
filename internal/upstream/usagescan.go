package upstream

import (
	"bytes"
	"errors"

	"github.com/sluicehq/sluice/internal/protocol/gemini"
)

// maxUsageValue bounds the usage value a usageScanner keeps. Real usage
// objects are a few hundred bytes; a longer one is not measured.
const maxUsageValue = 64 << 10

// errNotJSONObject ends an answer on a JSON route that is not one JSON
// object.
var errNotJSONObject = errors.New("upstream answer is not a JSON object")

// usageScanner follows a JSON answer that passes through in pieces, too
// long to hold, and picks its top-level usage member on the way without
// keeping the rest: "usage", or Gemini's "usageMetadata", the members
// readAnswer reads in an answer it holds (no answer has both). It is a
// small byte state machine: strings and their escapes, nesting depth, and
// the key of each member at depth 1. It keeps only the usage value (the
// last one, as encoding/json reads a repeated key), up to maxUsageValue
// bytes. It checks the answer's shape, not every
// rule of JSON: one object, brackets balanced, nothing but white space
// after it; a malformed number or literal inside is not noticed (a held
// answer is validated whole by readAnswer instead). One per answer; the
// zero value is ready.
type usageScanner struct {
	err       error // errNotJSONObject, sticky
	depth     int
	started   bool // the answer's opening brace was seen
	closed    bool // ... and its closing one
	inString  bool
	escaped   bool // the previous byte in a string was a backslash
	expectKey bool // at depth 1, the next string is a key
	inKey     bool // the current string is a key at depth 1
	key       [len(gemini.UsageKey)]byte
	keyLen    int  // bytes of the current key, counted past len(key) (the longest usage key)
	keyPlain  bool // the current key has no escapes
	isUsage   bool // the last key at depth 1 was a usage key; its value is next
	await     bool // the usage value starts at the next byte that is not white space
	capturing bool // inside the usage value
	overflow  bool // the usage value is longer than maxUsageValue
	value     []byte
}

// Write feeds the next bytes of the answer.
func (s *usageScanner) Write(p []byte) {
	for i := 0; i < len(p) && s.err == nil; i++ {
		if s.inString && !s.escaped && !s.inKey && !s.capturing {
			// Most of a long answer is string content: jump to the
			// string's next quote or backslash (both searches vectorised).
			rest := p[i:]
			j := bytes.IndexByte(rest, '"')
			if j < 0 {
				j = len(rest)
			}
			if k := bytes.IndexByte(rest[:j], '\\'); k >= 0 {
				j = k
			}
			if i += j; i == len(p) {
				return
			}
		}
		s.step(p[i])
	}
}

// step takes one byte.
func (s *usageScanner) step(c byte) {
	if s.inString {
		s.stringByte(c)
		return
	}
	if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
		if s.capturing {
			s.capture(c) // trimmed at the end if it follows a scalar
		}
		return
	}
	switch {
	case s.closed || !s.started && c != '{':
		s.err = errNotJSONObject
		return
	case s.await:
		s.await, s.capturing, s.overflow, s.value = false, true, false, s.value[:0]
	}
	switch c {
	case '"':
		s.inString = true
		if s.depth == 1 && s.expectKey {
			s.inKey, s.expectKey, s.keyLen, s.keyPlain = true, false, 0, true
		}
	case '{', '[':
		s.started = true
		s.depth++
		s.expectKey = s.depth == 1
	case '}', ']':
		s.depth--
		switch {
		case s.depth < 0:
			s.err = errNotJSONObject
		case s.depth == 0:
			s.closed = true
			s.capturing = false // a scalar usage value ends at the closing brace
			return
		case s.depth == 1 && s.capturing:
			s.capture(c) // the usage object (or array) is complete
			s.capturing = false
			return
		}
	case ',':
		if s.depth == 1 {
			s.expectKey = true
			s.capturing = false // a scalar usage value ends here
			return
		}
	case ':':
		if s.depth == 1 {
			s.await, s.isUsage = s.isUsage, false
			return
		}
	}
	if s.capturing {
		s.capture(c)
	}
}

// stringByte takes a byte inside a string.
func (s *usageScanner) stringByte(c byte) {
	if s.capturing {
		s.capture(c)
	}
	switch {
	case s.escaped:
		s.escaped = false
		return
	case c == '\\':
		s.escaped = true
		s.keyPlain = false
		return
	case c != '"':
		if s.inKey {
			if s.keyLen < len(s.key) {
				s.key[s.keyLen] = c
			}
			s.keyLen++
		}
		return
	}
	s.inString = false
	if s.inKey {
		s.inKey = false
		s.isUsage = s.keyPlain && s.keyLen <= len(s.key) && isUsageKey(s.key[:s.keyLen])
	}
}

// isUsageKey reports whether a top-level key names the answer's usage.
func isUsageKey(key []byte) bool {
	return string(key) == "usage" || string(key) == gemini.UsageKey
}

func (s *usageScanner) capture(c byte) {
	if len(s.value) >= maxUsageValue {
		s.overflow = true
		return
	}
	s.value = append(s.value, c)
}

// Err reports an answer that is not a JSON object: errNotJSONObject for
// what was fed so far, or, once the whole answer was fed (end true), also
// for one that stopped before its object closed.
func (s *usageScanner) Err(end bool) error {
	if s.err == nil && end && !s.closed {
		return errNotJSONObject
	}
	return s.err
}

// Usage returns the raw value of the answer's last top-level usage member
// ("usage" or "usageMetadata"), nil when there is none, or it was cut or
// too long.
func (s *usageScanner) Usage() []byte {
	if s.capturing || s.await || s.overflow || s.value == nil {
		return nil
	}
	return bytes.TrimRight(s.value, " \t\n\r")
}

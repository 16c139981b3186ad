package redact

import (
	"encoding/json"
	"strings"
)

// Restore replaces the session's placeholders in text with the values they
// stand for. Text without one is returned as it is, without allocating.
func (s *Session) Restore(text string) string { return s.restore(text, false) }

// RestoreJSON is Restore for JSON text, where a placeholder stands inside
// a string literal: each value is written escaped for one (an operator
// pattern may match a quote or a backslash).
func (s *Session) RestoreJSON(text string) string { return s.restore(text, true) }

func (s *Session) restore(text string, inJSON bool) string {
	if len(s.values) == 0 {
		return text
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(text); {
		n := strings.IndexByte(text[i:], '[')
		if n < 0 {
			break
		}
		open := i + n
		close := strings.IndexByte(text[open:], ']')
		if close < 0 || close >= s.longest {
			i = open + 1
			continue
		}
		value, ok := s.values[text[open:open+close+1]]
		if !ok {
			i = open + 1
			continue
		}
		b.WriteString(text[last:open])
		if inJSON {
			quoted, _ := json.Marshal(value) // a string always marshals
			value = string(quoted[1 : len(quoted)-1])
		}
		b.WriteString(value)
		last = open + close + 1
		i = last
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// Stream restores placeholders in an answer that arrives in pieces. Feed
// it the text deltas in order; each call returns the restored text that is
// safe to send, holding back a trailing fragment that may be the start of
// a placeholder ("[EMA") until the next delta settles it; Flush returns
// what is held at the end. The concatenation of what it returns is
// Restore of the concatenated deltas, however they are split.
type Stream struct {
	session *Session
	held    string
}

// Stream starts restoring one streamed answer.
func (s *Session) Stream() *Stream { return &Stream{session: s} }

// Feed takes the next delta and returns the text to send now.
func (r *Stream) Feed(delta string) string {
	text := delta
	if r.held != "" {
		text = r.held + delta
		r.held = ""
	}
	if cut := r.session.partial(text); cut < len(text) {
		r.held = text[cut:]
		text = text[:cut]
	}
	return r.session.Restore(text)
}

// Flush returns the fragment still held: the answer ended inside it.
func (r *Stream) Flush() string {
	held := r.held
	r.held = ""
	return held
}

// partial returns where a trailing proper prefix of one of the session's
// placeholders starts in text, or len(text) when none does. A placeholder
// has one '[', its first byte, so only the last '[' can start one.
func (s *Session) partial(text string) int {
	open := strings.LastIndexByte(text, '[')
	if open < 0 || len(text)-open >= s.longest {
		return len(text)
	}
	tail := text[open:]
	for ph := range s.values {
		if len(tail) < len(ph) && strings.HasPrefix(ph, tail) {
			return open
		}
	}
	return len(text)
}

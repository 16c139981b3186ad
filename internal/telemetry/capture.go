package telemetry

import (
	"bytes"
	"net/http"
	"strings"
	"unicode/utf8"
)

// maxContent bounds the prompt and the completion a trace records for a
// key with trace_content, each: the first 32 KiB, cut at a UTF-8 boundary.
// modelScan is how much of an answer is kept otherwise, to read the model
// it names.
const (
	maxContent = 32 << 10
	modelScan  = 8 << 10
)

// capture is the writer of a recorded request's answer: it passes every
// write on and keeps the first limit bytes — the completion as the caller
// got it (for a stream, its events as delivered), and the model it names.
type capture struct {
	http.ResponseWriter
	limit   int
	head    []byte
	written int64
}

func (c *capture) Write(b []byte) (int, error) {
	if room := c.limit - len(c.head); room > 0 {
		c.head = append(c.head, b[:min(room, len(b))]...)
	}
	c.written += int64(len(b))
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (to flush, to
// set deadlines).
func (c *capture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// bounded is b as text of at most maxContent bytes, and whether b was cut.
func bounded(b []byte) (string, bool) {
	if len(b) <= maxContent {
		return strings.ToValidUTF8(string(b), "\uFFFD"), false
	}
	cut := maxContent
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return strings.ToValidUTF8(string(b[:cut]), "\uFFFD"), true
}

// responseModel is the first model an answer names, "" when its first
// bytes name none: the "model" member of an OpenAI or Anthropic answer
// (of a stream's first event; Anthropic's message_start and the Responses
// API's response.created hold it one level down) or Gemini's
// "modelVersion". A member name in quotes cannot occur inside a JSON string
// (its quotes would be escaped), so the first one found is a member's.
func responseModel(b []byte) string {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '"')
		if i < 0 {
			return ""
		}
		b = b[i+1:]
		var rest []byte
		switch {
		case bytes.HasPrefix(b, []byte(`model"`)):
			rest = b[len(`model"`):]
		case bytes.HasPrefix(b, []byte(`modelVersion"`)):
			rest = b[len(`modelVersion"`):]
		default:
			continue
		}
		if name, ok := stringValue(rest); ok {
			return name
		}
	}
	return ""
}

// stringValue reads `: "value"` (with optional blanks) at the start of b:
// a short string without escapes, as model names are.
func stringValue(b []byte) (string, bool) {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 || b[0] != ':' {
		return "", false
	}
	b = bytes.TrimLeft(b[1:], " \t\r\n")
	if len(b) == 0 || b[0] != '"' {
		return "", false
	}
	end := bytes.IndexByte(b[1:], '"')
	if end <= 0 || end > 256 || bytes.IndexByte(b[1:1+end], '\\') >= 0 {
		return "", false
	}
	return string(b[1 : 1+end]), true
}

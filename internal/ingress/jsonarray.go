package ingress

import (
	"bytes"
	"net/http"
	"strings"
)

// jsonArrayWriter turns a stream answered as server-sent events into the
// JSON array Gemini streams when it is not asked for ?alt=sse: "[", the
// data of each event as one element, elements separated by ",\r\n" as
// Gemini separates them, and "]" when the answer ends (close). It writes
// each event's element as the event is written, so the array reaches the
// caller chunk by chunk. An answer that is not a stream (an error, a JSON
// body) passes unchanged.
type jsonArrayWriter struct {
	http.ResponseWriter
	decided bool   // the status is written: framing is known
	framing bool   // the answer is a stream being reframed
	opened  bool   // "[" is written
	inData  bool   // a data line of the current event was written
	partial []byte // the start of a line whose end has not arrived
	out     []byte // the bytes of one Write, reused
}

func (a *jsonArrayWriter) WriteHeader(status int) {
	if !a.decided {
		a.decided = true
		h := a.Header()
		if status == http.StatusOK && strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
			a.framing = true
			h.Set("Content-Type", "application/json; charset=UTF-8")
		}
	}
	a.ResponseWriter.WriteHeader(status)
}

// Write takes whole or partial lines of events.
func (a *jsonArrayWriter) Write(b []byte) (int, error) {
	if !a.decided {
		a.WriteHeader(http.StatusOK)
	}
	if !a.framing {
		return a.ResponseWriter.Write(b)
	}
	n := len(b)
	out := a.out[:0]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			a.partial = append(a.partial, b...)
			break
		}
		line := b[:i]
		if len(a.partial) > 0 {
			line = append(a.partial, line...)
			a.partial = a.partial[:0]
		}
		out = a.line(out, bytes.TrimSuffix(line, []byte{'\r'}))
		b = b[i+1:]
	}
	a.out = out
	if len(out) == 0 {
		return n, nil
	}
	_, err := a.ResponseWriter.Write(out)
	return n, err
}

// line appends to out what one line of the events makes of the array: a
// data line the element's text (after the separator, or a line break
// inside an element of several data lines); a blank line ends the event;
// other fields and comments make nothing.
func (a *jsonArrayWriter) line(out, line []byte) []byte {
	value, ok := bytes.CutPrefix(line, []byte("data:"))
	switch {
	case len(line) == 0:
		a.inData = false
		return out
	case !ok:
		return out
	case a.inData:
		out = append(out, '\n')
	case a.opened:
		out = append(out, ",\r\n"...)
	default:
		out = append(out, '[')
		a.opened = true
	}
	a.inData = true
	return append(out, bytes.TrimPrefix(value, []byte{' '})...)
}

// close ends the array of a reframed stream: "[" too when no event came.
func (a *jsonArrayWriter) close() {
	if !a.framing {
		return
	}
	end := []byte("]")
	if !a.opened {
		end = []byte("[]")
	}
	if _, err := a.ResponseWriter.Write(end); err == nil {
		_ = http.NewResponseController(a.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection to flush.
func (a *jsonArrayWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

package pipeline

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/redact"
)

// restorer puts a request's masked values back in its answer as it goes
// to the caller, in the caller's protocol (after any translation). A JSON
// answer is held until the call ends and restored whole. A stream is
// restored event by event: its text deltas through one redact.Stream, so
// a placeholder split across events comes back whole (the fragment is
// held until the next delta, or sent in a copy of the last text event
// before the next event of another kind); any other event has its whole
// placeholders restored in place (tool-call arguments, a Responses
// stream's completed response).
type restorer struct {
	http.ResponseWriter
	session  *redact.Session
	protocol sluice.Protocol
	stream   *redact.Stream
	sse      bool
	headed   bool   // WriteHeader was called
	pending  []byte // a stream's bytes short of a whole event; a JSON answer's bytes
	// lastDelta is the stream's last text event, copied, to carry a
	// held fragment out when the stream moves on to another kind of event.
	lastDelta []byte
	failed    error
}

func newRestorer(w http.ResponseWriter, s *redact.Session, p sluice.Protocol) *restorer {
	return &restorer{ResponseWriter: w, session: s, protocol: p, stream: s.Stream()}
}

// Unwrap lets http.ResponseController reach the connection: what a flush
// sends is what Write already passed on.
func (r *restorer) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// WriteHeader drops the upstream's Content-Length: restored values make
// the answer longer than the one it measured.
func (r *restorer) WriteHeader(code int) {
	if r.headed {
		return
	}
	r.headed = true
	h := r.Header()
	h.Del("Content-Length")
	r.sse = strings.HasPrefix(h.Get("Content-Type"), "text/event-stream")
	r.ResponseWriter.WriteHeader(code)
}

func (r *restorer) Write(b []byte) (int, error) {
	if r.failed != nil {
		return 0, r.failed
	}
	if !r.headed {
		r.WriteHeader(http.StatusOK)
	}
	r.pending = append(r.pending, b...)
	if !r.sse {
		return len(b), nil
	}
	for {
		end := eventEnd(r.pending)
		if end < 0 {
			break
		}
		r.event(r.pending[:end])
		r.pending = r.pending[end:]
	}
	if r.failed != nil {
		return 0, r.failed
	}
	return len(b), nil
}

// finish sends what is held: a JSON answer, restored; a stream's held
// fragment and any bytes short of an event. An answer never begun is left
// alone: the caller of Serve writes its error.
func (r *restorer) finish() {
	if !r.headed {
		return
	}
	if !r.sse {
		if len(r.pending) > 0 {
			r.write([]byte(r.session.RestoreJSON(string(r.pending))))
		}
		return
	}
	r.flushHeld()
	if len(r.pending) > 0 {
		r.write([]byte(r.session.RestoreJSON(string(r.pending))))
	}
	if r.failed == nil {
		_ = http.NewResponseController(r.ResponseWriter).Flush()
	}
}

// event restores and passes on one whole event (its blank line included).
func (r *restorer) event(ev []byte) {
	start, end := eventData(ev)
	if start < 0 || !r.isTextDelta(ev[start:end]) {
		r.flushHeld()
		r.write([]byte(r.session.RestoreJSON(string(ev))))
		return
	}
	r.lastDelta = append(r.lastDelta[:0], ev...)
	r.writeDelta(ev, start, end, r.stream.Feed)
}

// flushHeld sends the fragment the stream holds, if any, in a copy of the
// last text event (its first text the fragment, any other text empty).
func (r *restorer) flushHeld() {
	held := r.stream.Flush()
	if held == "" || r.lastDelta == nil {
		return
	}
	first := true
	start, end := eventData(r.lastDelta)
	r.writeDelta(r.lastDelta, start, end, func(string) string {
		if first {
			first = false
			return held
		}
		return ""
	})
}

// writeDelta writes the event ev with the text of its data (ev[start:end])
// at the protocol's delta paths rewritten.
func (r *restorer) writeDelta(ev []byte, start, end int, rewrite func(string) string) {
	data, err := rewriteStrings(ev[start:end], deltaPaths[r.protocol], rewrite)
	if err != nil { // not JSON after all: pass it on as it came
		data = ev[start:end]
	}
	r.write(ev[:start])
	r.write(data)
	r.write(ev[end:])
}

// isTextDelta reports whether an event's data carries answer text at the
// protocol's delta paths.
func (r *restorer) isTextDelta(data []byte) bool {
	if r.protocol == sluice.ProtocolOpenAIResponses {
		start, end, ok, err := jsonfield.Find(data, "type")
		return ok && err == nil && string(data[start:end]) == `"response.output_text.delta"`
	}
	found := false
	for _, p := range deltaPaths[r.protocol] {
		eachString(data, 0, p, func(int, int) { found = true })
	}
	return found
}

func (r *restorer) write(b []byte) {
	if r.failed != nil {
		return
	}
	if _, err := r.ResponseWriter.Write(b); err != nil {
		r.failed = err
	}
}

// eventEnd returns the length of the first whole event in b (through its
// blank line), or -1.
func eventEnd(b []byte) int {
	lf, crlf := bytes.Index(b, []byte("\n\n")), bytes.Index(b, []byte("\r\n\r\n"))
	switch {
	case lf >= 0 && (crlf < 0 || lf < crlf):
		return lf + 2
	case crlf >= 0:
		return crlf + 4
	}
	return -1
}

// eventData returns the span of the JSON object of an event's single data
// line, or -1, -1 when it has none (a comment, [DONE], several data lines).
func eventData(ev []byte) (start, end int) {
	start, end = -1, -1
	for off := 0; off < len(ev); {
		line := ev[off:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i+1]
		}
		if rest, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if start >= 0 {
				return -1, -1
			}
			data := bytes.TrimSpace(rest)
			if len(data) == 0 || data[0] != '{' {
				return -1, -1
			}
			start = off + len(line) - len(rest) + bytes.Index(rest, data)
			end = start + len(data)
		}
		off += len(line)
	}
	return start, end
}

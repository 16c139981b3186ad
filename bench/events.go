package bench

import (
	"bytes"
	"errors"
	"io"
	"time"
)

// Arrival is when one server-sent event reached the client.
type Arrival struct {
	At   time.Time // when the Read that completed the event returned
	Read int       // index of that Read: two events with the same index came together
	Data []byte    // the event's data field, "[DONE]" included; a copy
}

// ReadEvents reads an SSE body to its end with one Read after another,
// recording when each event (a block ending in a blank line) completed. It
// returns the events read before an error other than io.EOF, and that
// error. buf is the read buffer (nil: 32 KiB); it must be large enough that
// a proxy which merges events is seen merging them.
func ReadEvents(r io.Reader, buf []byte) ([]Arrival, error) {
	if buf == nil {
		buf = make([]byte, 32<<10)
	}
	var (
		out     []Arrival
		pending []byte // bytes of the event not yet complete
	)
	for read := 0; ; read++ {
		n, err := r.Read(buf)
		at := time.Now()
		pending = append(pending, buf[:n]...)
		for {
			end := bytes.Index(pending, []byte("\n\n"))
			if end < 0 {
				break
			}
			if data, ok := eventData(pending[:end]); ok {
				out = append(out, Arrival{At: at, Read: read, Data: data})
			}
			pending = pending[end+2:]
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// eventData returns a copy of the data field of one event (comments and
// other fields are skipped) and whether it has one.
func eventData(ev []byte) ([]byte, bool) {
	for line := range bytes.SplitSeq(ev, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			return bytes.Clone(bytes.TrimPrefix(d, []byte(" "))), true
		}
	}
	return nil, false
}

// Merged counts the events that did not arrive on their own: completed by
// the same Read as the event before, or less than minGap after it. Events a
// proxy passes on as they arrive from an upstream that spaces them by a
// chunk delay are never merged, for a minGap well under that delay.
func Merged(events []Arrival, minGap time.Duration) int {
	n := 0
	for i := 1; i < len(events); i++ {
		if events[i].Read == events[i-1].Read || events[i].At.Sub(events[i-1].At) < minGap {
			n++
		}
	}
	return n
}

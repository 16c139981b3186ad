// Package sse reads and writes server-sent events (text/event-stream) on the
// streaming hot path: upstream events are read one at a time as they arrive and
// relayed to the caller byte for byte, none merged or held back. It parses only
// the fields the gateway uses (event and data) and hands every event's exact
// bytes to the relay. It depends only on the standard library.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxEventSize is the largest event NewReader accepts, in bytes. It is
// large because single events can be big: the Responses API's final
// response.completed event repeats the whole output, and image-generation
// partials carry base64 images.
const DefaultMaxEventSize = 8 << 20

// ErrTooLarge is returned by Reader.Next when an event, with any blank lines
// before it, is longer than the reader's maximum event size.
var ErrTooLarge = errors.New("sse: event too large")

const (
	initialBufSize = 4 << 10 // holds a dozen typical chat chunks
	maxEmptyReads  = 100     // as bufio: a reader that makes no progress is broken
)

var bom = []byte("\xEF\xBB\xBF")

// Event is one server-sent event. Its slices point into the Reader's buffer and
// are valid only until the next call to Next; copy what must outlive it.
type Event struct {
	// Raw is the exact bytes of the event as read: any blank lines before it,
	// every line with its original line endings, and the blank line that ended
	// it. Writing the Raw of every event in order reproduces the stream.
	Raw []byte
	// Name is the value of the last "event:" field, nil if there is none.
	Name []byte
	// Data is the values of the "data:" fields joined by "\n", nil if the event
	// has no data field ("data:" with an empty value gives empty, non-nil Data).
	// An event with nil Data is one a browser would not dispatch: a comment-only
	// keep-alive (": ping"), or fields such as id or retry alone.
	Data []byte
}

// scanState is where the scan for the end of the pending event stands.
type scanState uint8

const (
	stateBOM   scanState = iota // start of stream: a UTF-8 byte order mark is skipped
	stateStart                  // before the event's first line: blank lines are skipped
	stateLine                   // inside a line
	stateCR                     // after a line ended by "\r", which may be the start of "\r\n"
	stateLF                     // after a line ended by "\n" or "\r\n"
)

// Reader reads events from a stream. It buffers what it reads but returns each
// event as soon as its terminating blank line has been read, without waiting
// for more input. A Reader is not safe for concurrent use; it is one per stream.
type Reader struct {
	rd    io.Reader
	buf   []byte // buf[start:end] is read and not yet returned
	start int    // first byte of the pending event, including blank lines before it
	body  int    // first byte of the pending event's first line
	scan  int    // buf[start:scan] has been scanned for the end of the event
	ready int    // when > 0, the pending event is complete and ends at buf[ready]
	end   int
	state scanState
	max   int
	err   error  // sticky: the read error, or ErrTooLarge
	data  []byte // joins the data lines of multi-line events
}

// NewReader returns a Reader that reads events from r, up to
// DefaultMaxEventSize bytes each.
func NewReader(r io.Reader) *Reader {
	return NewReaderSize(r, DefaultMaxEventSize)
}

// NewReaderSize returns a Reader that reads events from r and fails with
// ErrTooLarge on an event longer than size bytes, so a broken upstream can't
// make it buffer without bound. Its buffer starts small and grows to at most
// size. A size <= 0 means DefaultMaxEventSize.
func NewReaderSize(r io.Reader, size int) *Reader {
	if size <= 0 {
		size = DefaultMaxEventSize
	}
	return &Reader{rd: r, max: size}
}

// Next returns the next event. It blocks only when no complete event is
// buffered. Comment-only events (": ping") are returned, with nil Name and
// Data, so a relay forwards keep-alives; a consumer of the data skips events
// whose Data is nil.
//
// At the end of the stream Next returns io.EOF. If the stream ends after the
// last line of an event but before its blank line, that event is returned
// first. If it ends inside a line, Next returns io.ErrUnexpectedEOF, after every
// complete event. ErrTooLarge and read errors (wrapped) are returned after every
// event that was complete before them. Errors are sticky.
//
// The returned slices are valid only until the next call to Next.
func (r *Reader) Next() (Event, error) {
	for {
		if end := r.scanEvent(); end >= 0 {
			return r.emit(end), nil
		}
		if r.err != nil {
			return r.finish()
		}
		r.fill()
	}
}

// Buffered reports whether Next will return an event without reading: a
// complete event is buffered. A relay can leave a write unflushed while
// one is, so that events that arrived together leave together and none
// waits for the upstream's next bytes.
func (r *Reader) Buffered() bool {
	return r.scanEvent() >= 0
}

// scanEvent continues the scan of buf[scan:end] for the blank line that ends
// the pending event and returns the index just past it, or -1 if it is not
// buffered yet.
func (r *Reader) scanEvent() int {
	if r.ready > 0 {
		return r.ready
	}
	b := r.buf[:r.end]
	i := r.scan
	for i < len(b) {
		switch r.state {
		case stateBOM:
			if rest := b[i:]; len(rest) < len(bom) && bytes.HasPrefix(bom, rest) && r.err == nil {
				r.scan = i
				return -1 // maybe a BOM: wait for its other bytes
			}
			if bytes.HasPrefix(b[i:], bom) {
				i += len(bom)
			}
			r.state = stateStart
		case stateStart:
			if c := b[i]; c == '\r' || c == '\n' {
				i++
				continue
			}
			r.body = i
			r.state = stateLine
		case stateLine:
			n := lineEnd(b[i:])
			if n < 0 {
				i = len(b)
				continue
			}
			i += n + 1
			r.state = stateLF
			if b[i-1] == '\r' {
				r.state = stateCR
			}
		case stateCR, stateLF:
			c := b[i]
			switch {
			case c == '\n' && r.state == stateCR: // the rest of a "\r\n"
				i++
				r.state = stateLF
			case c == '\r' || c == '\n': // a blank line: the event is complete
				i++
				if c == '\r' && i < len(b) && b[i] == '\n' {
					i++ // take the rest of "\r\n" if it is here; never wait for it
				}
				r.scan, r.ready = i, i
				return i
			default:
				r.state = stateLine
			}
		}
	}
	r.scan = i
	return -1
}

// emit returns the pending event, which ends at buf[end], and starts the next.
func (r *Reader) emit(end int) Event {
	ev := Event{Raw: r.buf[r.start:end:end]}
	r.parse(r.buf[r.body:end], &ev)
	r.start, r.body, r.scan, r.ready = end, end, end, 0
	r.state = stateStart
	return ev
}

// parse sets ev's Name and Data from the lines of b, which are all complete.
func (r *Reader) parse(b []byte, ev *Event) {
	joined := false
	for len(b) > 0 {
		n := lineEnd(b)
		if n < 0 {
			n = len(b)
		}
		line := b[:n:n]
		b = b[n:]
		switch {
		case len(b) > 1 && b[0] == '\r' && b[1] == '\n':
			b = b[2:]
		case len(b) > 0:
			b = b[1:]
		}
		if len(line) == 0 || line[0] == ':' {
			continue // blank line or comment
		}
		field, value := line, line[n:] // a line without a colon is a field with an empty value
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			ev.Name = value
		case "data":
			switch {
			case ev.Data == nil:
				ev.Data = value // one data line, the common case: no copy
			case !joined:
				r.data = append(append(append(r.data[:0], ev.Data...), '\n'), value...)
				joined = true
				ev.Data = r.data
			default:
				r.data = append(append(r.data, '\n'), value...)
				ev.Data = r.data
			}
		}
	}
	if joined {
		ev.Data = r.data[:len(r.data):len(r.data)]
	}
}

// finish ends the stream once the read error is known and no complete event
// is buffered.
func (r *Reader) finish() (Event, error) {
	if r.err != io.EOF {
		return Event{}, r.err
	}
	switch r.state {
	case stateBOM, stateStart:
		return Event{}, io.EOF // nothing, or only blank lines, after the last event
	case stateLine:
		return Event{}, io.ErrUnexpectedEOF
	default:
		return r.emit(r.end), nil // the stream ended without the event's blank line
	}
}

// fill reads more input, making room first, and records a read error in r.err.
func (r *Reader) fill() {
	if r.end-r.start >= r.max {
		r.err = ErrTooLarge
		return
	}
	if r.start == r.end {
		r.start, r.body, r.scan, r.end = 0, 0, 0, 0
	}
	if r.end == len(r.buf) && r.start > 0 {
		n := copy(r.buf, r.buf[r.start:r.end])
		r.body -= r.start
		r.scan -= r.start
		r.start, r.end = 0, n
	}
	if r.end == len(r.buf) {
		// Full of one pending event shorter than max: grow, up to max.
		buf := make([]byte, min(max(2*len(r.buf), initialBufSize), r.max))
		copy(buf, r.buf[:r.end])
		r.buf = buf
	}
	for range maxEmptyReads {
		n, err := r.rd.Read(r.buf[r.end:])
		if n < 0 || n > len(r.buf)-r.end {
			r.err = fmt.Errorf("sse: read: invalid count %d", n)
			return
		}
		r.end += n
		switch {
		case err == io.EOF:
			r.err = err
			return
		case err != nil:
			r.err = fmt.Errorf("sse: read: %w", err)
			return
		case n > 0:
			return
		}
	}
	r.err = fmt.Errorf("sse: read: %w", io.ErrNoProgress)
}

// lineEnd returns the index of the first "\r" or "\n" in b, or -1.
// Two IndexByte calls beat a byte loop: both are vectorised.
func lineEnd(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	if n < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if cr := bytes.IndexByte(b[:n], '\r'); cr >= 0 {
		return cr
	}
	return n
}

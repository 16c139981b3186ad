package sse

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrInvalidName is returned by Writer.WriteEvent for an event name with a line
// break, which would inject fields into the stream.
var ErrInvalidName = errors.New("sse: event name contains a line break")

// Writer writes events to an HTTP response and flushes after each one, so the
// caller receives every event as soon as it is written. The caller sets the
// status and headers (Content-Type: text/event-stream, Cache-Control:
// no-cache) before the first write. A Writer is not safe for concurrent use;
// it is one per response.
type Writer struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf []byte // formats WriteData and WriteEvent; reused
}

// NewWriter returns a Writer for w. It flushes through http.ResponseController,
// so middleware that wraps w must implement Flush or Unwrap.
func NewWriter(w http.ResponseWriter) *Writer {
	return &Writer{w: w, rc: http.NewResponseController(w)}
}

// WriteRaw writes raw unchanged and flushes. raw must be whole events, such as
// the Raw of events from a Reader; WriteRaw does not keep it. It returns the
// write error or, if w cannot flush, an error wrapping http.ErrNotSupported.
func (w *Writer) WriteRaw(raw []byte) error {
	if err := w.WriteRawUnflushed(raw); err != nil {
		return err
	}
	return w.Flush()
}

// WriteRawUnflushed writes raw unchanged, as WriteRaw does, but leaves it
// to the next flush (a WriteRaw, or the end of the response): for an event
// that another already at hand follows at once.
func (w *Writer) WriteRawUnflushed(raw []byte) error {
	if _, err := w.w.Write(raw); err != nil {
		return fmt.Errorf("sse: write: %w", err)
	}
	return nil
}

// Flush sends what WriteRawUnflushed left.
func (w *Writer) Flush() error {
	if err := w.rc.Flush(); err != nil {
		return fmt.Errorf("sse: flush: %w", err)
	}
	return nil
}

// WriteData writes an unnamed event carrying data and flushes. Each line of
// data ("\n", "\r\n" or "\r" breaks) becomes its own "data:" line, so a Reader
// returns it with "\n" breaks; empty data is sent as one empty data line.
func (w *Writer) WriteData(data []byte) error {
	return w.WriteEvent(nil, data)
}

// WriteEvent writes an event with an "event:" line for name, unless name is
// empty, and data as in WriteData, and flushes. A name with a line break is
// refused with ErrInvalidName.
func (w *Writer) WriteEvent(name, data []byte) error {
	if lineEnd(name) >= 0 {
		return ErrInvalidName
	}
	b := w.buf[:0]
	if len(name) > 0 {
		b = append(append(append(b, "event: "...), name...), '\n')
	}
	for {
		n := lineEnd(data)
		if n < 0 {
			b = appendData(b, data)
			break
		}
		b = appendData(b, data[:n])
		if data[n] == '\r' && n+1 < len(data) && data[n+1] == '\n' {
			n++
		}
		data = data[n+1:]
	}
	b = append(b, '\n')
	w.buf = b
	return w.WriteRaw(b)
}

// appendData appends one data line for line, which has no line break.
func appendData(b, line []byte) []byte {
	if len(line) == 0 {
		return append(b, "data:\n"...)
	}
	return append(append(append(b, "data: "...), line...), '\n')
}

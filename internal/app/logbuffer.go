package app

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// logBuffer gathers the log's lines and writes them in one write every
// logFlushEvery, or as soon as it holds logBufferBytes, instead of one
// write (a system call, about 2 µs here) per line: the access log writes a
// line per request. A line at warn or above is written at once, with all
// before it (see flushingHandler), and Close writes what is left, so a
// clean exit loses nothing; a killed process loses at most the last
// logFlushEvery of info lines. The usage records, which are what a request
// is billed from, never wait on it.
type logBuffer struct {
	out  io.Writer
	mu   sync.Mutex
	buf  []byte
	stop chan struct{}
	done chan struct{}
}

const (
	logFlushEvery  = 50 * time.Millisecond
	logBufferBytes = 64 << 10
)

func newLogBuffer(out io.Writer) *logBuffer {
	b := &logBuffer{out: out, buf: make([]byte, 0, logBufferBytes), stop: make(chan struct{}), done: make(chan struct{})}
	go b.run()
	return b
}

// Write takes one line (slog writes a record whole in one call).
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) >= logBufferBytes {
		b.flushLocked()
	}
	return len(p), nil
}

// Flush writes what the buffer holds.
func (b *logBuffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *logBuffer) flushLocked() {
	if len(b.buf) == 0 {
		return
	}
	_, _ = b.out.Write(b.buf) // a log that cannot be written has nowhere to say so
	b.buf = b.buf[:0]
}

func (b *logBuffer) run() {
	defer close(b.done)
	t := time.NewTicker(logFlushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.Flush()
		case <-b.stop:
			b.Flush()
			return
		}
	}
}

// Close stops the periodic writes and writes what is left.
func (b *logBuffer) Close() {
	close(b.stop)
	<-b.done
}

// flushingHandler is a slog.Handler that writes its buffer out as soon as
// a record at warn or above has been handled: what goes wrong is seen at
// once, with every line before it.
type flushingHandler struct {
	slog.Handler
	buf *logBuffer
}

func (h flushingHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		h.buf.Flush()
	}
	return err
}

func (h flushingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return flushingHandler{h.Handler.WithAttrs(as), h.buf}
}

func (h flushingHandler) WithGroup(name string) slog.Handler {
	return flushingHandler{h.Handler.WithGroup(name), h.buf}
}

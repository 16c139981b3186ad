package pipeline

import (
	"errors"
	"net/http"
	"sync"
	"time"
)

// maxBehind bounds the bytes of a streamed answer that wait for a slow
// caller (see behind): as much as Sluice holds of a JSON answer.
const maxBehind = 1 << 20

// behind passes a streamed answer on to the caller from a goroutine of its
// own, so that a caller slower than the upstream does not hold back the
// reading of the upstream's answer: the answer is received, and its end
// settled (its usage on disk, see Serve), as soon as the upstream has sent
// it, while up to maxBehind bytes wait for the caller; past that, writes
// wait for room. A process killed while a slow caller still takes the
// answer has recorded it. The answer's writer sees it as the
// http.ResponseWriter it was (write deadlines and flushes go through
// http.ResponseController): a write deadline of now+d bounds each write
// to the caller by d, one in the past cuts the answer, and a write to a
// caller that failed fails every later one. Serve calls finish before it
// returns. One per request.
type behind struct {
	w  http.ResponseWriter
	rc *http.ResponseController

	mu      sync.Mutex
	ready   sync.Cond     // pending, flush, closed or cut changed, or room freed
	pending []byte        // written, not yet taken by the goroutine
	spare   []byte        // the goroutine's last buffer, for reuse
	flush   bool          // a flush was asked after pending's bytes
	timeout time.Duration // bounds each write to the caller; 0 = none
	cut     time.Time     // non-zero: the answer is cut (see upstream's cut)
	closed  bool          // finish was called
	err     error         // the first write to the caller that failed
	started bool          // the goroutine runs
	done    chan struct{} // closed when the goroutine has stopped
}

// errCut fails a write after the answer was cut.
var errCut = errors.New("the answer to the caller was cut")

func newBehind(w http.ResponseWriter) *behind {
	b := &behind{w: w, rc: http.NewResponseController(w), done: make(chan struct{})}
	b.ready.L = &b.mu
	return b
}

// Header returns the caller's header map: headers go out with WriteHeader.
func (b *behind) Header() http.Header { return b.w.Header() }

// WriteHeader writes the status at once: it comes before any byte.
func (b *behind) WriteHeader(code int) { b.w.WriteHeader(code) }

// Write queues p for the caller, waiting while maxBehind bytes wait.
func (b *behind) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.err == nil && b.cut.IsZero() && len(b.pending) >= maxBehind {
		b.ready.Wait()
	}
	switch {
	case b.err != nil:
		return 0, b.err
	case !b.cut.IsZero():
		return 0, errCut
	}
	b.pending = append(b.pending, p...)
	if !b.started {
		b.started = true
		go b.run()
	}
	if len(b.pending) >= maxBehind/4 {
		b.ready.Broadcast() // worth a write without waiting for the flush
	}
	return len(p), nil
}

// FlushError asks for what was written to be sent on; it reports a write
// to the caller that failed.
func (b *behind) FlushError() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flush = true
	b.ready.Broadcast()
	return b.err
}

// SetWriteDeadline bounds each later write to the caller by t-now; a t in
// the past cuts the answer (what waits is dropped); zero keeps the bound,
// which must still hold while finish lets the caller take what waits.
func (b *behind) SetWriteDeadline(t time.Time) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch d := time.Until(t); {
	case t.IsZero():
	case d <= 0 && !b.started:
		_ = b.rc.SetWriteDeadline(t) // nothing was written: no goroutine to tell
		_ = b.rc.Flush()
		b.cut = t
	case d <= 0:
		b.cut, b.pending = t, nil
		b.ready.Broadcast()
	default:
		b.timeout = d
	}
	return nil
}

// run writes what waits to the caller until finish, a cut or a failed
// write.
func (b *behind) run() {
	defer close(b.done)
	b.mu.Lock()
	for {
		for len(b.pending) == 0 && !b.flush && !b.closed && b.cut.IsZero() {
			b.ready.Wait()
		}
		if !b.cut.IsZero() {
			cut := b.cut
			b.mu.Unlock()
			_ = b.rc.SetWriteDeadline(cut)
			_ = b.rc.Flush()
			return
		}
		if len(b.pending) == 0 && !b.flush {
			b.mu.Unlock()
			return // closed, all sent
		}
		chunk, flush, timeout := b.pending, b.flush, b.timeout
		b.pending, b.spare, b.flush = b.spare[:0], nil, false
		b.ready.Broadcast() // room for writers
		b.mu.Unlock()
		var err error
		if timeout > 0 {
			_ = b.rc.SetWriteDeadline(time.Now().Add(timeout))
		}
		if len(chunk) > 0 {
			_, err = b.w.Write(chunk)
		}
		if err == nil && (flush || b.closedNow()) {
			err = b.rc.Flush()
		}
		b.mu.Lock()
		if err != nil {
			b.err, b.pending = err, nil
			b.ready.Broadcast()
			b.mu.Unlock()
			return
		}
		b.spare = chunk[:0]
	}
}

func (b *behind) closedNow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// finish lets the caller take what waits (each write still bounded), then
// lifts the write deadline, which net/http does not reset for the
// connection's next request.
func (b *behind) finish() {
	b.mu.Lock()
	b.closed = true
	b.ready.Broadcast()
	started, timeout, cut := b.started, b.timeout, !b.cut.IsZero()
	b.mu.Unlock()
	if !started {
		return
	}
	<-b.done
	if timeout > 0 && !cut {
		_ = b.rc.SetWriteDeadline(time.Time{})
	}
}

package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/sse"
)

// Header values of every relayed stream, shared by all of them as the
// upstream request's are (see jsonContentType).
var (
	noCache     = []string{"no-cache"}
	noBuffering = []string{"no"}
)

// relay passes an SSE answer to the caller event by event, as each arrives,
// with the secret masked in each (or, through a translator, the events it
// turns each into). Until the first event is written the attempt can still
// fail over; after it, a failure ends the caller's stream with the error
// event of the caller's protocol. An event that the dialect cannot read is
// such a failure (of the endpoint), and is not passed on.
func (c *Caller) relay(ctx, actx context.Context, w http.ResponseWriter, req *sluice.Request, rd *idleReader, a Attempt, callStart time.Time, hooks Hooks, x exchange) Attempt {
	events := sse.NewReader(rd)
	ev, err := events.Next()
	for err == nil && ev.Data == nil {
		// Keep-alive comments before the first data event do not commit the
		// stream: the attempt can still fail over.
		ev, err = events.Next()
	}
	var drop, done bool
	if err == nil {
		a.Exec.Usage, drop, done, err = x.dialect.Event(ev, req, a.Exec.Usage)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errStreamTruncated
		}
		a.Class, a.Err = failureOf(ctx, actx, err)
		if errors.Is(err, protocol.ErrUpstreamErrorEvent) {
			// The upstream's error before anything reached the caller is
			// what its error answer would have said (Anthropic sends an
			// overload after the 200 so): classified as one.
			a.Class = Classify(http.StatusInternalServerError, ev.Data)
		}
		return a
	}
	if x.tr == nil && x.dialect.Stores {
		a.StoredID = createdID(ev.Data) // a Responses stream opens with response.created
	}
	hooks.committed(a)
	h := w.Header()
	h["Content-Type"] = eventStream
	h["Cache-Control"] = noCache
	h["X-Accel-Buffering"] = noBuffering
	w.WriteHeader(http.StatusOK)
	a.Committed = true
	a.TTFT = time.Since(callStart)
	out := sse.NewWriter(w)
	// A caller that stops reading must not hold the upstream call forever:
	// each write gets the idle timeout too. The deadline is cleared at the
	// end because net/http does not reset it for the connection's next request.
	rc := http.NewResponseController(w)
	idle := rd.p.idle
	if idle > 0 {
		defer rc.SetWriteDeadline(time.Time{})
	}
	var em *emitter // a translator's events go through it; a passthrough writes the upstream's
	var emit func(adapter.Event) error
	// name is the last event's name as a string, for the translator: most
	// events repeat the one before's (content_block_delta, …), which then
	// costs no allocation.
	var name string
	if x.tr != nil {
		em = &emitter{out: sse.NewWriter(w), rc: http.NewResponseController(w), idle: idle, secret: x.secret}
		emit = em.emit
	}
loop:
	for {
		if done {
			hooks.ending(a)
		}
		// A passthrough writes each event as it is, or drops it (drop: what
		// its caller did not ask for); a translator sees every event.
		// Events that came in one read leave in one write: only the last
		// event at hand is flushed, so none waits for the upstream's next
		// bytes.
		flush := done || !events.Buffered()
		if x.tr != nil || !drop || flush {
			if idle > 0 {
				_ = rc.SetWriteDeadline(time.Now().Add(idle))
			}
			var werr error
			switch {
			case x.tr != nil:
				if string(ev.Name) != name {
					name = string(ev.Name)
				}
				if terr := x.tr.Event(adapter.Event{Name: name, Data: ev.Data}, emit); terr != nil && em.err == nil {
					// The translator cannot carry what the upstream sent:
					// the stream failed, as if the event were malformed.
					err = fmt.Errorf("translate a stream event: %w", terr)
					break loop
				}
				werr = em.err
			case drop:
				werr = out.Flush() // what the events before left unflushed
			default:
				// Model output is content: only the exact secret is masked,
				// not key-shaped text (see scrub.go).
				maskSecret(ev.Raw, x.secret)
				if flush {
					werr = out.WriteRaw(ev.Raw)
				} else {
					werr = out.WriteRawUnflushed(ev.Raw)
				}
			}
			if werr != nil {
				a.Class, a.Err = ClassCallerGone, fmt.Errorf("write to caller: %w", werr)
				return a
			}
			rd.p.restart()
		}
		if done {
			return a
		}
		if ev, err = events.Next(); err == nil {
			a.Exec.Usage, drop, done, err = x.dialect.Event(ev, req, a.Exec.Usage)
		}
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		err = errStreamTruncated
	}
	a.Class, a.Err = failureOf(ctx, actx, err)
	if event := streamEnd(a, x.ending); event != nil {
		// The stream is committed: no failover, no splicing of a second
		// upstream's output; the caller learns why it ended.
		if idle > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(idle))
		}
		_ = out.WriteRaw(event)
	}
	return a
}

// emitter writes the events a translator makes of the upstream's to the
// caller, each under the idle timeout, with the secret masked. It has its
// own sse.Writer and ResponseController so that a passthrough's stay on
// relay's stack.
type emitter struct {
	out    *sse.Writer
	rc     *http.ResponseController
	idle   time.Duration
	secret string
	err    error // the first write that failed: the caller has gone
}

func (em *emitter) emit(e adapter.Event) error {
	if em.err != nil {
		return em.err
	}
	if em.idle > 0 {
		_ = em.rc.SetWriteDeadline(time.Now().Add(em.idle))
	}
	maskSecret(e.Data, em.secret)
	em.err = em.out.WriteEvent(asBytes(e.Name), e.Data)
	return em.err
}

// streamEnd is the error event, in the caller's protocol (end), that ends
// the committed stream of a, or nil when its caller has gone.
func streamEnd(a Attempt, end *Ending) []byte {
	switch {
	case a.Err == ErrShuttingDown:
		return end.Shutdown
	case a.Class == ClassCallerGone:
		return nil
	}
	return end.Failed
}

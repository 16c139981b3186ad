package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/sse"
)

var doneData = []byte("[DONE]")

// Header values of every relayed stream, shared by all of them as the
// upstream request's are (see jsonContentType).
var (
	noCache     = []string{"no-cache"}
	noBuffering = []string{"no"}
)

// relay passes an SSE answer to the caller event by event, as each arrives,
// with the secret masked in each. Until the first event is written the
// attempt can still fail over; after it, a failure ends the caller's stream
// with an error event. A data event that is neither a JSON object nor
// [DONE] is such a failure (of the endpoint), and is not passed on.
func (c *Caller) relay(ctx, actx context.Context, w http.ResponseWriter, req *sluice.Request, rd *idleReader, a Attempt, callStart time.Time, hooks Hooks, secret string) Attempt {
	events := sse.NewReader(rd)
	ev, err := events.Next()
	for err == nil && ev.Data == nil {
		// Keep-alive comments before the first data event do not commit the
		// stream: the attempt can still fail over.
		ev, err = events.Next()
	}
	var f answerFields
	var done bool
	if err == nil {
		f, done, err = chunkOf(ev.Data)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errStreamTruncated
		}
		a.Class, a.Err = failureOf(ctx, actx, err)
		return a
	}
	hooks.committed()
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
	for {
		forward := true
		if u := usageValue(f.usage); u.Measured {
			a.Exec.Usage = u
			// The usage-only chunk exists because Sluice asked for it;
			// a caller that did not ask never sees it.
			forward = req.IncludeUsage || !isUsageOnly(f.choices)
		}
		if done {
			hooks.ending(a)
		}
		if forward {
			if idle > 0 {
				_ = rc.SetWriteDeadline(time.Now().Add(idle))
			}
			// Model output is content: only the exact secret is masked,
			// not key-shaped text (see scrub.go).
			maskSecret(ev.Raw, secret)
			if err := out.WriteRaw(ev.Raw); err != nil {
				a.Class, a.Err = ClassCallerGone, fmt.Errorf("write to caller: %w", err)
				return a
			}
			rd.p.restart()
		}
		if done {
			return a
		}
		if ev, err = events.Next(); err == nil {
			f, done, err = chunkOf(ev.Data)
		}
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		err = errStreamTruncated
	}
	a.Class, a.Err = failureOf(ctx, actx, err)
	if event := streamEnd(a); event != nil {
		// The stream is committed: no failover, no splicing of a second
		// upstream's output; the caller learns why it ended.
		if idle > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(idle))
		}
		_ = out.WriteData(event)
	}
	return a
}

// errMalformedEvent ends a stream with a data event that is not JSON.
var errMalformedEvent = errors.New("upstream stream event is neither a JSON object nor [DONE]")

// chunkOf reads the data of an event of an OpenAI stream: [DONE], which
// ends it (done), one JSON object (a chunk, with the fields Sluice reads),
// or nil (a keep-alive comment, nothing to read). Anything else is
// errMalformedEvent. The check does not allocate (readAnswer).
func chunkOf(data []byte) (f answerFields, done bool, err error) {
	switch {
	case data == nil:
		return f, false, nil
	case bytes.Equal(data, doneData):
		return f, true, nil
	}
	f, ok := readAnswer(data)
	if !ok {
		return f, false, errMalformedEvent
	}
	return f, false, nil
}

// streamEnd is the error event that ends the committed stream of a, or nil
// when its caller has gone.
func streamEnd(a Attempt) []byte {
	switch {
	case a.Err == ErrShuttingDown:
		return shutdownErrorEvent
	case a.Class == ClassCallerGone:
		return nil
	}
	return streamErrorEvent
}

// streamErrorEvent ends a committed stream that broke, in the OpenAI
// dialect that SDKs recognise (a chunk with an "error" key);
// shutdownErrorEvent ends one that the gateway cut when shutting down.
var (
	streamErrorEvent   = []byte(`{"error":{"message":"the upstream stream failed before it completed","type":"upstream_error","param":null,"code":"` + string(sluice.CodeUpstreamStreamFailed) + `"}}`)
	shutdownErrorEvent = []byte(`{"error":{"message":"` + ErrShuttingDown.Msg + `; the stream ended before it completed","type":"server_error","param":null,"code":"` + string(ErrShuttingDown.Code) + `"}}`)
)

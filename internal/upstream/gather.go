package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/internal/protocol"
)

// FailedEvent is the upstream's own failure event (Responses' error or
// response.failed) in a stream that Hosting.Gather was reading: Data is
// the failure as an error answer's body would say it, which classifies it.
type FailedEvent struct {
	Data []byte
}

func (e *FailedEvent) Error() string { return protocol.ErrUpstreamErrorEvent.Error() }

// Unwrap makes a FailedEvent the stream's failure, as the relay meets it.
func (e *FailedEvent) Unwrap() error { return protocol.ErrUpstreamErrorEvent }

// gathered serves a caller that asked for a whole answer from a cloud
// that answers only streams (Hosting.Gather): the stream is read to its
// end, and the answer it makes goes on as a JSON answer does (forward).
// Nothing reaches the caller before the stream has ended, so any failure
// until then fails over as a failed answer would; a failure event is
// classified by the error it carries, as the relay classifies one before
// its first event.
func (c *Caller) gathered(ctx, actx context.Context, w http.ResponseWriter, resp *http.Response, rd *idleReader, a Attempt, callStart time.Time, hooks Hooks, x exchange) Attempt {
	if !hasMediaType(resp.Header, isEventStream) {
		a.Class, a.Err = ClassEndpoint, fmt.Errorf("upstream answered %d with a content type that is not text/event-stream", resp.StatusCode)
		return a
	}
	answer, err := x.dialect.gather(rd)
	if err != nil {
		a.Class, a.Err = failureOf(ctx, actx, err)
		if fe, ok := errors.AsType[*FailedEvent](err); ok && a.Class != ClassCallerGone {
			a.Class = Classify(http.StatusInternalServerError, fe.Data)
		}
		return a
	}
	resp.Header["Content-Type"] = jsonContentType // passed on to the caller with the answer
	resp.ContentLength = int64(len(answer))
	rd.r = bytes.NewReader(answer)
	return c.forward(ctx, actx, w, resp, rd, a, callStart, hooks, x)
}

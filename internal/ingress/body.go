package ingress

import (
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/pipeline"
)

// bodyBudget counts the bytes of request bodies the server holds, across
// requests and snapshots; the bound comes from the snapshot of each request,
// so a reload changes it without losing the count. Safe for concurrent use,
// and lock-free: a request pays one compare-and-swap per reservation.
type bodyBudget struct{ held atomic.Int64 }

// take reserves n more bytes if the total stays within bound, and reports
// whether it did.
func (b *bodyBudget) take(n, bound int64) bool {
	for {
		cur := b.held.Load()
		if cur+n > bound {
			return false
		}
		if b.held.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

// give returns n bytes that take reserved.
func (b *bodyBudget) give(n int64) { b.held.Add(-n) }

// firstRoom is the most a body's buffer holds before its bytes arrive: most
// chat bodies fit in one allocation, and a caller that declares a large
// length and then stalls makes the server allocate no more than this.
const firstRoom = 16 << 10

// busyRetry is the Retry-After of a request refused because the budget is
// spent: bodies are held for their requests' lives, so some are freed soon.
const busyRetry = time.Second

// readBody reads the body under the size limit, the body timeout and the
// server-wide budget. It returns the body with the bytes it holds of the
// budget, even on error: the caller gives them back when the request ends,
// as the body is forwarded from memory until then. A declared length over
// the limit is refused unread, a chunked body is cut at the limit, and a
// caller that trickles its body is cut off. A declared length is reserved
// whole before a byte is read, so a body that cannot fit is refused unread
// rather than cut off halfway; a chunked body reserves as it grows. Either
// way the buffer grows as bytes arrive, not from the declared length.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, snap *pipeline.Snapshot) (body []byte, held int64, err error) {
	limit := snap.MaxBodyBytes
	if r.ContentLength > limit {
		return nil, 0, closeUnread(w, r, tooLarge(limit))
	}
	bound := limit // the most room the body can need
	if r.ContentLength >= 0 {
		bound = r.ContentLength
	}
	room := min(bound, firstRoom)
	held = room
	if r.ContentLength >= 0 {
		held = bound
	}
	if !s.budget.take(held, snap.MaxInflightBodyBytes) {
		return nil, 0, closeUnread(w, r, busy())
	}
	rc := http.NewResponseController(w)
	timeout := snap.BodyTimeout
	if timeout > 0 && rc.SetReadDeadline(time.Now().Add(timeout)) != nil {
		timeout = 0 // the connection cannot take a deadline (a test recorder)
	}
	buf := make([]byte, 0, room+1) // +1: room for the read that sees EOF
	rd := http.MaxBytesReader(w, r.Body, limit)
	for {
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			if timeout > 0 {
				// Cleared once the body is in: net/http's disconnect detection
				// reads the connection under this deadline and would cancel a
				// long stream when it passed. After a failed read it stays, so
				// net/http's discard of the unread body fails fast too.
				_ = rc.SetReadDeadline(time.Time{})
			}
			return buf, held, nil
		}
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, held, closeUnread(w, r, tooLarge(limit))
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, held, &sluice.Error{Code: sluice.CodeRequestTimeout, Msg: "the request body did not arrive within " + timeout.String(), Err: err}
		}
		if err != nil {
			return nil, held, closeUnread(w, r, &sluice.Error{Code: sluice.CodeInvalidRequest, Msg: "could not read the request body", Err: err})
		}
		if len(buf) < cap(buf) {
			continue
		}
		room = min(2*room, bound)
		if room > held {
			if !s.budget.take(room-held, snap.MaxInflightBodyBytes) {
				return nil, held, closeUnread(w, r, busy())
			}
			held = room
		}
		grown := make([]byte, len(buf), room+1)
		copy(grown, buf)
		buf = grown
	}
}

// closeUnread returns err, arranging first that the connection closes once
// err is answered and that nothing more of the body is read. Left alone,
// net/http reads up to 256 KiB of an unread body after the handler returns,
// looking for the next request, and waits for a caller that stalls: a caller
// refused before its body is read (or while it is read) would hold the
// connection all the same.
func closeUnread(w http.ResponseWriter, r *http.Request, err error) error {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
		// A deadline already passed fails that read at once.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
	return err
}

func tooLarge(limit int64) *sluice.Error {
	return &sluice.Error{Code: sluice.CodeRequestTooLarge, Msg: "request body is larger than " + strconv.FormatInt(limit, 10) + " bytes"}
}

func busy() *sluice.Error {
	return &sluice.Error{Code: sluice.CodeServerBusy, Msg: "the server holds too many request bodies; retry shortly", RetryAfter: busyRetry}
}

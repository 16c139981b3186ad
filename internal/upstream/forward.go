package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxHeldAnswer is how much of a non-streamed answer Sluice holds before
// it passes the answer on. An answer up to this long is read whole, so it
// is checked (JSON, usage) before the caller sees a byte and can still
// fail over; a longer one is committed and copied through as it arrives,
// so memory per answer stays bounded however long the upstream's is.
const maxHeldAnswer = 1 << 20

// errAnswerCut ends a non-streamed answer that broke after it had begun
// reaching the caller.
var errAnswerCut = errors.New("upstream answer broke after it was committed")

// forward relays a JSON answer: whole when it is short, so a broken body
// can still fail over; as it arrives (passOn) when it is long.
func (c *Caller) forward(ctx, actx context.Context, w http.ResponseWriter, resp *http.Response, rd *idleReader, a Attempt, callStart time.Time, hooks Hooks, x exchange) Attempt {
	if !hasMediaType(resp.Header, isJSONType) {
		a.Class, a.Err = ClassEndpoint, fmt.Errorf("upstream answered %d with a content type that is not JSON", resp.StatusCode)
		return a
	}
	body, whole, err := readHeld(rd, resp.ContentLength)
	if err != nil {
		a.Class, a.Err = failureOf(ctx, actx, err)
		return a
	}
	switch {
	case !whole && x.tr != nil:
		a.Class, a.Err = ClassEndpoint, errTooLongToTranslate
		return a
	case !whole && x.dialect.answer != nil:
		a.Class, a.Err = ClassEndpoint, errTooLongToUnwrap
		return a
	case !whole:
		return c.passOn(ctx, actx, w, resp, rd, body, a, callStart, hooks, x)
	}
	if x.dialect.answer != nil {
		body = x.dialect.answer(body)
	}
	f, ok := readAnswer(body)
	if !ok {
		a.Class, a.Err = ClassEndpoint, errNotJSONObject
		return a
	}
	a.Exec.Usage = x.dialect.Usage(f.usage)
	if x.tr == nil && x.dialect.Stores {
		a.StoredID = storedID(f)
	}
	if x.tr != nil {
		if body, err = x.tr.Response(body); err != nil {
			a.Class, a.Err = ClassEndpoint, fmt.Errorf("translate answer: %w", err)
			return a
		}
	}
	maskSecret(body, x.secret)
	a.TTFT = time.Since(callStart)
	a.Committed = true
	hooks.committed(a)
	hooks.ending(a)
	if err := writeResponse(w, &response{status: resp.StatusCode, header: resp.Header, body: body}, x.secret, false); err != nil {
		a.Class, a.Err = ClassCallerGone, err
	}
	return a
}

// errTooLongToTranslate fails a translated answer longer than Sluice holds:
// a translator takes a whole answer.
var errTooLongToTranslate = errors.New("upstream answer is too long to translate")

// errTooLongToUnwrap fails an answer in a cloud's envelope (Hosting.Answer)
// longer than Sluice holds: the envelope is taken off a whole answer.
var errTooLongToUnwrap = errors.New("upstream answer is too long to take out of its envelope")

// readHeld reads an answer of up to maxHeldAnswer bytes into one buffer of
// its announced size (plus one byte, to see the end without growing).
// whole is false when the answer is longer: body is then its first
// maxHeldAnswer bytes, and the buffer's capacity is that size.
func readHeld(r io.Reader, size int64) (body []byte, whole bool, err error) {
	switch {
	case size > maxHeldAnswer:
		size = maxHeldAnswer - 1 // it will not fit: hold the most
	case size < 0:
		size = 511
	}
	buf := make([]byte, 0, size+1)
	for {
		if len(buf) == cap(buf) {
			if len(buf) == maxHeldAnswer {
				return buf, false, nil
			}
			buf = append(buf, 0)[:len(buf)] // grow
			buf = buf[:len(buf):min(cap(buf), maxHeldAnswer)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		switch {
		case err == io.EOF:
			return buf, true, nil
		case err != nil:
			return buf, false, err
		}
	}
}

// passOn relays an answer longer than maxHeldAnswer, whose first bytes are
// held, as it arrives: the answer is committed, and a usageScanner picks
// its usage on the way. The upstream's Content-Length is passed on when it
// has one (masking keeps the length); otherwise the answer is chunked.
// Bytes are held back from each write: those of a secret that a read may
// have split, and the answer's last ones until hooks.ending has run. An
// answer that breaks after the commit, or turns out not to be a JSON
// object, is an endpoint failure, and the caller's response is cut so that
// no client takes what arrived for a whole answer.
func (c *Caller) passOn(ctx, actx context.Context, w http.ResponseWriter, resp *http.Response, rd *idleReader, held []byte, a Attempt, callStart time.Time, hooks Hooks, x exchange) Attempt {
	secret := x.secret
	var scan usageScanner
	if scan.Write(held); scan.Err(false) != nil {
		a.Class, a.Err = ClassEndpoint, scan.Err(false)
		return a
	}
	if x.dialect.Stores {
		// The answer opens with its id: the members read before the held
		// bytes end are enough (see storedID).
		f, _ := readAnswer(held)
		a.StoredID = storedID(f)
	}
	maskSecret(held, secret)
	h := w.Header()
	passHeaders(h, resp.Header, secret, false)
	if resp.ContentLength >= 0 {
		h.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	a.TTFT = time.Since(callStart)
	a.Committed = true
	hooks.committed(a)
	w.WriteHeader(resp.StatusCode)

	rc := http.NewResponseController(w)
	keep := max(len(secret)-1, 1)
	buf, n := held, len(held)
	var err error
	for err == nil {
		if werr := writeGuarded(w, rc, rd.p, buf[:n-keep]); werr != nil {
			return callerGone(rc, rd.p, a, werr)
		}
		n = copy(buf, buf[n-keep:n])
		var m int
		m, err = rd.Read(buf[n:])
		scan.Write(buf[n : n+m])
		n += m
		maskSecret(buf[:n], secret) // again over the held-back bytes: a secret split by the read
		if err == nil {
			err = scan.Err(false)
		}
	}
	if err == io.EOF {
		err = scan.Err(true)
	}
	if err != nil {
		a.Class, a.Err = failureOf(ctx, actx, err) // errNotJSONObject: an endpoint failure
		if a.Class != ClassCallerGone {
			a.Err = fmt.Errorf("%w: %w", errAnswerCut, a.Err)
		}
		cut(rc)
		return a
	}
	a.Exec.Usage = x.dialect.Usage(scan.Usage())
	hooks.ending(a)
	if err := writeGuarded(w, rc, rd.p, buf[:n]); err != nil {
		return callerGone(rc, rd.p, a, err)
	}
	clearWriteDeadline(rc, rd.p)
	return a
}

// writeGuarded writes b to the caller under the idle timeout: a caller that
// stops reading must not hold the upstream call forever. The upstream's
// idle timeout restarts after the write, whose time was the caller's.
func writeGuarded(w http.ResponseWriter, rc *http.ResponseController, p *phases, b []byte) error {
	if p.idle > 0 {
		_ = rc.SetWriteDeadline(time.Now().Add(p.idle))
	}
	_, err := w.Write(b)
	p.restart()
	return err
}

// clearWriteDeadline lifts writeGuarded's deadline: net/http does not reset
// it for the connection's next request.
func clearWriteDeadline(rc *http.ResponseController, p *phases) {
	if p.idle > 0 {
		_ = rc.SetWriteDeadline(time.Time{})
	}
}

// callerGone ends an attempt whose caller stopped taking the answer.
func callerGone(rc *http.ResponseController, p *phases, a Attempt, err error) Attempt {
	clearWriteDeadline(rc, p)
	a.Class, a.Err = ClassCallerGone, fmt.Errorf("write to caller: %w", err)
	return a
}

// cut ends a committed response that cannot be completed so that the
// caller sees it fail rather than end. A handler has no way to abort a
// response short of panicking, and this one must return so the request is
// settled; instead a write deadline in the past fails every further write,
// so net/http closes an HTTP/1 connection without the chunked terminator
// (or short of its Content-Length) and resets an HTTP/2 stream.
func cut(rc *http.ResponseController) {
	_ = rc.SetWriteDeadline(time.Unix(1, 0))
	_ = rc.Flush()
}

// writeResponse sends an upstream answer held in memory to the caller,
// with the headers passHeaders lets through.
func writeResponse(w http.ResponseWriter, r *response, secret string, errorAnswer bool) error {
	h := w.Header()
	passHeaders(h, r.header, secret, errorAnswer)
	h.Set("Content-Length", strconv.Itoa(len(r.body)))
	w.WriteHeader(r.status)
	_, err := w.Write(r.body)
	return err
}

// hasMediaType reports whether is accepts the media type of h's
// Content-Type, parameters (charset) aside. An answer without one is
// refused: every upstream Sluice speaks to labels its answers.
func hasMediaType(h http.Header, is func(mediaType string) bool) bool {
	v := h["Content-Type"]
	if len(v) == 0 {
		return false
	}
	t, _, _ := strings.Cut(v[0], ";")
	return is(strings.ToLower(strings.TrimSpace(t)))
}

// isJSONType accepts application/json and the structured +json types.
func isJSONType(t string) bool {
	return t == "application/json" || strings.HasPrefix(t, "application/") && strings.HasSuffix(t, "+json")
}

// isEventStream accepts text/event-stream.
func isEventStream(t string) bool { return t == "text/event-stream" }

package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/jsonfield"
)

// Bounds on what Sluice holds of an upstream answer.
const (
	maxErrorBody    = 64 << 10 // an error body is classified and maybe passed on
	maxResponseBody = 64 << 20 // a non-streamed answer is buffered so it can fail over
)

// Attempt is one execution's outcome.
type Attempt struct {
	Exec       sluice.Execution
	Class      Class
	Skipped    bool          // the endpoint's breaker refused the attempt; nothing was sent
	Committed  bool          // bytes reached the caller: no other attempt may follow
	TTFT       time.Duration // from the request's first attempt to the first byte written to the caller
	RetryAfter time.Duration // the upstream's wait hint on a rate limit
	Exhausted  time.Duration // on success: the upstream said its request window is empty for this long
	Err        error         // internal cause; nil on success
}

// response is an upstream answer held in memory.
type response struct {
	status int
	header http.Header
	body   []byte
}

// execute runs one attempt of req on edge e.
func (c *Caller) execute(ctx context.Context, w http.ResponseWriter, req *sluice.Request, e *sluice.Edge, callStart time.Time) (a Attempt) {
	a.Exec = sluice.Execution{
		EdgeID: e.ID, CredentialID: e.Credential.ID, AccountID: e.Account.ID, EndpointID: e.Endpoint.ID,
		Model: e.Model, Started: time.Now(),
	}
	defer func() {
		a.Exec.Duration = time.Since(a.Exec.Started)
		a.Exec.Status = executionStatus[a.Class]
		if a.Err != nil {
			a.Exec.Error = a.Err.Error()
		}
	}()
	body, err := prepareBody(req, e.Model)
	if err != nil {
		a.Class, a.Err = ClassRequest, fmt.Errorf("prepare body: %w", err)
		return a
	}
	to := e.Endpoint.Timeouts
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if to.Total > 0 {
		var stop context.CancelFunc
		actx, stop = context.WithTimeoutCause(actx, to.Total, errTotalTimeout)
		defer stop()
	}
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, endpointURL(e.Endpoint.BaseURL, req.Protocol), bytes.NewReader(body))
	if err != nil {
		a.Class, a.Err = ClassEndpoint, fmt.Errorf("build upstream request: %w", err)
		return a
	}
	hreq.Header.Set("Authorization", "Bearer "+e.Credential.Secret)
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("User-Agent", "sluice")
	if req.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	var firstByte *time.Timer
	if to.FirstByte > 0 {
		firstByte = time.AfterFunc(to.FirstByte, func() { cancel(errFirstByteTimeout) })
	}
	resp, err := c.transport(to.Connect).RoundTrip(hreq)
	if firstByte != nil {
		firstByte.Stop()
	}
	if err != nil {
		a.Class, a.Err = failureOf(ctx, actx, err)
		return a
	}
	defer resp.Body.Close()
	a.Exec.HTTPStatus = resp.StatusCode
	a.Exec.FirstByte = time.Since(a.Exec.Started)
	rd := &idleReader{r: resp.Body, d: to.Idle}
	if to.Idle > 0 {
		rd.t = time.AfterFunc(to.Idle, func() { cancel(errIdleTimeout) })
		defer rd.t.Stop()
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return c.rejected(ctx, actx, w, resp, rd, a)
	}
	a.Exhausted = Exhausted(resp.Header, time.Now())
	if req.Stream {
		return c.relay(ctx, actx, w, req, rd, a, callStart)
	}
	return c.forward(ctx, actx, w, resp, rd, a, callStart)
}

// rejected handles a non-2xx answer: it is classified, and a request error
// goes back to the caller unchanged.
func (c *Caller) rejected(ctx, actx context.Context, w http.ResponseWriter, resp *http.Response, rd io.Reader, a Attempt) Attempt {
	body, err := io.ReadAll(io.LimitReader(rd, maxErrorBody))
	if err != nil && ctx.Err() != nil {
		a.Class, a.Err = failureOf(ctx, actx, err)
		return a
	}
	a.Class = Classify(resp.StatusCode, body)
	a.Err = fmt.Errorf("upstream answered %d", resp.StatusCode)
	if a.Class == ClassRate {
		a.RetryAfter = RetryAfter(resp.Header, time.Now())
	}
	if a.Class == ClassRequest {
		a.Committed = true
		if err := writeResponse(w, &response{status: resp.StatusCode, header: resp.Header, body: body}); err != nil {
			a.Err = fmt.Errorf("upstream answered %d; relaying it: %w", resp.StatusCode, err)
		}
	}
	return a
}

// forward relays a complete JSON answer after reading all of it, so a broken
// body can still fail over.
func (c *Caller) forward(ctx, actx context.Context, w http.ResponseWriter, resp *http.Response, rd io.Reader, a Attempt, callStart time.Time) Attempt {
	body, err := readBody(rd, resp.ContentLength)
	if err != nil {
		a.Class, a.Err = failureOf(ctx, actx, err)
		return a
	}
	a.Exec.Usage = usageOf(body)
	a.TTFT = time.Since(callStart)
	a.Committed = true
	if err := writeResponse(w, &response{status: resp.StatusCode, header: resp.Header, body: body}); err != nil {
		a.Class, a.Err = ClassCallerGone, err
	}
	return a
}

func readBody(r io.Reader, size int64) ([]byte, error) {
	if size < 0 || size > maxResponseBody {
		size = 512
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	n, err := buf.ReadFrom(io.LimitReader(r, maxResponseBody+1))
	if err == nil && n > maxResponseBody {
		err = errors.New("upstream answer larger than 64 MiB")
	}
	return buf.Bytes(), err
}

// writeResponse sends an upstream answer held in memory to the caller.
func writeResponse(w http.ResponseWriter, r *response) error {
	h := w.Header()
	if ct := r.header.Get("Content-Type"); ct != "" {
		h.Set("Content-Type", ct)
	}
	for _, k := range passedHeaders {
		if v := r.header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	h.Set("Content-Length", strconv.Itoa(len(r.body)))
	w.WriteHeader(r.status)
	_, err := w.Write(r.body)
	return err
}

// passedHeaders are upstream headers a caller can act on.
var passedHeaders = []string{"Retry-After", "Retry-After-Ms"}

// failureOf classifies an execution that ended without an HTTP answer (or
// whose body broke): the caller leaving, one of our phase timeouts, or a
// network failure.
func failureOf(ctx, actx context.Context, err error) (Class, error) {
	if ctx.Err() != nil {
		return ClassCallerGone, context.Cause(ctx)
	}
	if cause := context.Cause(actx); cause != nil {
		return ClassEndpoint, cause
	}
	return ClassEndpoint, err
}

// prepareBody adapts the caller's body to an edge that speaks the caller's
// protocol: the alias becomes the upstream model, and a stream asks for usage
// so it can be accounted. Every other byte is kept.
func prepareBody(req *sluice.Request, model string) ([]byte, error) {
	body := req.Body
	var err error
	if model != req.Model {
		if body, err = jsonfield.SetString(body, "model", model); err != nil {
			return nil, err
		}
	}
	if req.Stream && !req.IncludeUsage {
		opts := []byte(`{"include_usage":true}`)
		if s, e, ok, _ := jsonfield.Find(body, "stream_options"); ok && body[s] == '{' {
			if opts, err = jsonfield.Set(body[s:e], "include_usage", []byte("true")); err != nil {
				return nil, err
			}
		}
		if body, err = jsonfield.Set(body, "stream_options", opts); err != nil {
			return nil, err
		}
	}
	return body, nil
}

// protocolPaths are the upstream paths of the protocols Sluice forwards.
var protocolPaths = map[sluice.Protocol]string{
	sluice.ProtocolOpenAIChat:       "/v1/chat/completions",
	sluice.ProtocolOpenAIEmbeddings: "/v1/embeddings",
}

// endpointURL joins an endpoint's base URL and a protocol's path; a base URL
// that already ends in /v1 keeps it once.
func endpointURL(base string, p sluice.Protocol) string {
	base = strings.TrimSuffix(base, "/")
	path := protocolPaths[p]
	if strings.HasSuffix(base, "/v1") {
		path = strings.TrimPrefix(path, "/v1")
	}
	return base + path
}

var executionStatus = [...]sluice.ExecutionStatus{
	ClassNone: sluice.ExecutionOK, ClassRate: sluice.ExecutionRate, ClassAuth: sluice.ExecutionAuth,
	ClassBilling: sluice.ExecutionBilling, ClassEndpoint: sluice.ExecutionEndpoint,
	ClassRequest: sluice.ExecutionRequest, ClassCallerGone: sluice.ExecutionCancelled,
}

// idleReader cancels the execution when the upstream sends nothing for d
// (no timer when d is 0). Time spent writing to a slow caller is not the
// upstream's silence: the relay restarts the clock after each write.
type idleReader struct {
	r io.Reader
	d time.Duration
	t *time.Timer
}

func (ir *idleReader) Read(p []byte) (int, error) {
	n, err := ir.r.Read(p)
	ir.restart()
	return n, err
}

func (ir *idleReader) restart() {
	if ir.t != nil {
		ir.t.Reset(ir.d)
	}
}

// Failure is the error the caller sees when this was the last attempt and
// it did not answer.
func (a Attempt) Failure() error {
	switch {
	case a.Class == ClassCallerGone:
		return a.Err
	case errors.Is(a.Err, errFirstByteTimeout), errors.Is(a.Err, errIdleTimeout), errors.Is(a.Err, errTotalTimeout):
		return &sluice.Error{Code: sluice.CodeUpstreamTimeout, Msg: "the upstream did not answer in time", Err: a.Err}
	default:
		return &sluice.Error{Code: sluice.CodeNoUpstreamAvailable, Msg: "no upstream could serve the request", Err: a.Err}
	}
}

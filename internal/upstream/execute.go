package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/jsonfield"
	"github.com/sluicehq/sluice/internal/telemetry"
)

// maxErrorBody bounds what Sluice holds of an upstream's error answer,
// which is classified and maybe passed on (see also maxHeldAnswer).
const maxErrorBody = 64 << 10

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
	// Local: Sluice answered itself (a token count for an upstream that has
	// none) and sent nothing, so the attempt says nothing of the edge's
	// health: no breaker, no probe, no cooldown ends by it.
	Local bool
	// StoredID is the id of the response the upstream stored (see
	// Dialect.Stores), read from a passthrough's answer; "" otherwise.
	StoredID string
	// ModelScoped says a rate limit is the upstream's quota of the edge's
	// model, not of its whole account (see ModelScoped).
	ModelScoped bool
	// Dropped names the caller's fields the attempt's translator left
	// out of the upstream request (adapter.Translator.Dropped), when its
	// answer reached the caller; nil otherwise, and on a passthrough.
	Dropped []string
}

// droppedTools is a translator that leaves out of the upstream request
// tools the upstream model could never call (the Responses API's own, such
// as web_search, on a chat upstream): DroppedTools names them, and the
// caller is told in DroppedToolsHeader.
type droppedTools interface {
	DroppedTools() []string
}

const (
	// DroppedHeader names, comma-separated, the caller's fields that the
	// translation to its answer's upstream left out (Translator.Dropped);
	// a response cache that keeps the answer says it again.
	DroppedHeader = "X-Sluice-Dropped"
	// DroppedToolsHeader names, comma-separated, the tools of the
	// caller's request that its answer's upstream was not offered.
	DroppedToolsHeader = "X-Sluice-Dropped-Tools"
)

// tell sets on h, the caller's answer's header, what tr left out of the
// upstream request, and reports whether it set anything.
func tell(h http.Header, tr adapter.Translator) bool {
	told := false
	if d := tr.Dropped(); len(d) > 0 {
		h[DroppedHeader] = []string{strings.Join(d, ", ")}
		told = true
	}
	if t, ok := tr.(droppedTools); ok && len(t.DroppedTools()) > 0 {
		h[DroppedToolsHeader] = []string{strings.Join(t.DroppedTools(), ", ")}
		told = true
	}
	return told
}

// translate returns tr's upstream body for req on edge e. A caller that
// asked for strict translation (sluice.Request.StrictTranslation) gets,
// instead of a body without some of its fields or tools, the 400 naming
// them (a tool as tools[type=web_search]).
func translate(tr adapter.Translator, req *sluice.Request, e *sluice.Edge) ([]byte, error) {
	body, err := tr.Request(req, e.Model)
	if err == nil && req.StrictTranslation {
		dropped := tr.Dropped()
		if t, ok := tr.(droppedTools); ok {
			for _, tool := range t.DroppedTools() {
				dropped = append(slices.Clip(dropped), "tools[type="+tool+"]")
			}
		}
		err = adapter.Strict(dropped, e.Protocol)
	}
	if err != nil {
		return nil, err
	}
	return body, nil
}

// exchange is how one execution speaks: the upstream side of the edge's
// protocol, the caller side's stream ending, the translator when the two
// protocols differ (nil for a passthrough) and the body it made before the
// claim (made set: it does not translate again), and the secret to mask.
type exchange struct {
	dialect    *Dialect
	ending     *Ending
	tr         adapter.Translator
	translated []byte
	made       bool
	secret     string
}

// exchangeFor picks how req is carried to edge e, with the translation
// made before the claim when it fits e (Hooks.Translated; nil for none).
func (c *Caller) exchangeFor(req *sluice.Request, e *sluice.Edge, made *Translation) (exchange, error) {
	x := exchange{dialect: c.protocols.dialect(e), ending: c.protocols.Endings[req.Protocol]}
	if x.dialect == nil || x.ending == nil {
		return x, fmt.Errorf("no dialect for %s to %s", req.Protocol, e.Protocol)
	}
	if tr, body, ok := made.take(e); ok {
		x.tr, x.translated, x.made = tr, body, true
		return x, nil
	}
	if e.Protocol != req.Protocol {
		translator := c.protocols.Translators[Pair{req.Protocol, e.Protocol}]
		if translator == nil {
			return x, fmt.Errorf("no translator from %s to %s", req.Protocol, e.Protocol)
		}
		x.tr = translator()
	}
	return x, nil
}

// countLocally answers a token count for an upstream that has none (an
// Anthropic or Gemini caller on an OpenAI chat model) with Sluice's own
// estimate of the prompt (its whole body), in the caller's shape (answer,
// its dialect's CountAnswer); nothing is sent upstream. (Translating the
// count request would not help: chat has no count.)
func countLocally(w http.ResponseWriter, req *sluice.Request, e *sluice.Edge, answer func(int64) []byte, callStart time.Time, hooks Hooks) Attempt {
	a := Attempt{Exec: newExecution(e), Local: true, Committed: true, TTFT: time.Since(callStart)}
	a.Exec.Status = sluice.ExecutionOK
	hooks.ending(a)
	body := answer(req.PromptEstimate())
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(body); err != nil {
		a.Class, a.Err = ClassCallerGone, fmt.Errorf("write to caller: %w", err)
		a.Exec.Status, a.Exec.Error = sluice.ExecutionCancelled, a.Err.Error()
	}
	a.Exec.Duration = time.Since(a.Exec.Started)
	return a
}

// newExecution starts the record of an attempt on edge e.
func newExecution(e *sluice.Edge) sluice.Execution {
	return sluice.Execution{
		EdgeID: e.ID, CredentialID: e.Credential.ID, AccountID: e.Account.ID, EndpointID: e.Endpoint.ID,
		Model: e.Model, Protocol: e.Protocol, Started: time.Now(), Owner: e.Credential.Owner,
	}
}

// response is an upstream answer held in memory.
type response struct {
	status int
	header http.Header
	body   []byte
}

// execute runs one attempt of req on edge e.
func (c *Caller) execute(ctx context.Context, w http.ResponseWriter, req *sluice.Request, e *sluice.Edge, callStart time.Time, hooks Hooks) (a Attempt) {
	a.Exec = newExecution(e)
	defer func() {
		a.Exec.Duration = time.Since(a.Exec.Started)
		a.Exec.Status = executionStatus[a.Class]
		if a.Err != nil {
			a.Exec.Error = a.Err.Error()
		}
	}()
	x, err := c.exchangeFor(req, e, hooks.Translated)
	if err != nil {
		a.Class, a.Err = ClassRequest, err
		return a
	}
	// Execute answered a count for a dialect without one; routing chose a
	// compaction's edge among those whose dialect has one.
	target := x.dialect.target(req, e.Endpoint, e.Model)
	var body []byte
	switch {
	case x.tr == nil:
		body, err = x.dialect.Prepare(req, e.Model)
	case x.made:
		body = x.translated
	default:
		body, err = translate(x.tr, req, e)
	}
	if err == nil {
		body, err = x.dialect.finishBody(req, e.Endpoint, e.Model, body)
	}
	if err != nil {
		a.Class, a.Err = ClassRequest, fmt.Errorf("prepare body: %w", err)
		return a
	}
	if x.tr != nil && tell(w.Header(), x.tr) {
		// Set before any path commits the answer; an attempt that does
		// not commit takes them back, since the next edge may drop
		// nothing.
		a.Dropped = x.tr.Dropped()
		defer func() {
			if !a.Committed {
				w.Header().Del(DroppedHeader)
				w.Header().Del(DroppedToolsHeader)
				a.Dropped = nil
			}
		}()
	}
	to := e.Endpoint.Timeouts
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timeouts := startPhases(cancel, to)
	defer timeouts.stop()
	hreq, err := http.NewRequestWithContext(actx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		a.Class, a.Err = ClassEndpoint, fmt.Errorf("build upstream request: %w", err)
		return a
	}
	h := hreq.Header
	h["Content-Type"] = jsonContentType
	h["User-Agent"] = userAgent // unless the caller's is passed on
	// A cloud that answers only streams is sent a stream for a whole
	// answer too (Hosting.Gather; a compaction answers JSON).
	gathers := !req.Stream && x.dialect.gather != nil && !req.Compact
	if req.Stream || gathers {
		h["Accept"] = eventStream
	}
	pass := x.dialect.Pass
	if x.tr != nil {
		pass = sluice.HeaderSet{} // the caller's headers describe its protocol, not the upstream's
	}
	passOn(h, req.Header, pass, &e.Endpoint.Headers)
	telemetry.Inject(ctx, h) // the attempt's own trace context, never the caller's
	resp, secret, err := c.send(hreq, x.dialect, req.Header, e.Credential, e.Endpoint)
	if err != nil {
		a.Class, a.Err = failureOf(ctx, actx, err)
		return a
	}
	defer resp.Body.Close()
	a.Exec.HTTPStatus = resp.StatusCode
	a.Exec.FirstByte = time.Since(a.Exec.Started)
	timeouts.receiving()
	rd := &idleReader{r: resp.Body, p: timeouts}
	x.secret = secret
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return c.rejected(ctx, actx, w, resp, rd, a, x)
	}
	a.Exhausted = Exhausted(resp.Header, time.Now())
	if req.Stream {
		switch {
		case x.dialect.unframe != nil:
			if rd.r, err = x.dialect.unframe(resp.Header, resp.Body); err != nil {
				a.Class, a.Err = ClassEndpoint, err
				return a
			}
		case !hasMediaType(resp.Header, isEventStream):
			a.Class, a.Err = ClassEndpoint, fmt.Errorf("upstream answered a stream %d with a content type that is not text/event-stream", resp.StatusCode)
			return a
		}
		return c.relay(ctx, actx, w, req, rd, a, callStart, hooks, x)
	}
	if gathers {
		return c.gathered(ctx, actx, w, resp, rd, a, callStart, hooks, x)
	}
	return c.forward(ctx, actx, w, resp, rd, a, callStart, hooks, x)
}

// rejected handles a non-2xx answer: it is classified, and a request error
// goes back to the caller unchanged but for what scrubError masks.
func (c *Caller) rejected(ctx, actx context.Context, w http.ResponseWriter, resp *http.Response, rd io.Reader, a Attempt, x exchange) Attempt {
	body, err := io.ReadAll(io.LimitReader(rd, maxErrorBody))
	if err != nil && ctx.Err() != nil {
		a.Class, a.Err = failureOf(ctx, actx, err)
		return a
	}
	if x.dialect.rejection != nil {
		resp.StatusCode, body = x.dialect.rejection(resp.StatusCode, resp.Header, body)
	}
	classifyRejection(&a, resp, body)
	if a.Class == ClassRequest {
		a.Committed = true
		scrubError(body, x.secret)
		if x.tr != nil {
			// Scrubbed again: the translator decodes the upstream's
			// error to write it anew, and what it writes is not what
			// was masked.
			body = x.tr.Error(resp.StatusCode, body)
			scrubError(body, x.secret)
		}
		if err := writeResponse(w, &response{status: resp.StatusCode, header: resp.Header, body: body}, x.secret, true); err != nil {
			a.Err = fmt.Errorf("upstream answered %d; relaying it: %w", resp.StatusCode, err)
		}
	}
	return a
}

// classifyRejection records what a non-2xx answer with body means.
func classifyRejection(a *Attempt, resp *http.Response, body []byte) {
	e := decodeError(body)
	a.Class = e.class(resp.StatusCode)
	a.Err = fmt.Errorf("upstream answered %d", resp.StatusCode)
	if a.Class == ClassRate {
		a.ModelScoped = e.modelScoped()
		now := time.Now()
		if a.RetryAfter = RetryAfter(resp.Header, now); a.RetryAfter == 0 {
			a.RetryAfter = e.googleRetryAfter(now) // Gemini says it in the body
		}
	}
}

// ErrShuttingDown is the cause with which the gateway cancels the requests
// still running when its shutdown grace ends. An execution cut by it is
// cancelled as if its caller had left (nobody is penalised), but the caller
// is still there: a committed stream ends with an error event saying why,
// and an uncommitted request is answered with this error.
var ErrShuttingDown = &sluice.Error{Code: sluice.CodeServerBusy, Msg: "the gateway is shutting down", RetryAfter: time.Second}

// failureOf classifies an execution that ended without an HTTP answer (or
// whose body broke): the caller leaving or the gateway shutting down (the
// request's context cancelled, with ErrShuttingDown as its cause), one of
// our phase timeouts, or a network failure.
func failureOf(ctx, actx context.Context, err error) (Class, error) {
	if ctx.Err() != nil {
		return ClassCallerGone, context.Cause(ctx)
	}
	if cause := context.Cause(actx); cause != nil {
		return ClassEndpoint, cause
	}
	return ClassEndpoint, err
}

// PrepareBody adapts the caller's body to an edge that speaks the caller's
// protocol: the alias becomes the upstream model, and a stream asks for usage
// so it can be accounted. Every other byte is kept. It relies on what
// ingress.Parse admits: one member any JSON reader takes for "model" (or
// "stream_options", "include_usage"), spelled exactly, so the member
// replaced is the only one an upstream can read; and a model without
// U+FFFD, which every reader decodes alike, so a body whose model already
// is the deployment's is sent as it is. (Exported so the ingress's fuzz test
// checks the two together, with several readers.)
func PrepareBody(req *sluice.Request, model string) ([]byte, error) {
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

// Header values of every upstream request, set under canonical keys. One
// slice serves all requests: the transport only reads a request's header
// (and net/http's server copies a response's header before writing it),
// and Header.Add copies a full slice (length and capacity 1) before
// appending, so none is ever written to.
var (
	jsonContentType = []string{"application/json"}
	userAgent       = []string{"sluice"}
	eventStream     = []string{"text/event-stream"}
)

var executionStatus = [...]sluice.ExecutionStatus{
	ClassNone: sluice.ExecutionOK, ClassRate: sluice.ExecutionRate, ClassAuth: sluice.ExecutionAuth,
	ClassBilling: sluice.ExecutionBilling, ClassEndpoint: sluice.ExecutionEndpoint,
	ClassRequest: sluice.ExecutionRequest, ClassCallerGone: sluice.ExecutionCancelled,
}

// phases cancels an execution whose upstream overruns a phase timeout
// (docs/architecture.md): first byte until the answer's headers arrive, then idle
// between reads, and total throughout; a timeout of 0 is none. The cancel
// cause names the timeout. One timer serves every phase, re-armed for the
// nearest deadline at each step, where a context and a timer per phase
// would cost about fifteen allocations per execution.
type phases struct {
	cancel context.CancelCauseFunc
	total  time.Time     // deadline of the total timeout; zero when none
	idle   time.Duration // the idle timeout, once receiving
	timer  *time.Timer   // nil until a timeout is armed
	// body is set when the headers have arrived: from then on the timer
	// stands for the idle timeout. Atomic because the timer's function
	// reads it on another goroutine.
	body atomic.Bool
}

// startPhases arms the first-byte and total timeouts of to.
func startPhases(cancel context.CancelCauseFunc, to sluice.Timeouts) *phases {
	p := &phases{cancel: cancel, idle: to.Idle}
	if to.Total > 0 {
		p.total = time.Now().Add(to.Total)
	}
	p.arm(to.FirstByte)
	return p
}

// receiving moves on to the body: the idle timeout replaces the first-byte one.
func (p *phases) receiving() {
	p.body.Store(true)
	p.arm(p.idle)
}

// restart gives the upstream the idle timeout again after a read (or a
// write to a slow caller, whose time is not the upstream's silence).
func (p *phases) restart() {
	if p.idle > 0 {
		p.arm(p.idle)
	}
}

// arm sets the timer to d (0: no phase timeout), or to the total deadline
// if that comes first.
func (p *phases) arm(d time.Duration) {
	armed := d > 0
	if !p.total.IsZero() {
		if left := time.Until(p.total); !armed || left < d {
			d, armed = left, true
		}
	}
	switch {
	case !armed:
		p.stop()
	case p.timer == nil:
		p.timer = time.AfterFunc(d, p.expire)
	default:
		p.timer.Reset(d)
	}
}

// expire runs on the timer's goroutine when the nearest deadline passed.
func (p *phases) expire() {
	switch {
	case !p.total.IsZero() && !time.Now().Before(p.total):
		p.cancel(errTotalTimeout)
	case p.body.Load():
		p.cancel(errIdleTimeout)
	default:
		p.cancel(errFirstByteTimeout)
	}
}

// stop disarms the timer; the execution is over or needs no timeout now.
func (p *phases) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// idleReader is the body of an upstream answer: each read restarts the
// idle timeout.
type idleReader struct {
	r io.Reader
	p *phases
}

func (ir *idleReader) Read(b []byte) (int, error) {
	n, err := ir.r.Read(b)
	ir.p.restart()
	return n, err
}

// Failure is the error the caller sees when this was the last attempt and
// it did not answer.
func (a Attempt) Failure() error {
	if se, ok := errors.AsType[*sluice.Error](a.Err); ok && a.Class == ClassRequest {
		return se // a request its translator cannot carry to the other protocol, in the translator's words
	}
	switch {
	case a.Class == ClassCallerGone:
		return a.Err
	case errors.Is(a.Err, errFirstByteTimeout), errors.Is(a.Err, errIdleTimeout), errors.Is(a.Err, errTotalTimeout):
		return &sluice.Error{Code: sluice.CodeUpstreamTimeout, Msg: "the upstream did not answer in time", Err: a.Err}
	default:
		return &sluice.Error{Code: sluice.CodeNoUpstreamAvailable, Msg: "no upstream could serve the request", Err: a.Err}
	}
}

package telemetry

import (
	"context"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
)

// request is what a recorded request's trace holds while the request
// runs: its span, what was written to its caller, and what the pipeline
// told of its attempts. It is reached through the request's context and
// used on the request's goroutine only.
type request struct {
	span    trace.Span
	out     capture
	content bool // the key's trace_content: prompt and completion are recorded
	tried   int  // attempts begun
	// waited is the request's wait for capacity so far; granted, what of
	// it came before the attempt last granted.
	waited, granted time.Duration
	wait            time.Duration // the running attempt's own wait
	fallback        string        // the running attempt's fallback reason
	model           string        // gen_ai.response.model, once read from the answer
	// settled are the attributes Settled found, set with End's: the SDK
	// copies a span's attributes at each SetAttributes, so one call is cheaper.
	settled []attribute.KeyValue
}

type requestKey struct{}

func requestOf(ctx context.Context) *request {
	r, _ := ctx.Value(requestKey{}).(*request)
	return r
}

// Request begins the server span of req, which key sent and w answers:
// a child of the caller's trace when req's header has a valid
// traceparent. It returns the context the request runs in, and the
// writer its answer must go through when the span records (w itself
// otherwise). End ends the span.
func (t *Tracer) Request(ctx context.Context, w http.ResponseWriter, req *sluice.Request, key *sluice.Key) (context.Context, http.ResponseWriter) {
	if t == nil {
		return ctx, w
	}
	if _, ok := req.Header["Traceparent"]; ok { // canonical, as net/http stores it: no lookup to canonicalise
		ctx = propagator.Extract(ctx, propagation.HeaderCarrier(req.Header))
	}
	op := operation(req.Protocol, req.CountTokens)
	ctx, span := t.tracer.Start(ctx, op.Value.AsString()+" "+req.Model, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(req.Received),
		trace.WithAttributes(op, semconv.GenAIRequestModel(req.Model), semconv.GenAIRequestStream(req.Stream), attrRequestID.String(req.ID)))
	if !span.IsRecording() {
		return ctx, w // sampled out: the span's context still goes upstream
	}
	r := &request{span: span, content: key.TraceContent}
	r.out.ResponseWriter, r.out.limit = w, modelScan
	if r.content {
		r.out.limit = maxContent
		text, cut := bounded(req.Body)
		span.SetAttributes(attrPrompt.String(text), attrPromptCut.Bool(cut))
	}
	return context.WithValue(ctx, requestKey{}, r), &r.out
}

// Granted notes that an attempt of the request in ctx got its claim
// after the request had waited waited for capacity in all, and that it
// runs outside the key's bound accounts for the reason fallback ("" when
// it does not).
func (t *Tracer) Granted(ctx context.Context, waited time.Duration, fallback string) {
	if t == nil {
		return
	}
	if r := requestOf(ctx); r != nil {
		r.wait, r.granted, r.waited, r.fallback = waited-r.granted, waited, waited, fallback
	}
}

// Waited notes the request's whole wait for capacity, once it is known.
func (t *Tracer) Waited(ctx context.Context, waited time.Duration) {
	if t == nil {
		return
	}
	if r := requestOf(ctx); r != nil {
		r.waited = waited
	}
}

// Settled records on the request's span what its usage record says:
// who sent it, how it ended, what it used, and where its last attempt ran.
func (t *Tracer) Settled(ctx context.Context, rec *sluice.UsageRecord) {
	if t == nil {
		return
	}
	r := requestOf(ctx)
	if r == nil {
		return
	}
	kv := make([]attribute.KeyValue, 0, 20) // room for End's too
	kv = append(kv, attrKeyID.String(rec.KeyID), attrTenant.String(rec.Tenant), attrPriority.String(rec.Priority),
		attrAttempts.Int(len(rec.Executions)))
	if rec.Status != 0 {
		kv = append(kv, semconv.HTTPResponseStatusCode(rec.Status))
	}
	if rec.Code != "" {
		kv = append(kv, attrErrorCode.String(string(rec.Code)), semconv.ErrorTypeKey.String(string(rec.Code)))
	}
	kv = appendUsage(kv, &rec.Usage)
	if rec.Stream && rec.TTFT > 0 {
		kv = append(kv, semconv.GenAIResponseTimeToFirstChunk(rec.TTFT.Seconds()))
	}
	if n := len(rec.Executions); n > 0 {
		x := &rec.Executions[n-1]
		kv = append(kv, attrAccount.String(x.AccountID), attrCredential.String(x.CredentialID), attrEndpoint.String(x.EndpointID))
		if x.Fallback != "" {
			kv = append(kv, attrFallback.String(x.Fallback))
		}
	}
	r.settled = kv
	if rec.Status >= 500 {
		r.span.SetStatus(codes.Error, string(rec.Code)) // a 4xx is the caller's: the server span's status stays unset
	}
}

// End ends the span of the request in ctx, with what its caller was sent.
func (t *Tracer) End(ctx context.Context) {
	if t == nil {
		return
	}
	r := requestOf(ctx)
	if r == nil {
		return
	}
	kv := append(r.settled, attrQueueWait.Float64(r.waited.Seconds()))
	if r.model != "" {
		kv = append(kv, semconv.GenAIResponseModel(r.model))
	}
	if r.content {
		text, cut := bounded(r.out.head)
		kv = append(kv, attrCompletion.String(text), attrCompletionCut.Bool(cut || r.out.written > int64(len(r.out.head))))
	}
	r.span.SetAttributes(kv...)
	r.span.End()
}

// Attempt is the span of one attempt on an upstream; its zero value (no
// tracer) does nothing.
type Attempt struct {
	span trace.Span
	r    *request // nil when the request is not recorded
}

// Attempt begins the client span of an attempt on e of the request in
// ctx, and returns the context the attempt runs in: Inject sends the
// span's context upstream.
func (t *Tracer) Attempt(ctx context.Context, e *sluice.Edge) (context.Context, Attempt) {
	if t == nil {
		return ctx, Attempt{}
	}
	r := requestOf(ctx)
	kind := trace.WithSpanKind(trace.SpanKindClient)
	if r == nil {
		// The request is sampled out, and so is its attempt (its child):
		// the span only carries the trace's context upstream, and its name
		// is never seen.
		ctx, span := t.tracer.Start(ctx, "attempt", kind)
		return ctx, Attempt{span: span}
	}
	op := operation(e.Protocol, false)
	r.tried++
	kv := make([]attribute.KeyValue, 0, 12)
	kv = append(kv, op, provider(e), semconv.GenAIRequestModel(e.Model), attrAttempt.Int(r.tried), attrQueueWait.Float64(r.wait.Seconds()),
		attrAccount.String(e.Account.ID), attrCredential.String(e.Credential.ID), attrEndpoint.String(e.Endpoint.ID))
	kv = append(kv, t.server(e.Endpoint.BaseURL)...)
	if r.fallback != "" {
		kv = append(kv, attrFallback.String(r.fallback))
	}
	ctx, span := t.tracer.Start(ctx, op.Value.AsString()+" "+e.Model, kind, trace.WithAttributes(kv...))
	return ctx, Attempt{span: span, r: r}
}

// End ends the attempt's span with its execution x, failure class (its
// name; "ok" for none) and internal cause err (safe for logs: it names
// no secret).
func (a Attempt) End(x *sluice.Execution, class string, err error) {
	if a.span == nil {
		return
	}
	s := a.span
	if a.r == nil || !s.IsRecording() {
		s.End()
		return
	}
	kv := make([]attribute.KeyValue, 0, 12)
	if x.HTTPStatus != 0 {
		kv = append(kv, semconv.HTTPResponseStatusCode(x.HTTPStatus))
	}
	if x.FirstByte > 0 {
		kv = append(kv, attrFirstByte.Float64(x.FirstByte.Seconds()))
	}
	kv = appendUsage(kv, &x.Usage)
	if a.r.out.head != nil && a.r.model == "" {
		// This attempt answered the caller: its answer names the model.
		if a.r.model = responseModel(a.r.out.head); a.r.model != "" {
			kv = append(kv, semconv.GenAIResponseModel(a.r.model))
		}
	}
	if class != "ok" {
		kv = append(kv, attrErrorClass.String(class), semconv.ErrorTypeKey.String(class))
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		s.SetStatus(codes.Error, msg)
	}
	s.SetAttributes(kv...)
	s.End()
}

// appendUsage appends measured usage u in the conventions' terms: input
// tokens include those read from and written to the prompt cache, output
// tokens include reasoning.
func appendUsage(kv []attribute.KeyValue, u *sluice.Usage) []attribute.KeyValue {
	if !u.Measured {
		return kv
	}
	kv = append(kv, semconv.GenAIUsageInputTokens(int(u.PromptTokens)), semconv.GenAIUsageOutputTokens(int(u.CompletionTokens)))
	if u.CachedTokens > 0 {
		kv = append(kv, semconv.GenAIUsageCacheReadInputTokens(int(u.CachedTokens)))
	}
	if u.CacheWriteTokens > 0 {
		kv = append(kv, semconv.GenAIUsageCacheCreationInputTokens(int(u.CacheWriteTokens)))
	}
	if u.ReasoningTokens > 0 {
		kv = append(kv, semconv.GenAIUsageReasoningOutputTokens(int(u.ReasoningTokens)))
	}
	return kv
}

// server is server.address and server.port of an endpoint's base URL,
// parsed once per URL.
func (t *Tracer) server(baseURL string) []attribute.KeyValue {
	if kv, ok := t.servers.Load(baseURL); ok {
		return kv.([]attribute.KeyValue)
	}
	kv := serverOf(baseURL)
	t.servers.Store(baseURL, kv)
	return kv
}

func serverOf(baseURL string) []attribute.KeyValue {
	u, err := url.Parse(baseURL)
	if err != nil || u.Host == "" {
		return nil
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	out := []attribute.KeyValue{semconv.ServerAddress(host)}
	if n, err := strconv.Atoi(port); err == nil {
		out = append(out, semconv.ServerPort(n))
	}
	return out
}

// Inject sets on an upstream request's header h the W3C traceparent of
// the attempt span in ctx, replacing any a caller's header brought; it
// does nothing (and allocates nothing) without a span.
func Inject(ctx context.Context, h http.Header) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	h["Traceparent"] = []string{traceparent(sc)}
}

// traceparent is sc in the header's version 00: version-traceid-spanid-flags.
func traceparent(sc trace.SpanContext) string {
	var b [55]byte
	tid, sid := sc.TraceID(), sc.SpanID()
	b[0], b[1], b[2] = '0', '0', '-'
	hex.Encode(b[3:35], tid[:])
	b[35] = '-'
	hex.Encode(b[36:52], sid[:])
	b[52] = '-'
	hex.Encode(b[53:55], []byte{byte(sc.TraceFlags())})
	return string(b[:])
}

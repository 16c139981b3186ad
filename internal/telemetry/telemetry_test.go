package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicehq/sluice"
)

var (
	testEdge = &sluice.Edge{ID: "e", Protocol: sluice.ProtocolOpenAIChat, Model: "gpt-4o-mini",
		Credential: &sluice.Credential{ID: "c1"}, Account: &sluice.Account{ID: "a1"},
		Endpoint: &sluice.Endpoint{ID: "ep", BaseURL: "https://api.example.com/v1"}}
	testKey = &sluice.Key{ID: "web", Tenant: "web"}
)

func testRequest(header http.Header) *sluice.Request {
	return &sluice.Request{ID: "req-1", Protocol: sluice.ProtocolOpenAIChat, Model: "fast", Received: time.Now(),
		Body: []byte(`{"model":"fast"}`), Header: header}
}

// TestOffAllocatesNothing: with tracing off (a nil Tracer) every hook the
// request path calls returns without allocating.
func TestOffAllocatesNothing(t *testing.T) {
	var tr *Tracer
	ctx, w, req := context.Background(), http.ResponseWriter(httptest.NewRecorder()), testRequest(http.Header{})
	h := http.Header{}
	rec := &sluice.UsageRecord{}
	x := &sluice.Execution{}
	allocs := testing.AllocsPerRun(100, func() {
		rctx, rw := tr.Request(ctx, w, req, testKey)
		tr.Granted(rctx, time.Millisecond, "")
		actx, span := tr.Attempt(rctx, testEdge)
		Inject(actx, h)
		span.End(x, "ok", nil)
		tr.Waited(rctx, time.Millisecond)
		tr.Settled(rctx, rec)
		tr.End(rctx)
		_ = rw
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request with tracing off, want 0", allocs)
	}
	if len(h) != 0 {
		t.Errorf("tracing off set upstream headers %v", h)
	}
}

func newTestTracer(t *testing.T, sample float64) (*Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	tr, err := NewWith(t.Context(), sdktrace.NewSimpleSpanProcessor(spans), sample, Service{Version: "test", Instance: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, spans
}

// run is a request with one attempt through the hooks, in the order the
// pipeline calls them; it returns what the upstream was sent.
func run(t *testing.T, tr *Tracer, req *sluice.Request, key *sluice.Key, answer string) http.Header {
	t.Helper()
	ctx, w := tr.Request(t.Context(), httptest.NewRecorder(), req, key)
	defer tr.End(ctx)
	tr.Granted(ctx, 20*time.Millisecond, "cooling")
	actx, span := tr.Attempt(ctx, testEdge)
	up := http.Header{}
	Inject(actx, up)
	w.Write([]byte(answer))
	x := &sluice.Execution{HTTPStatus: 200, Usage: sluice.Usage{Measured: true, PromptTokens: 12, CompletionTokens: 5, CachedTokens: 4}}
	span.End(x, "ok", nil)
	tr.Waited(ctx, 20*time.Millisecond)
	tr.Settled(ctx, &sluice.UsageRecord{KeyID: key.ID, Tenant: key.Tenant, Status: 200, Usage: x.Usage, Executions: []sluice.Execution{*x}})
	return up
}

func TestSpansOfARequest(t *testing.T) {
	tr, spans := newTestTracer(t, 1)
	up := run(t, tr, testRequest(nil), testKey, `{"id":"x","model":"gpt-4o-mini-2024-07-18","choices":[]}`)
	got := spans.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans, want the attempt's and the request's", len(got))
	}
	attempt, request := got[0], got[1]
	if attempt.Parent.SpanID() != request.SpanContext.SpanID() {
		t.Errorf("the attempt's parent is %s, want the request's span %s", attempt.Parent.SpanID(), request.SpanContext.SpanID())
	}
	want := "00-" + attempt.SpanContext.TraceID().String() + "-" + attempt.SpanContext.SpanID().String() + "-01"
	if up.Get("Traceparent") != want {
		t.Errorf("traceparent sent upstream %q, want %q", up.Get("Traceparent"), want)
	}
	attrs := func(s tracetest.SpanStub) map[string]string {
		m := map[string]string{}
		for _, kv := range s.Attributes {
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	for name, want := range map[string]map[string]string{
		"request": {"gen_ai.request.model": "fast", "gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.usage.input_tokens": "12",
			"gen_ai.usage.cache_read.input_tokens": "4", "sluice.queue_wait": "0.02", "sluice.fallback_reason": "", "sluice.key_id": "web"},
		"attempt": {"gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai", "server.address": "api.example.com",
			"server.port": "443", "sluice.attempt": "1", "sluice.queue_wait": "0.02", "sluice.fallback_reason": "cooling",
			"gen_ai.response.model": "gpt-4o-mini-2024-07-18", "gen_ai.usage.output_tokens": "5"},
	} {
		s := map[string]tracetest.SpanStub{"request": request, "attempt": attempt}[name]
		got := attrs(s)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s span: %s = %q, want %q", name, k, got[k], v)
			}
		}
	}
}

// TestCallersTrace: a caller's traceparent is continued, sampled or not
// (a sampled caller is recorded however low the sample).
func TestCallersTrace(t *testing.T) {
	tr, spans := newTestTracer(t, 0)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-"
	up := run(t, tr, testRequest(http.Header{"Traceparent": {parent + "01"}}), testKey, `{}`)
	if got := spans.GetSpans(); len(got) != 2 || got[1].Parent.SpanID().String() != "00f067aa0ba902b7" || !got[1].Parent.IsRemote() {
		t.Fatalf("spans %v: want the request's a child of the caller's span", got)
	}
	if tp := up.Get("Traceparent"); !strings.HasPrefix(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || strings.Contains(tp, "00f067aa0ba902b7") {
		t.Errorf("traceparent sent upstream %q: want the caller's trace, the attempt's span", tp)
	}

	spans.Reset()
	up = run(t, tr, testRequest(http.Header{"Traceparent": {parent + "00"}}), testKey, `{}`)
	if got := spans.GetSpans(); len(got) != 0 {
		t.Errorf("%d spans recorded of a caller's unsampled trace", len(got))
	}
	if tp := up.Get("Traceparent"); !strings.HasPrefix(tp, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || !strings.HasSuffix(tp, "-00") {
		t.Errorf("traceparent sent upstream %q: want the caller's trace, unsampled", tp)
	}

	for _, bad := range []string{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "zz-" + strings.Repeat("0", 50), "00-00000000000000000000000000000000-00f067aa0ba902b7-01"} {
		spans.Reset()
		up = run(t, tr, testRequest(http.Header{"Traceparent": {bad}}), testKey, `{}`)
		if tp := up.Get("Traceparent"); strings.Contains(tp, "4bf92f3577b34da6a3ce929d0e0e4736") || strings.Contains(tp, "00f067aa0ba902b7") {
			t.Errorf("a malformed traceparent %q was continued: %q went upstream", bad, tp)
		}
	}
}

// TestTraceparentIsW3C: what Inject writes, the W3C propagator reads back
// as the attempt span's context.
func TestTraceparentIsW3C(t *testing.T) {
	tr, _ := newTestTracer(t, 1)
	ctx, span := tr.Attempt(t.Context(), testEdge)
	h := http.Header{}
	Inject(ctx, h)
	span.End(&sluice.Execution{}, "ok", nil)
	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h)))
	if want := trace.SpanContextFromContext(ctx); !got.Equal(want.WithRemote(true)) {
		t.Errorf("traceparent %q reads back as %v, want %v", h.Get("Traceparent"), got, want)
	}
}

func TestContentOnlyForKeysThatAskIt(t *testing.T) {
	tr, spans := newTestTracer(t, 1)
	req := testRequest(nil)
	req.Body = []byte(`{"model":"fast","messages":[{"role":"user","content":"a secret plan"}]}`)
	answer := `{"model":"m","choices":[{"message":{"content":"the plan"}}]}`
	run(t, tr, req, testKey, answer)
	run(t, tr, req, &sluice.Key{ID: "traced", KeySettings: sluice.KeySettings{TraceContent: true}}, answer)
	got := spans.GetSpans()
	for i, s := range got {
		text := ""
		for _, kv := range s.Attributes {
			text += kv.Value.String()
		}
		traced := i == len(got)-1 // the second request's span
		if strings.Contains(text, "a secret plan") != traced || strings.Contains(text, "the plan\"") != traced {
			t.Errorf("span %d %q records content: %v; want it only on the traced key's request span", i, s.Name, !traced)
		}
	}
}

func TestResponseModel(t *testing.T) {
	for give, want := range map[string]string{
		`{"id":"c","object":"chat.completion","model":"gpt-4o-mini","choices":[]}`:                                   "gpt-4o-mini",
		"data: {\"id\":\"c\",\"model\" : \"gpt-4o\",\"choices\":[]}\n\n":                                             "gpt-4o",
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"claude\"}}\n": "claude",
		`{"candidates":[],"modelVersion":"gemini-2.5-flash"}`:                                                        "gemini-2.5-flash",
		`{"choices":[{"message":{"content":"the \"model\": \"fake\""}}],"model":"real"}`:                             "real",
		`{"choices":[{"message":{"content":"model"}}],"usage":{}}`:                                                   "",
		`{"model":null,"x":{"model":"inner"}}`:                                                                       "inner",
		`{"error":{"message":"no"}}`:                                                                                 "",
	} {
		if got := responseModel([]byte(give)); got != want {
			t.Errorf("responseModel(%s) = %q, want %q", give, got, want)
		}
	}
}

func TestBoundedCutsAtARune(t *testing.T) {
	b := []byte(strings.Repeat("a", maxContent-1) + "é and more")
	text, cut := bounded(b)
	if !cut || len(text) != maxContent-1 || !utf8.ValidString(text) {
		t.Errorf("bounded = %d bytes, cut %v; want %d bytes of whole runes, cut", len(text), cut, maxContent-1)
	}
	if text, cut := bounded([]byte("short")); text != "short" || cut {
		t.Errorf("bounded(short) = %q, %v", text, cut)
	}
}

// BenchmarkRequestTraced is the hooks of a traced request with one
// attempt, spans batched to an exporter that drops them: what tracing at
// sample 1 costs the request path, before export.
//
//	go test -run '^$' -bench RequestTraced -benchmem ./internal/telemetry/
func BenchmarkRequestTraced(b *testing.B) {
	tr, err := NewWith(b.Context(), sdktrace.NewBatchSpanProcessor(tracetest.NewNoopExporter()), 1, Service{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tr.Close() })
	req := testRequest(http.Header{})
	answer := []byte(`{"id":"x","model":"gpt-4o-mini-2024-07-18","choices":[{"message":{"content":"hello"}}],"usage":{}}`)
	rec := &sluice.UsageRecord{KeyID: "web", Tenant: "web", Status: 200, Usage: sluice.Usage{Measured: true, PromptTokens: 12, CompletionTokens: 5},
		Executions: []sluice.Execution{{AccountID: "a1", CredentialID: "c1", EndpointID: "ep"}}}
	x := &rec.Executions[0]
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		ctx, rw := tr.Request(b.Context(), w, req, testKey)
		tr.Granted(ctx, time.Millisecond, "")
		actx, span := tr.Attempt(ctx, testEdge)
		h := http.Header{}
		Inject(actx, h)
		rw.Write(answer)
		span.End(x, "ok", nil)
		tr.Waited(ctx, time.Millisecond)
		tr.Settled(ctx, rec)
		tr.End(ctx)
		w.Body.Reset()
	}
}

package app_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
)

// keyTraced is the key of tracedCatalog whose traces record its prompts
// and completions.
const keyTraced = "sk-sluice-codex-KEY-3b7d1f5a9c2e4a6c8e" // testEnv's KEY_CODEX

// tracedCatalog is catalogTemplate with a key that has trace_content.
// Its telemetry section turns tracing on (a key may carry trace_content
// only then); tracedHarness sends the spans to memory, not to the endpoint.
const tracedCatalog = catalogTemplate + "  - {id: traced, tenant: lab, secret_env: KEY_CODEX, trace_content: true}\n" +
	"telemetry: {otlp: {endpoint: \"http://127.0.0.1:9\"}}\n"

// tracedHarness is a gateway on template whose spans go to an in-memory
// exporter, each as it ends.
func tracedHarness(t *testing.T, template string) (*harness, *tracetest.InMemoryExporter) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	h := newHarnessOn(t, template, "{backend: memory}", simulator.Options{}, simulator.Options{},
		func(o *app.Options) { o.Spans = sdktrace.NewSimpleSpanProcessor(spans) })
	return h, spans
}

// requestTrace is the spans of one request: its server span and the
// client spans of its attempts, in the order they started.
type requestTrace struct {
	server   tracetest.SpanStub
	attempts []tracetest.SpanStub
}

// traceOf waits for the spans of the request with ID id. Attempts end
// before their request, so once its span is exported theirs are.
func traceOf(t *testing.T, spans *tracetest.InMemoryExporter, id string) requestTrace {
	t.Helper()
	var tr requestTrace
	eventually(t, 5*time.Second, "the spans of request "+id, func() bool {
		for _, s := range spans.GetSpans() {
			if s.SpanKind == trace.SpanKindServer && attr(s, "sluice.request_id").AsString() == id {
				tr.server = s
				return true
			}
		}
		return false
	})
	for _, s := range spans.GetSpans() {
		if s.Parent.SpanID() == tr.server.SpanContext.SpanID() {
			tr.attempts = append(tr.attempts, s)
		}
	}
	return tr
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// wantAttrs checks that s has each attribute of want, by its value's
// text ("*" for any value).
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	for k, v := range want {
		got := attr(s, k)
		if got.Type() == attribute.EMPTY || v != "*" && got.String() != v {
			t.Errorf("span %q: %s = %q, want %q", s.Name, k, got.String(), v)
		}
	}
}

// send posts body as key, with extra headers, and returns the status and
// the request's ID.
func send(t *testing.T, h *harness, key, body string, header map[string]string) (int, string) {
	t.Helper()
	code, answer, _ := h.postWith(t.Context(), "/v1/chat/completions", key, body, header)
	return code, answer.Get("X-Request-Id")
}

// sentTraceparents are the traceparent headers the upstreams received.
func sentTraceparents(sims ...*simulator.Simulator) []string {
	var out []string
	for _, s := range sims {
		for _, r := range s.Requests() {
			out = append(out, r.Header.Get("Traceparent"))
		}
	}
	return out
}

// traceparentOf is the header that names s as the parent.
func traceparentOf(s tracetest.SpanStub) string {
	return fmt.Sprintf("00-%s-%s-%s", s.SpanContext.TraceID(), s.SpanContext.SpanID(), s.SpanContext.TraceFlags())
}

const streamChatBody = `{"model":"fast","stream":true,"messages":[{"role":"user","content":"hello there"}]}`

func TestTraceOfEachRequest(t *testing.T) {
	h, spans := tracedHarness(t, tracedCatalog)
	checkAnswered := func(t *testing.T, tr requestTrace, stream bool) {
		t.Helper()
		wantAttrs(t, tr.server, map[string]string{
			"gen_ai.operation.name": "chat", "gen_ai.request.model": "fast", "gen_ai.response.model": "gpt-4o-mini",
			"gen_ai.request.stream": fmt.Sprint(stream), "gen_ai.usage.input_tokens": "*", "gen_ai.usage.output_tokens": "*",
			"sluice.key_id": "web", "sluice.tenant": "web", "http.response.status_code": "200", "sluice.attempts": "1",
			"sluice.endpoint_id": "ep-a", "sluice.queue_wait": "*",
		})
		if got := attr(tr.server, "gen_ai.response.time_to_first_chunk"); stream != (got.Type() == attribute.FLOAT64 && got.AsFloat64() > 0) {
			t.Errorf("gen_ai.response.time_to_first_chunk = %s on a request with stream %v; want it on streams alone", got.String(), stream)
		}
		if tr.server.Name != "chat fast" || tr.server.SpanKind != trace.SpanKindServer {
			t.Errorf("request span %q kind %v, want \"chat fast\", server", tr.server.Name, tr.server.SpanKind)
		}
		if len(tr.attempts) != 1 {
			t.Fatalf("%d attempt spans, want 1", len(tr.attempts))
		}
		a := tr.attempts[0]
		if a.Name != "chat gpt-4o-mini" || a.SpanKind != trace.SpanKindClient || a.SpanContext.TraceID() != tr.server.SpanContext.TraceID() {
			t.Errorf("attempt span %q kind %v trace %s, want \"chat gpt-4o-mini\", client, the request's trace", a.Name, a.SpanKind, a.SpanContext.TraceID())
		}
		wantAttrs(t, a, map[string]string{
			"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini",
			"gen_ai.response.model": "gpt-4o-mini", "gen_ai.usage.input_tokens": "*", "gen_ai.usage.output_tokens": "*",
			"sluice.attempt": "1", "sluice.endpoint_id": "ep-a", "sluice.credential_id": "*", "sluice.account_id": "*",
			"server.address": "127.0.0.1", "server.port": "*", "http.response.status_code": "200", "sluice.queue_wait": "*",
		})
		for _, s := range []tracetest.SpanStub{tr.server, a} {
			if attr(s, "sluice.prompt").Type() != attribute.EMPTY || attr(s, "sluice.completion").Type() != attribute.EMPTY {
				t.Errorf("span %q of a key without trace_content records text", s.Name)
			}
		}
		if up := sentTraceparents(h.simA); len(up) == 0 || up[len(up)-1] != traceparentOf(a) {
			t.Errorf("the upstream got traceparent %q, want the attempt's %q", up, traceparentOf(a))
		}
	}

	t.Run("json", func(t *testing.T) {
		code, id := send(t, h, keyWeb, chatBody, nil)
		if code != 200 {
			t.Fatalf("chat = %d", code)
		}
		tr := traceOf(t, spans, id)
		checkAnswered(t, tr, false)
		if tr.server.Parent.IsValid() {
			t.Errorf("a request without traceparent has parent %s", tr.server.Parent.SpanID())
		}
	})
	t.Run("stream", func(t *testing.T) {
		code, id := send(t, h, keyWeb, streamChatBody, nil)
		if code != 200 {
			t.Fatalf("stream = %d", code)
		}
		checkAnswered(t, traceOf(t, spans, id), true)
	})
	t.Run("caller's traceparent", func(t *testing.T) {
		const callerTrace, callerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
		code, id := send(t, h, keyWeb, chatBody, map[string]string{"Traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"})
		if code != 200 {
			t.Fatalf("chat = %d", code)
		}
		tr := traceOf(t, spans, id)
		if got := tr.server.SpanContext.TraceID().String(); got != callerTrace {
			t.Errorf("request span in trace %s, want the caller's %s", got, callerTrace)
		}
		if got := tr.server.Parent; got.SpanID().String() != callerSpan || !got.IsRemote() {
			t.Errorf("request span's parent %s (remote %v), want the caller's span %s", got.SpanID(), got.IsRemote(), callerSpan)
		}
		checkAnswered(t, tr, false) // the upstream got the attempt's traceparent, not the caller's
	})
	t.Run("trace_content", func(t *testing.T) {
		for _, body := range []string{chatBody, streamChatBody} {
			code, id := send(t, h, keyTraced, body, nil)
			if code != 200 {
				t.Fatalf("chat = %d", code)
			}
			tr := traceOf(t, spans, id)
			if got := attr(tr.server, "sluice.prompt").AsString(); got != body {
				t.Errorf("sluice.prompt = %q, want the request's body", got)
			}
			completion := attr(tr.server, "sluice.completion").AsString()
			if !strings.Contains(completion, `"model":"gpt-4o-mini"`) || attr(tr.server, "sluice.completion.truncated").AsBool() {
				t.Errorf("sluice.completion = %q (truncated %v), want the whole answer", completion, attr(tr.server, "sluice.completion.truncated").AsBool())
			}
		}
	})
	t.Run("failover", func(t *testing.T) {
		h.simA.SetKey(secretA1, simulator.Behavior{FailStatus: 500})
		h.simA.SetKey(secretA2, simulator.Behavior{FailStatus: 500})
		before := len(sentTraceparents(h.simA, h.simB))
		code, id := send(t, h, keyWeb, chatBody, nil)
		if code != 200 {
			t.Fatalf("chat with ep-a failing = %d", code)
		}
		tr := traceOf(t, spans, id)
		n := len(tr.attempts)
		if n < 2 {
			t.Fatalf("%d attempt spans, want one per attempt (ep-a failed, ep-b answered)", n)
		}
		wantAttrs(t, tr.server, map[string]string{"sluice.attempts": fmt.Sprint(n), "sluice.endpoint_id": "ep-b", "http.response.status_code": "200"})
		var want []string
		for i, a := range tr.attempts {
			wantAttrs(t, a, map[string]string{"sluice.attempt": fmt.Sprint(i + 1)})
			want = append(want, traceparentOf(a))
			if i < n-1 {
				wantAttrs(t, a, map[string]string{"sluice.endpoint_id": "ep-a", "error.type": "endpoint", "http.response.status_code": "500"})
				if a.Status.Code != codes.Error {
					t.Errorf("failed attempt %d has status %v, want Error", i+1, a.Status)
				}
			}
		}
		wantAttrs(t, tr.attempts[n-1], map[string]string{"sluice.endpoint_id": "ep-b", "gen_ai.usage.output_tokens": "*"})
		sent := sentTraceparents(h.simA, h.simB)[before:]
		slices.Sort(sent)
		slices.Sort(want)
		if !slices.Equal(sent, want) {
			t.Errorf("upstreams got traceparents %v, want one per attempt span %v", sent, want)
		}
	})

	// No secret in any span: the upstream credentials', the callers' keys.
	for _, s := range spans.GetSpans() {
		noSecretIn(t, s)
	}
}

// noSecretIn fails when any attribute, the name or the status of s holds
// an upstream secret or a caller's key.
func noSecretIn(t *testing.T, s tracetest.SpanStub) {
	t.Helper()
	text := s.Name + " " + s.Status.Description
	for _, kv := range s.Attributes {
		text += " " + string(kv.Key) + "=" + kv.Value.String()
	}
	for _, secret := range []string{secretA1, secretA2, secretB1, keyWeb, keyTraced, "Bearer"} {
		if strings.Contains(text, secret) {
			t.Errorf("span %q holds a secret (%.12s…)", s.Name, secret)
		}
	}
}

// collector is an OTLP/HTTP receiver of traces: it decodes each export
// (ExportTraceServiceRequest, protobuf) and keeps its spans. With hang
// set, every export waits until the test ends, as a collector that stopped
// answering does.
type collector struct {
	srv  *httptest.Server
	hang chan struct{} // nil: answer at once

	mu      sync.Mutex
	spans   []*tracepb.Span
	service []string // service.name of each span's resource
	auth    []string // Authorization of each export
	entered int      // exports received, answered or not
}

func newCollector(t *testing.T, hang bool) *collector {
	c := &collector{}
	if hang {
		c.hang = make(chan struct{})
	}
	c.srv = httptest.NewServer(http.HandlerFunc(c.export))
	t.Cleanup(c.srv.Close)
	if hang {
		t.Cleanup(func() { close(c.hang) }) // before the server's Close, which waits for the exports
	}
	return c
}

func (c *collector) export(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	c.mu.Lock()
	c.entered++
	c.auth = append(c.auth, r.Header.Get("Authorization"))
	for _, rs := range req.ResourceSpans {
		name := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				name = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				c.spans = append(c.spans, s)
				c.service = append(c.service, name)
			}
		}
	}
	c.mu.Unlock()
	if c.hang != nil {
		<-c.hang
		return
	}
	if err != nil || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("path %s, content type %s: %v", r.URL.Path, r.Header.Get("Content-Type"), err), http.StatusBadRequest)
		return
	}
	out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (c *collector) received() (spans []*tracepb.Span, service, auth []string, entered int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans), slices.Clone(c.service), slices.Clone(c.auth), c.entered
}

// collectedHarness is a gateway on catalogTemplate exporting its traces to
// c over OTLP/HTTP, with an Authorization header from $OTLP_AUTH.
func collectedHarness(t *testing.T, c *collector) *harness {
	t.Helper()
	template := catalogTemplate[:strings.Index(catalogTemplate, "endpoints:")] +
		"telemetry:\n  otlp: {endpoint: " + c.srv.URL + ", headers_env: {Authorization: OTLP_AUTH}}\n" +
		catalogTemplate[strings.Index(catalogTemplate, "endpoints:"):]
	return newHarnessOn(t, template, "{backend: memory}", simulator.Options{}, simulator.Options{}, func(o *app.Options) {
		o.LookupEnv = func(k string) (string, bool) {
			if k == "OTLP_AUTH" {
				return "Bearer otlp-token-for-tests", true
			}
			v, ok := testEnv[k]
			return v, ok
		}
	})
}

// TestTracesReachAnOTLPCollector sends a request's spans to a collector
// over OTLP/HTTP: the gateway's Close sends what its batch still holds.
func TestTracesReachAnOTLPCollector(t *testing.T) {
	c := newCollector(t, false)
	h := collectedHarness(t, c)
	if code, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != 200 {
		t.Fatalf("chat = %d %s", code, body)
	}
	if spans, _, _, _ := c.received(); len(spans) != 0 {
		t.Fatalf("%d spans exported before the batch's timeout; the test would not show the flush at Close", len(spans))
	}
	if err := h.gw.Close(); err != nil {
		t.Fatal(err)
	}
	spans, service, auth, _ := c.received()
	if len(auth) == 0 || auth[0] != "Bearer otlp-token-for-tests" {
		t.Errorf("exports' Authorization %q, want $OTLP_AUTH's value", auth)
	}
	var server, client *tracepb.Span
	for i, s := range spans {
		if service[i] != "sluice" {
			t.Errorf("span %q of service %q, want sluice", s.Name, service[i])
		}
		switch s.Kind {
		case tracepb.Span_SPAN_KIND_SERVER:
			server = s
		case tracepb.Span_SPAN_KIND_CLIENT:
			client = s
		}
	}
	if server == nil || client == nil {
		t.Fatalf("collector got %d spans, want the request's and its attempt's", len(spans))
	}
	if server.Name != "chat fast" || string(client.ParentSpanId) != string(server.SpanId) || string(client.TraceId) != string(server.TraceId) {
		t.Errorf("spans %q and %q: want the attempt a child of \"chat fast\"", server.Name, client.Name)
	}
	want := map[*tracepb.Span]map[string]string{
		server: {"gen_ai.request.model": "fast", "gen_ai.operation.name": "chat", "sluice.key_id": "web", "sluice.tenant": "web"},
		client: {"gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai", "sluice.endpoint_id": "ep-a"},
	}
	for s, attrs := range want {
		got := map[string]string{}
		for _, kv := range s.Attributes {
			got[kv.Key] = kv.GetValue().GetStringValue()
		}
		for k, v := range attrs {
			if got[k] != v {
				t.Errorf("span %q: %s = %q, want %q", s.Name, k, got[k], v)
			}
		}
		if _, ok := got["gen_ai.usage.output_tokens"]; !ok {
			t.Errorf("span %q has no gen_ai.usage.output_tokens", s.Name)
		}
	}
}

// TestHangingCollectorNeverHoldsRequests: requests are answered while an
// export hangs, and the gateway's Close does not wait for it forever.
func TestHangingCollectorNeverHoldsRequests(t *testing.T) {
	c := newCollector(t, true)
	h := collectedHarness(t, c)
	chat := func(n int) {
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range n / 8 {
					if code, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != 200 {
						t.Errorf("chat = %d %s", code, body)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	// 600 spans: a full batch (512) is exported at once, and hangs.
	chat(304)
	eventually(t, 10*time.Second, "an export in flight", func() bool { _, _, _, n := c.received(); return n > 0 })
	chat(200) // answered, each of them, while the export hangs
	if _, _, _, n := c.received(); n != 1 {
		t.Errorf("%d exports received; want the one still hanging", n)
	}
	if err := h.gw.Close(); err != nil {
		t.Errorf("Close with a hanging collector: %v", err)
	}
	if !strings.Contains(h.logs.String(), "spans not sent at shutdown") {
		t.Error("the spans a hanging collector did not take were not logged at shutdown")
	}
}

// TestNoOAuthTokenInSpans: an oauth credential's access and refresh
// tokens and its static headers' values reach no span, nor does the
// caller's key.
func TestNoOAuthTokenInSpans(t *testing.T) {
	spans := tracetest.NewInMemoryExporter()
	g := startOAuthGateway(t, func(sim *simulator.Simulator) string { return sim.NewRefreshToken(simulator.Behavior{}, time.Hour) },
		func(o *app.Options) { o.Spans = sdktrace.NewSimpleSpanProcessor(spans) })
	eventually(t, 5*time.Second, "chat served by cred-oauth", func() bool {
		if code, _, body := g.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != 200 {
			t.Fatalf("chat = %d %s", code, body)
		}
		return len(g.sim.Requests()) > 0
	})
	token, _ := strings.CutPrefix(last(t, g.sim, "/v1/chat/completions").Header.Get("Authorization"), "Bearer ")
	if !strings.HasPrefix(token, "sim-oat-") {
		t.Fatalf("the upstream got Authorization %q, want the oauth access token", token)
	}
	eventually(t, 5*time.Second, "the attempt on cred-oauth traced", func() bool {
		for _, s := range spans.GetSpans() {
			if attr(s, "sluice.credential_id").AsString() == "cred-oauth" {
				return true
			}
		}
		return false
	})
	secret := regexp.MustCompile(`sim-o(a|r)t-[0-9a-f]+|[a-z]+-HEADER-[0-9a-f]{4}|` + regexp.QuoteMeta(keyWeb))
	for _, s := range spans.GetSpans() {
		text := s.Name + " " + s.Status.Description
		for _, kv := range s.Attributes {
			text += " " + kv.Value.String()
		}
		if found := secret.FindString(text); found != "" {
			t.Errorf("span %q holds a secret: %.12s…", s.Name, found)
		}
	}
}

// TestTelemetryChangeTakesARestart: a reload that changes the telemetry
// section serves, and says the change waits for a restart.
func TestTelemetryChangeTakesARestart(t *testing.T) {
	h, _ := tracedHarness(t, catalogTemplate)
	const warning = "the catalog's telemetry section changed"
	h.writeCatalog(h.catalog() + "# the telemetry section unchanged\n")
	eventually(t, 5*time.Second, "the first reload", func() bool { return strings.Contains(h.logs.String(), `"catalog loaded"`) })
	if strings.Contains(h.logs.String(), warning) {
		t.Error("a reload that left the telemetry section as it was warned of a change")
	}
	h.writeCatalog(h.catalog() + "telemetry: {otlp: {endpoint: \"http://127.0.0.1:4318\"}, sample: 0.5}\n")
	eventually(t, 5*time.Second, "the warning", func() bool { return strings.Contains(h.logs.String(), warning) })
	if code, _, body := h.post(t.Context(), "/v1/chat/completions", keyWeb, chatBody); code != 200 {
		t.Fatalf("chat after the reload = %d %s", code, body)
	}
}

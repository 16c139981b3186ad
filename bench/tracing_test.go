package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicehq/sluice/internal/simulator"
)

// spanSink is an OTLP/HTTP receiver that takes every export and reads no
// further than its body: the traced gateway's export costs are its own,
// and the sink adds next to nothing to the process's CPU.
type spanSink struct {
	srv     *httptest.Server
	exports atomic.Int64
	bytes   atomic.Int64
}

func newSpanSink(tb testing.TB) *spanSink {
	s := &spanSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		s.exports.Add(1)
		s.bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	tb.Cleanup(s.srv.Close)
	return s
}

// tracedCatalog is catalogTemplate with every request traced (sample 1)
// to sink over OTLP/HTTP, batched as in production.
func tracedCatalog(sink *spanSink) string {
	return strings.Replace(catalogTemplate, "\nendpoints:\n",
		"\ntelemetry: {otlp: {endpoint: \""+sink.srv.URL+"\"}, sample: 1}\nendpoints:\n", 1)
}

// TestTracedRigExports checks that the traced benchmark's gateway really
// traces: its spans reach the sink (at the latest when it closes).
func TestTracedRigExports(t *testing.T) {
	sink := newSpanSink(t)
	r := newRigOf(t, "sluice-traced", tracedCatalog(sink))
	for _, body := range []string{chatBody, fmt.Sprintf(streamBody, streamWords)} {
		if err := r.post(r.url("sluice"), body); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.gw.Close(); err != nil {
		t.Fatal(err)
	}
	if sink.exports.Load() == 0 || sink.bytes.Load() == 0 {
		t.Errorf("the sink got %d exports, %d bytes; want the requests' spans", sink.exports.Load(), sink.bytes.Load())
	}
}

// BenchmarkTracing measures the default chat request (whole answer and
// stream) with tracing off (the plain catalog) and on with every request
// traced and exported over OTLP/HTTP to a local sink, both gateways running
// for the whole benchmark (as BenchmarkFeatureOff: each iteration measures
// both in turn, b.N requests each). Per request it reports each side's own
// CPU (off-cpu-ns/op, on-cpu-ns/op: getrusage, less the upstream alone's)
// and x-off, their ratio; and each side's allocations (off-allocs/op,
// on-allocs/op: measured one request at a time, see proxyAllocs) and
// extra-allocs/op. The CPU figures need a quiet machine; the allocation
// counts do not.
//
//	go test -run '^$' -bench Tracing -benchtime 2000x -count 5 ./bench/
func BenchmarkTracing(b *testing.B) {
	off := newRig(b)
	on := newRigOf(b, "sluice-traced", tracedCatalog(newSpanSink(b)))
	for _, m := range []struct {
		name, body string
		callers    int
		behavior   simulator.Behavior
	}{
		{"json", chatBody, 64, simulator.Behavior{}},
		{"stream", fmt.Sprintf(streamBody, streamWords), streamCallers, simulator.Behavior{ChunkDelay: streamGap}},
	} {
		offAllocs, onAllocs := off.proxyAllocs(b, "sluice", m.body).total(), on.proxyAllocs(b, "sluice", m.body).total()
		b.Run(m.name, func(b *testing.B) {
			off.setBehavior(m.behavior)
			on.setBehavior(m.behavior)
			b.StopTimer()
			direct := usePerOp(b, off, off.url("direct"), m.body, m.callers)
			untraced := usePerOp(b, off, off.url("sluice"), m.body, m.callers).less(direct)
			traced := usePerOp(b, on, on.url("sluice"), m.body, m.callers).less(direct)
			b.ReportMetric(untraced.cpu, "off-cpu-ns/op")
			b.ReportMetric(traced.cpu, "on-cpu-ns/op")
			b.ReportMetric(traced.cpu/untraced.cpu, "x-off")
			b.ReportMetric(offAllocs, "off-allocs/op")
			b.ReportMetric(onAllocs, "on-allocs/op")
			b.ReportMetric(onAllocs-offAllocs, "extra-allocs/op")
		})
	}
}

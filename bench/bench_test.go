package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/app"
	"github.com/sluicehq/sluice/internal/simulator"
)

// The upstream secret and the virtual key of the benchmark catalog.
const (
	upstreamSecret = "sk-bench-upstream-SECRET-4c1d8e2a9f"
	benchKey       = "sk-sluice-bench-KEY-0b7e3f9a2c5d8e1f4a6c"
)

// catalogTemplate routes the alias "bench" to one simulated endpoint through
// one credential, the same catalog run.sh generates, and the aliases
// "bench-claude" (Anthropic Messages) and "bench-responses" (OpenAI
// Responses) to the same simulator speaking those protocols.
const catalogTemplate = `version: 1
server:
  listen: 127.0.0.1:0
  admin_listen: 127.0.0.1:0
  admin_token_env: BENCH_ADMIN_TOKEN
database: {url: "sqlite://%[1]s"}
endpoints:
  - id: sim
    base_url: %[2]s
    protocols: [openai.chat, openai.responses]
  - id: sim-claude
    base_url: %[2]s
    protocols: [anthropic.messages]
credentials:
  - {id: sim-1, secret_env: BENCH_UPSTREAM_SECRET, endpoints: [sim, sim-claude], max_inflight: 1000000}  # uncapped: the bench measures the gateway
models:
  - alias: bench
    deployments:
      - {model: gpt-4o-mini, endpoints: [sim]}
  - alias: bench-claude
    protocol: anthropic.messages
    deployments:
      - {model: claude-sonnet-4-6, endpoints: [sim-claude]}
  - alias: bench-responses
    protocol: openai.responses
    deployments:
      - {model: gpt-4o-mini, endpoints: [sim]}
keys:
  - {id: bench, tenant: bench, secret_env: BENCH_KEY}
`

var benchEnv = map[string]string{
	"BENCH_UPSTREAM_SECRET": upstreamSecret,
	"BENCH_KEY":             benchKey,
	"BENCH_ADMIN_TOKEN":     "bench-admin-token",
	// The keys of other tenants, in the catalogs of featuresOff.
	"BENCH_OTHER_KEY_1": "sk-sluice-bench-OTHER-1-5d2a9c7e1b4f",
	"BENCH_OTHER_KEY_2": "sk-sluice-bench-OTHER-2-8e3b0d6a2c5f",
	"BENCH_OTHER_KEY_3": "sk-sluice-bench-OTHER-3-1f4c7a9e3d6b",
}

// chatBody is a realistic small chat request: a system prompt, a short
// exchange and a question; the answer is 100 words (about 900 bytes).
const chatBody = `{"model":"bench","max_tokens":100,"temperature":0.2,"messages":[` +
	`{"role":"system","content":"You are a concise assistant for a travel agency. Answer in plain prose, without lists, and mention prices only when asked."},` +
	`{"role":"user","content":"We are two adults with a dog, arriving by train on Friday evening."},` +
	`{"role":"assistant","content":"Noted: two adults and a dog, arriving Friday evening by train. What kind of weekend would you like?"},` +
	`{"role":"user","content":"Suggest a quiet weekend itinerary near a river, with one museum, one long walk and a dog-friendly restaurant."}]}`

// streamBody asks for a short stream with usage, as SDKs commonly do.
const streamBody = `{"model":"bench","stream":true,"stream_options":{"include_usage":true},"max_tokens":%d,"messages":[` +
	`{"role":"system","content":"You are a concise assistant for a travel agency."},` +
	`{"role":"user","content":"Suggest a quiet weekend itinerary near a river."}]}`

// proxies are the hops under comparison; "direct" (no proxy) is the
// reference the others are measured against.
var proxies = []string{"bare", "sluice"}

// rig is a simulated upstream with the bare hop and Sluice in front of it,
// all in this process over real loopback HTTP.
type rig struct {
	sim      *simulator.Simulator
	upstream *httptest.Server
	bare     *httptest.Server
	gw       *app.Gateway
	client   *http.Client
}

func newRig(tb testing.TB) *rig { return newRigOf(tb, "sluice", catalogTemplate) }

// newRigOf is newRig with Sluice serving catalog, a template of
// catalogTemplate's layout (%[1]s the database file, %[2]s the upstream),
// its goroutines labeled side=label for profiles.
func newRigOf(tb testing.TB, label, catalog string) *rig {
	tb.Helper()
	r := &rig{sim: simulator.New(simulator.Options{MaxRecords: -1})}
	labeled("upstream", func(context.Context) { r.upstream = httptest.NewServer(r.sim) })
	tb.Cleanup(r.upstream.Close)
	tb.Cleanup(r.sim.Close) // before the server's Close: it releases stalled streams
	target, err := url.Parse(r.upstream.URL)
	if err != nil {
		tb.Fatal(err)
	}
	labeled("bare", func(context.Context) { r.bare = httptest.NewServer(NewHop(target)) })
	tb.Cleanup(r.bare.Close)

	dir := tb.TempDir()
	cfg := filepath.Join(dir, "catalog.yaml")
	doc := fmt.Sprintf(catalog, filepath.Join(dir, "sluice.db"), r.upstream.URL)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		tb.Fatal(err)
	}
	labeled(label, func(ctx context.Context) {
		r.gw, err = app.Start(ctx, app.Options{
			ConfigPath: cfg,
			Log:        slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})),
			LookupEnv:  func(k string) (string, bool) { v, ok := benchEnv[k]; return v, ok },
		})
	})
	if err != nil {
		tb.Fatalf("app.Start: %v", err)
	}
	tb.Cleanup(func() {
		if err := r.gw.Close(); err != nil {
			tb.Errorf("gateway Close: %v", err)
		}
	})
	tr := &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 256, DisableCompression: true}
	r.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	tb.Cleanup(tr.CloseIdleConnections)
	return r
}

// labeled runs start with the profiler label side=name. Goroutines inherit
// the labels of the goroutine that starts them, so every goroutine a server
// started in start runs (accept loop, connections, handlers, the
// transports' connection loops, Sluice's background work) carries the label,
// and a CPU profile of the benchmarks can be cut down to one side:
//
//	go test -run='^$' -bench=Chat/sluice -cpuprofile cpu.out ./bench/
//	go tool pprof -tagfocus=side=sluice -top bench.test cpu.out
func labeled(name string, start func(ctx context.Context)) {
	pprof.Do(context.Background(), pprof.Labels("side", name), start)
}

// setBehavior makes the upstream treat requests of both paths as b: the bare
// hop forwards the caller's key, Sluice sends its credential's secret.
func (r *rig) setBehavior(b simulator.Behavior) {
	r.sim.SetKey(benchKey, b)
	r.sim.SetKey(upstreamSecret, b)
}

// url is the chat completions URL through proxy ("direct": the upstream).
func (r *rig) url(proxy string) string { return r.urlOf(proxy, "/v1/chat/completions") }

// urlOf is the URL of path through proxy.
func (r *rig) urlOf(proxy, path string) string {
	base := map[string]string{"direct": r.upstream.URL, "bare": r.bare.URL, "sluice": "http://" + r.gw.Addr()}[proxy]
	return base + path
}

func (r *rig) request(ctx context.Context, url, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+benchKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01") // required on /v1/messages, ignored elsewhere
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("POST %s: status %d: %s", url, resp.StatusCode, b)
	}
	return resp, nil
}

// post sends a chat request and reads the whole answer.
func (r *rig) post(url, body string) error {
	resp, err := r.request(context.Background(), url, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return err
}

// BenchmarkChat sends non-streaming chat completions from about 64
// concurrent callers through each proxy. allocs/op and B/op count the
// caller, the proxy and the upstream together; proxy-allocs/op and
// proxy-B/op are the proxy's own (see proxyAllocs).
func BenchmarkChat(b *testing.B) {
	r := newRig(b)
	for _, p := range append([]string{"direct"}, proxies...) {
		b.Run(p, func(b *testing.B) {
			url := r.url(p)
			var allocs allocsPerRequest
			if p != "direct" {
				allocs = r.proxyAllocs(b, p, chatBody)
			}
			b.ReportAllocs()
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0))) // ~64 goroutines
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("side", "client")))
				for pb.Next() {
					if err := r.post(url, chatBody); err != nil {
						b.Error(err)
						return
					}
				}
			})
			if p != "direct" { // after the run: ResetTimer deletes reported metrics
				b.ReportMetric(allocs.total(), "proxy-allocs/op")
				b.ReportMetric(allocs.bytes, "proxy-B/op")
			}
		})
	}
}

// BenchmarkStreamTTFB opens streams one at a time through each proxy and
// reports the median time until the first event arrived (ttfb-ns) and the
// 99th percentile (ttfb-p99-ns); ns/op is the whole stream (max_tokens 8,
// no delay between events).
func BenchmarkStreamTTFB(b *testing.B) {
	r := newRig(b)
	body := fmt.Sprintf(streamBody, 8)
	for _, p := range append([]string{"direct"}, proxies...) {
		b.Run(p, func(b *testing.B) {
			url := r.url(p)
			buf := make([]byte, 32<<10)
			var ttfbs []time.Duration
			b.ReportAllocs()
			for b.Loop() {
				start := time.Now()
				resp, err := r.request(context.Background(), url, body)
				if err != nil {
					b.Fatal(err)
				}
				events, err := ReadEvents(resp.Body, buf)
				resp.Body.Close()
				if err != nil || len(events) == 0 {
					b.Fatalf("stream: %d events, %v", len(events), err)
				}
				ttfbs = append(ttfbs, events[0].At.Sub(start))
			}
			slices.Sort(ttfbs)
			b.ReportMetric(float64(ttfbs[len(ttfbs)/2].Nanoseconds()), "ttfb-ns")
			b.ReportMetric(float64(ttfbs[len(ttfbs)*99/100].Nanoseconds()), "ttfb-p99-ns")
		})
	}
}

// TestDisconnectStopsUpstream checks that a caller who leaves mid-stream
// stops the upstream request: the upstream stalls after its first content
// event, the caller reads one event and goes away, and the simulator must
// see its client (the proxy) leave; Sluice within 100ms.
func TestDisconnectStopsUpstream(t *testing.T) {
	r := newRig(t)
	r.setBehavior(simulator.Behavior{StallAfter: 1})
	for _, p := range proxies {
		t.Run(p, func(t *testing.T) {
			before := r.sim.Cancelled()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			resp, err := r.request(ctx, r.url(p), fmt.Sprintf(streamBody, 8))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
				t.Fatalf("first event: %v", err)
			}
			cancel()
			start := time.Now()
			for r.sim.Cancelled() == before {
				if time.Since(start) > 2*time.Second {
					t.Fatalf("upstream request still running 2s after the caller left")
				}
				time.Sleep(time.Millisecond)
			}
			d := time.Since(start)
			t.Logf("upstream saw the caller leave after %v", d)
			if p == "sluice" && d > 100*time.Millisecond {
				t.Errorf("upstream cancelled %v after the caller left, want within 100ms", d)
			}
		})
	}
}

// TestStreamEventsPassedOnAsTheyArrive checks that each upstream event
// reaches the caller on its own: the upstream spaces its events by 20ms, so
// two events completed by one read, or closer than 5ms, were merged or held
// back by the proxy.
func TestStreamEventsPassedOnAsTheyArrive(t *testing.T) {
	r := newRig(t)
	const delay = 20 * time.Millisecond
	r.setBehavior(simulator.Behavior{ChunkDelay: delay})
	const tokens = 4
	for _, p := range proxies {
		t.Run(p, func(t *testing.T) {
			resp, err := r.request(t.Context(), r.url(p), fmt.Sprintf(streamBody, tokens))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			events, err := ReadEvents(resp.Body, nil)
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			// role, the words, finish, usage, [DONE]
			if got, want := len(events), tokens+4; got != want {
				t.Errorf("events = %d, want %d", got, want)
			}
			if n := len(events); n > 0 && !bytes.Equal(events[n-1].Data, []byte("[DONE]")) {
				t.Errorf("last event = %q, want [DONE]", events[n-1].Data)
			}
			if m := Merged(events, delay/4); m != 0 {
				t.Errorf("merged events = %d, want 0 (arrivals %v)", m, gaps(events))
			}
		})
	}
}

// gaps lists the spacing of events, for failure messages.
func gaps(events []Arrival) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(events); i++ {
		out = append(out, events[i].At.Sub(events[i-1].At).Round(100*time.Microsecond))
	}
	return out
}

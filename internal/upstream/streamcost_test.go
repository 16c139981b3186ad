package upstream

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/simulator"
	"github.com/sluicehq/sluice/internal/sse"
)

// benchStreams are the streams of bench.BenchmarkPassthroughCPU, one per
// protocol Sluice passes through (and Gemini's): the same 16-word answer,
// framed as each protocol frames it.
var benchStreams = []struct {
	name, path, body string
	dialect          *Dialect
}{
	{"chat", "/v1/chat/completions", `{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":16,` +
		`"messages":[{"role":"user","content":"Suggest a quiet weekend itinerary near a river."}]}`, OpenAIChat},
	{"messages", "/v1/messages", `{"model":"m","stream":true,"max_tokens":16,` +
		`"messages":[{"role":"user","content":"Suggest a quiet weekend itinerary near a river."}]}`, AnthropicMessages},
	{"responses", "/v1/responses", `{"model":"m","store":false,"stream":true,"max_output_tokens":16,` +
		`"input":[{"role":"user","content":"Suggest a quiet weekend itinerary near a river."}]}`, OpenAIResponses},
	{"gemini", "/v1beta/models/m:streamGenerateContent?alt=sse", `{"generationConfig":{"maxOutputTokens":16},` +
		`"contents":[{"role":"user","parts":[{"text":"Suggest a quiet weekend itinerary near a river."}]}]}`, GeminiGenerate},
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// simulatorStream is the whole body of the simulator's stream answering
// body at path, with the key's behaviour.
func simulatorStream(tb testing.TB, sim *simulator.Simulator, url, path, key, body string) []byte {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Goog-Api-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("POST %s %s = %d %s (%v), want a stream", path, body, resp.StatusCode, raw, err)
	}
	return raw
}

// BenchmarkPassthroughEvents is what Sluice does in memory with each event
// of a passed-through stream (everything but the reads and writes): find
// its end, read its fields, the dialect's Event, the secret's mask, and for
// Responses the stored id of the first event. One op is one whole stream.
// The figures are CPU time (getrusage: other processes on a shared machine
// do not count, as they do in ns/op): cpu-ns/op per stream, and per event
// and per KB, which make protocols whose streams differ in size
// comparable.
//
//	go test -run '^$' -bench PassthroughEvents -count 5 ./internal/upstream/
func BenchmarkPassthroughEvents(b *testing.B) {
	sim := simulator.New(simulator.Options{MaxRecords: -1})
	srv := httptest.NewServer(sim)
	defer srv.Close()
	defer sim.Close()
	const secret = "sk-upstream-a-secret-longer-than-32-bytes-0123456789"
	for _, s := range benchStreams {
		raw := simulatorStream(b, sim, srv.URL, s.path, "k", s.body)
		b.Run(s.name, func(b *testing.B) {
			req := &sluice.Request{IncludeUsage: true}
			stream := bytes.NewReader(raw)
			events := 0
			b.ReportAllocs()
			start := processCPU()
			for b.Loop() {
				stream.Reset(raw)
				rd := sse.NewReader(stream)
				var u sluice.Usage
				first := true
				events = 0
				for {
					ev, err := rd.Next()
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					var done bool
					if u, _, done, err = s.dialect.Event(ev, req, u); err != nil {
						b.Fatal(err)
					}
					if first && s.dialect.Stores {
						_ = createdID(ev.Data)
					}
					first = false
					maskSecret(ev.Raw, secret)
					events++
					if done {
						break
					}
				}
				if !u.Measured {
					b.Fatal("no usage")
				}
			}
			perStream := float64(processCPU()-start) / float64(b.N)
			b.ReportMetric(float64(events), "events")
			b.ReportMetric(float64(len(raw)), "bytes")
			b.ReportMetric(perStream, "cpu-ns/op")
			b.ReportMetric(perStream/float64(events), "cpu-ns/event")
			b.ReportMetric(perStream/(float64(len(raw))/1024), "cpu-ns/KB")
		})
	}
}

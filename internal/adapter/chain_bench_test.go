package adapter_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
	"github.com/sluicehq/sluice/internal/adapter/anthropic"
	"github.com/sluicehq/sluice/internal/adapter/gemini"
	"github.com/sluicehq/sluice/internal/adapter/openai"
	"github.com/sluicehq/sluice/internal/adapter/responses"
)

// Upstream streams (thinking or reasoning, text, tool calls, usage) and
// streamed caller requests, one per protocol, for the benchmarks.
var (
	upstreamStreams = map[sluice.Protocol]string{
		sluice.ProtocolGemini:          geminiUpstream + "/stream.sse",
		sluice.ProtocolAnthropic:       anthropicUpstream + "/stream.sse",
		sluice.ProtocolOpenAIResponses: responsesUpstream + "/stream.sse",
	}
	callerRequests = map[sluice.Protocol]string{
		sluice.ProtocolAnthropic:       `{"model":"m","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		sluice.ProtocolOpenAIResponses: `{"model":"m","stream":true,"input":"hi"}`,
		sluice.ProtocolGemini:          `{"contents":[{"parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`,
	}
)

// BenchmarkChainEvent measures the translation of one streamed upstream
// event by each chained pair, averaged over a whole stream: both halves,
// and the hub events between them. The request that sets each half up is
// not timed.
func BenchmarkChainEvent(b *testing.B) {
	pairs := []struct {
		name          string
		caller, up    sluice.Protocol
		newIn, newOut func() adapter.Translator
	}{
		{"anthropic_on_responses", sluice.ProtocolAnthropic, sluice.ProtocolOpenAIResponses, anthropicIn, responsesOut},
		{"responses_on_anthropic", sluice.ProtocolOpenAIResponses, sluice.ProtocolAnthropic, responsesIn, anthropicOut},
		{"anthropic_on_gemini", sluice.ProtocolAnthropic, sluice.ProtocolGemini, anthropicIn, geminiOut},
		{"gemini_on_anthropic", sluice.ProtocolGemini, sluice.ProtocolAnthropic, geminiIn, anthropicOut},
		{"responses_on_gemini", sluice.ProtocolOpenAIResponses, sluice.ProtocolGemini, responsesIn, geminiOut},
		{"gemini_on_responses", sluice.ProtocolGemini, sluice.ProtocolOpenAIResponses, geminiIn, responsesOut},
	}
	for _, p := range pairs {
		b.Run(p.name, func(b *testing.B) {
			stream, err := os.ReadFile(filepath.Join(golden, upstreamStreams[p.up]))
			if err != nil {
				b.Fatal(err)
			}
			evs := adaptertest.Parse(stream)
			req := &sluice.Request{Body: []byte(callerRequests[p.caller]), Stream: true}
			emit := func(adapter.Event) error { return nil }
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				tr := adapter.NewChain(p.newIn(), p.newOut())
				if _, err := tr.Request(req, "m"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for _, ev := range evs {
					if err := tr.Event(ev, emit); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(evs)), "ns/event")
			b.ReportMetric(float64(len(evs)), "events")
		})
	}
}

func anthropicIn() adapter.Translator  { return openai.NewFromAnthropic() }
func responsesIn() adapter.Translator  { return openai.NewFromResponses() }
func geminiIn() adapter.Translator     { return openai.NewFromGemini() }
func anthropicOut() adapter.Translator { return anthropic.NewFromOpenAI() }
func responsesOut() adapter.Translator { return responses.NewFromOpenAI() }
func geminiOut() adapter.Translator    { return gemini.NewFromOpenAI() }

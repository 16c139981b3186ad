package openai

import (
	"testing"

	"github.com/sluicehq/sluice/internal/adapter"
)

// BenchmarkFromResponsesEvent is the cost of one streamed event, a text
// delta in the middle of an answer: decode the chat chunk, encode the
// Responses output_text.delta.
func BenchmarkFromResponsesEvent(b *testing.B) {
	tr := NewFromResponses()
	emit := func(adapter.Event) error { return nil }
	first := adapter.Event{Data: []byte(`{"id":"chatcmpl-9y","object":"chat.completion.chunk","created":1767225600,"model":"gpt-5.4-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Let"},"finish_reason":null}]}`)}
	if err := tr.Event(first, emit); err != nil {
		b.Fatal(err)
	}
	delta := adapter.Event{Data: []byte(`{"id":"chatcmpl-9y","object":"chat.completion.chunk","created":1767225600,"model":"gpt-5.4-mini","choices":[{"index":0,"delta":{"content":" me check"},"finish_reason":null}]}`)}
	b.ReportAllocs()
	for b.Loop() {
		if err := tr.Event(delta, emit); err != nil {
			b.Fatal(err)
		}
	}
}

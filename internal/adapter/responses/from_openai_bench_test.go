package responses

import (
	"testing"

	"github.com/sluicehq/sluice/internal/adapter"
)

// BenchmarkFromOpenAIEvent is the cost of one streamed event, a text delta
// in the middle of an answer: decode the Responses output_text.delta,
// encode the chat chunk.
func BenchmarkFromOpenAIEvent(b *testing.B) {
	tr := NewFromOpenAI()
	emit := func(adapter.Event) error { return nil }
	created := adapter.Event{Name: "response.created", Data: []byte(`{"type":"response.created","sequence_number":0,"response":{"id":"resp_9y","object":"response","created_at":1767225600,"status":"in_progress","model":"gpt-5.4-mini","output":[]}}`)}
	if err := tr.Event(created, emit); err != nil {
		b.Fatal(err)
	}
	delta := adapter.Event{Name: "response.output_text.delta", Data: []byte(`{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_9y","output_index":0,"content_index":0,"delta":" me check","logprobs":[]}`)}
	b.ReportAllocs()
	for b.Loop() {
		if err := tr.Event(delta, emit); err != nil {
			b.Fatal(err)
		}
	}
}

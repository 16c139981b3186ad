package anthropic

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/sse"
)

func TestEvent(t *testing.T) {
	start := sluice.Usage{PromptTokens: 117, CompletionTokens: 1, CachedTokens: 100, CacheWriteTokens: 5, TotalTokens: 118, Measured: true}
	tests := []struct {
		name    string
		give    string
		from    sluice.Usage
		want    sluice.Usage
		done    bool
		wantErr error
	}{
		{name: "message_start", give: `{"type":"message_start","message":{"id":"m","usage":{"input_tokens":12,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":1}}}`,
			want: start},
		{name: "message_delta keeps the prompt", give: `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":95}}`, from: start,
			want: sluice.Usage{PromptTokens: 117, CompletionTokens: 95, CachedTokens: 100, CacheWriteTokens: 5, TotalTokens: 212, Measured: true}},
		{name: "message_delta replaces the prompt", give: `{"type":"message_delta","usage":{"input_tokens":20,"output_tokens":3}}`, from: start,
			want: sluice.Usage{PromptTokens: 20, CompletionTokens: 3, TotalTokens: 23, Measured: true}},
		{name: "text delta", give: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"usage"}}`, from: start, want: start},
		{name: "unknown event", give: `{"type":"something_new"}`, from: start, want: start},
		{name: "message_stop", give: `{"type":"message_stop"}`, from: start, want: start, done: true},
		{name: "error", give: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, wantErr: protocol.ErrUpstreamErrorEvent},
		{name: "not JSON", give: `Overloaded`, wantErr: protocol.ErrMalformedEvent},
		{name: "usage not an object", give: `{"type":"message_delta","usage":7}`, from: start, want: start},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, drop, done, err := Event(sse.Event{Data: []byte(tt.give)}, &sluice.Request{}, tt.from)
			if err != tt.wantErr || tt.wantErr == nil && (got != tt.want || drop || done != tt.done) {
				t.Errorf("Event(%s) = %+v, drop %v, done %v, %v; want %+v, done %v, %v", tt.give, got, drop, done, err, tt.want, tt.done, tt.wantErr)
			}
		})
	}
}

// FuzzEvent checks that reading any event never panics.
func FuzzEvent(f *testing.F) {
	for _, s := range []string{`{"type":"message_start","message":{"usage":{"input_tokens":1}}}`, `{"type":"message_delta","usage":{"output_tokens":95}}`,
		`{"type":"message_delta","usage":{"input_tokens":1e2}}`, `{}`, `[]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, give string) {
		_, _, _, _ = Event(sse.Event{Data: []byte(give)}, &sluice.Request{}, sluice.Usage{})
	})
}

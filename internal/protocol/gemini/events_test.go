package gemini

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/protocol"
	"github.com/sluicehq/sluice/internal/sse"
)

func TestEvent(t *testing.T) {
	last := sluice.Usage{PromptTokens: 2100, CompletionTokens: 160, CachedTokens: 1800, ReasoningTokens: 120, TotalTokens: 2260, Measured: true}
	tests := []struct {
		name    string
		give    string
		from    sluice.Usage
		want    sluice.Usage
		done    bool
		wantErr error
	}{
		{name: "text chunk", give: `{"candidates":[{"content":{"role":"model","parts":[{"text":"It's "}]},"index":0}],"modelVersion":"gemini-2.5-flash"}`},
		{name: "a part that mentions finishReason", give: `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"finishReason":"x"}}}]}}]}`},
		{name: "last chunk", give: `{"candidates":[{"content":{"parts":[{"text":"Oslo."}]},"finishReason":"STOP","index":0}],` +
			`"usageMetadata":{"promptTokenCount":2100,"cachedContentTokenCount":1800,"candidatesTokenCount":40,"thoughtsTokenCount":120,"totalTokenCount":2260}}`,
			want: last, done: true},
		{name: "usage without a total", give: `{"usageMetadata":{"promptTokenCount":10,"toolUsePromptTokenCount":5,"candidatesTokenCount":3}}`,
			want: sluice.Usage{PromptTokens: 15, CompletionTokens: 3, TotalTokens: 18, Measured: true}},
		{name: "a later usage replaces", give: `{"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":1}}`, from: last,
			want: sluice.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2, Measured: true}},
		{name: "prompt blocked", give: `{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":7}}`,
			want: sluice.Usage{PromptTokens: 7, TotalTokens: 7, Measured: true}, done: true},
		{name: "error", give: `{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}`, wantErr: protocol.ErrUpstreamErrorEvent},
		{name: "not JSON", give: `{"candidates":[{"content":`, wantErr: protocol.ErrMalformedEvent},
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

// FuzzEvent reads arbitrary events as a Gemini stream does: the
// skim and the whole read agree, nothing panics, and an event that is not
// a JSON object is refused.
func FuzzEvent(f *testing.F) {
	for _, s := range []string{
		`{"candidates":[{"content":{"parts":[{"text":"a"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}`,
		`{"candidates":[{"content":{"parts":[{"text":"\"finishReason\":"}]}}]}`,
		`{"promptFeedback":{"blockReason":"OTHER"}}`, `{"error":{"code":500}}`, `[{"candidates":[]}]`, `{"usageMetadata":{"promptTokenCount":1e3}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev := sse.Event{Data: data}
		u1, _, done1, err1 := Event(ev, &sluice.Request{}, sluice.Usage{})
		u2, _, done2, err2 := ReadEvent(ev, &sluice.Request{}, sluice.Usage{})
		if err2 == nil && (err1 != nil || u1 != u2 || done1 != done2) {
			t.Fatalf("skimmed %+v %v %v, read whole %+v %v %v: %q", u1, done1, err1, u2, done2, err2, data)
		}
	})
}

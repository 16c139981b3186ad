package upstream

import (
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/protocol/anthropic"
	"github.com/sluicehq/sluice/internal/protocol/gemini"
	"github.com/sluicehq/sluice/internal/protocol/openai"
	"github.com/sluicehq/sluice/internal/sse"
)

// TestAnswerUsage checks the usage read of an answer: its "usage" member
// picked (readAnswer), then read as chat's.
func TestAnswerUsage(t *testing.T) {
	tests := []struct {
		name string
		give string
		want sluice.Usage
	}{
		{name: "answer", give: `{"id":"c","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":146,"completion_tokens":100,"total_tokens":246,` +
			`"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":8,"audio_tokens":0}}}`,
			want: sluice.Usage{PromptTokens: 146, CompletionTokens: 100, CachedTokens: 64, ReasoningTokens: 8, TotalTokens: 246, Measured: true}},
		{name: "total missing", give: `{"usage":{"prompt_tokens":3,"completion_tokens":4}}`, want: sluice.Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7, Measured: true}},
		{name: "null details", give: `{"usage":{"prompt_tokens":3,"prompt_tokens_details":null,"completion_tokens_details":null}}`, want: sluice.Usage{PromptTokens: 3, TotalTokens: 3, Measured: true}},
		{name: "details merge", give: `{"usage":{"prompt_tokens_details":{"cached_tokens":2},"prompt_tokens_details":{}}}`, want: sluice.Usage{CachedTokens: 2, Measured: true}},
		{name: "upper case key (encoding/json)", give: `{"usage":{"Prompt_Tokens":5}}`, want: sluice.Usage{PromptTokens: 5, TotalTokens: 5, Measured: true}},
		{name: "escaped key (encoding/json)", give: `{"usage":{"prompt_tok\u0065ns":5}}`, want: sluice.Usage{PromptTokens: 5, TotalTokens: 5, Measured: true}},
		{name: "no usage", give: `{"choices":[]}`},
		{name: "null usage", give: `{"usage":null}`},
		{name: "fractional count", give: `{"usage":{"prompt_tokens":1.5}}`},
		{name: "count as string", give: `{"usage":{"prompt_tokens":"5"}}`},
		{name: "details not an object", give: `{"usage":{"prompt_tokens_details":1}}`},
		{name: "invalid inside usage", give: `{"usage":{"prompt_tokens":01}}`},
		{name: "not an object", give: `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := readAnswer([]byte(tt.give))
			if got := openai.UsageValue(f.usage); got != tt.want {
				t.Errorf("usage of %s = %+v, want %+v", tt.give, got, tt.want)
			}
		})
	}
}

func BenchmarkUsageValue(b *testing.B) {
	answer := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"A quiet weekend by the river."},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":146,"completion_tokens":100,"total_tokens":246,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if f, ok := readAnswer(answer); !ok || !openai.UsageValue(f.usage).Measured {
			b.Fatal("no usage")
		}
	}
}

// TestHotPathChecksDoNotAllocate guards what every answer and stream event
// goes through: each dialect's read of an event (skimmed, or read whole
// with its usage), and the secret's mask.
func TestHotPathChecksDoNotAllocate(t *testing.T) {
	req := &sluice.Request{}
	events := []struct {
		read func(sse.Event, *sluice.Request, sluice.Usage) (sluice.Usage, bool, bool, error)
		data string
	}{
		{openai.ChatEvent, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`},
		{openai.ChatEvent, `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}`},
		{anthropic.Event, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`},
		{anthropic.Event, `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`},
		{openai.ResponsesEvent, `{"type":"response.output_text.delta","sequence_number":4,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"Hi","logprobs":[]}`},
		{openai.ResponsesEvent, `{"type":"response.completed","response":{"id":"resp_1","object":"response","status":"completed","output":[],"usage":{"input_tokens":3,"output_tokens":4,"total_tokens":7}}}`},
		{gemini.Event, `{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"index":0}],"modelVersion":"m","responseId":"r"}`},
	}
	for _, e := range events {
		ev := sse.Event{Data: []byte(e.data)}
		allocs := testing.AllocsPerRun(100, func() {
			if _, _, _, err := e.read(ev, req, sluice.Usage{}); err != nil {
				t.Fatalf("%s: %v", e.data, err)
			}
			maskSecret(ev.Data, "sk-upstream-a-secret-longer-than-32-bytes-0123456789")
		})
		if allocs != 0 {
			t.Errorf("reading %s allocates %v times, want 0", e.data, allocs)
		}
	}
}

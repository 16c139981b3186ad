package adapter_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/adapter"
)

// translatedPair is one of the twelve pairs of protocols Sluice translates
// a stream between: a caller's and an upstream's, and the translator.
type translatedPair struct {
	caller, upstream sluice.Protocol
	new              func() adapter.Translator
}

var translatedPairs = []translatedPair{
	{sluice.ProtocolAnthropic, sluice.ProtocolOpenAIChat, anthropicIn},
	{sluice.ProtocolOpenAIResponses, sluice.ProtocolOpenAIChat, responsesIn},
	{sluice.ProtocolGemini, sluice.ProtocolOpenAIChat, geminiIn},
	{sluice.ProtocolOpenAIChat, sluice.ProtocolAnthropic, anthropicOut},
	{sluice.ProtocolOpenAIChat, sluice.ProtocolOpenAIResponses, responsesOut},
	{sluice.ProtocolOpenAIChat, sluice.ProtocolGemini, geminiOut},
	{sluice.ProtocolAnthropic, sluice.ProtocolOpenAIResponses, chain(anthropicIn, responsesOut)},
	{sluice.ProtocolOpenAIResponses, sluice.ProtocolAnthropic, chain(responsesIn, anthropicOut)},
	{sluice.ProtocolAnthropic, sluice.ProtocolGemini, chain(anthropicIn, geminiOut)},
	{sluice.ProtocolGemini, sluice.ProtocolAnthropic, chain(geminiIn, anthropicOut)},
	{sluice.ProtocolOpenAIResponses, sluice.ProtocolGemini, chain(responsesIn, geminiOut)},
	{sluice.ProtocolGemini, sluice.ProtocolOpenAIResponses, chain(geminiIn, responsesOut)},
}

func chain(in, out func() adapter.Translator) func() adapter.Translator {
	return func() adapter.Translator { return adapter.NewChain(in(), out()) }
}

// chatRequests is a streamed request with a tool in each caller protocol.
var chatRequests = map[sluice.Protocol]string{
	sluice.ProtocolOpenAIChat: `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}],` +
		`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`,
	sluice.ProtocolAnthropic: `{"model":"m","max_tokens":1024,"stream":true,"messages":[{"role":"user","content":"hi"}],` +
		`"tools":[{"name":"f","input_schema":{"type":"object"}}]}`,
	sluice.ProtocolOpenAIResponses: `{"model":"m","stream":true,"input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`,
	sluice.ProtocolGemini:          `{"contents":[{"parts":[{"text":"hi"}]}],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"object"}}]}]}`,
}

// piece is each delta's text.
const piece = "the quick brown fox jumps over the lazy dog; the quick brown fox"

// manyDeltas is an upstream stream of protocol p with n text deltas, then
// one tool call whose arguments, {"a":"xx…"}, come in n more (Gemini
// sends a call whole: its arguments are one string of n pieces).
func manyDeltas(p sluice.Protocol, n int) []adapter.Event {
	var evs []adapter.Event
	add := func(name, data string) { evs = append(evs, adapter.Event{Name: name, Data: []byte(data)}) }
	args := append(append([]string{`{\"a\":\"`}, repeat(piece, n)...), `\"}`)
	switch p {
	case sluice.ProtocolOpenAIChat:
		chunk := `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`
		add("", fmt.Sprintf(chunk, `{"role":"assistant","content":""}`, "null"))
		for range n {
			add("", fmt.Sprintf(chunk, `{"content":"`+piece+`"}`, "null"))
		}
		add("", fmt.Sprintf(chunk, `{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`, "null"))
		for _, a := range args {
			add("", fmt.Sprintf(chunk, `{"tool_calls":[{"index":0,"function":{"arguments":"`+a+`"}}]}`, "null"))
		}
		add("", fmt.Sprintf(chunk, `{}`, `"tool_calls"`))
		add("", `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
		add("", `[DONE]`)
	case sluice.ProtocolAnthropic:
		add("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":1}}}`)
		add("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		for range n {
			add("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+piece+`"}}`)
		}
		add("content_block_stop", `{"type":"content_block_stop","index":0}`)
		add("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`)
		for _, a := range args {
			add("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"`+a+`"}}`)
		}
		add("content_block_stop", `{"type":"content_block_stop","index":1}`)
		add("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":2}}`)
		add("message_stop", `{"type":"message_stop"}`)
	case sluice.ProtocolOpenAIResponses:
		resp := `{"id":"resp_1","object":"response","created_at":1,"status":"%s","model":"m","output":[]%s}`
		add("response.created", `{"type":"response.created","sequence_number":0,"response":`+fmt.Sprintf(resp, "in_progress", "")+`}`)
		add("response.output_item.added", `{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]}}`)
		for range n {
			add("response.output_text.delta", `{"type":"response.output_text.delta","sequence_number":2,"item_id":"msg_1","output_index":0,"content_index":0,"delta":"`+piece+`"}`)
		}
		add("response.output_item.added", `{"type":"response.output_item.added","sequence_number":3,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","call_id":"call_1","name":"f","arguments":""}}`)
		for _, a := range args {
			add("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","sequence_number":4,"item_id":"fc_1","output_index":1,"delta":"`+a+`"}`)
		}
		add("response.completed", `{"type":"response.completed","sequence_number":5,"response":`+
			fmt.Sprintf(resp, "completed", `,"usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}`)+`}`)
	case sluice.ProtocolGemini:
		chunk := `{"candidates":[{"content":{"role":"model","parts":[%s]},"index":0%s}],"modelVersion":"m","responseId":"r"}`
		for range n {
			add("", fmt.Sprintf(chunk, `{"text":"`+piece+`"}`, ""))
		}
		add("", fmt.Sprintf(chunk, `{"functionCall":{"name":"f","args":{"a":"`+strings.Repeat(piece, n)+`"}}}`, ""))
		add("", `{"candidates":[{"content":{"role":"model","parts":[{"text":""}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2,"totalTokenCount":3},"modelVersion":"m","responseId":"r"}`)
	}
	return evs
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// translate runs the stream evs through a new translator of pair, and
// returns the bytes it emitted and what it allocated doing so.
func translate(t testing.TB, pair translatedPair, evs []adapter.Event) (emitted, allocated uint64) {
	tr := pair.new()
	if _, err := tr.Request(&sluice.Request{Protocol: pair.caller, Body: []byte(chatRequests[pair.caller]), Stream: true}, "m"); err != nil {
		t.Fatal(err)
	}
	emit := func(e adapter.Event) error { emitted += uint64(len(e.Data)); return nil }
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, ev := range evs {
		if err := tr.Event(ev, emit); err != nil {
			t.Fatalf("event %s %.80s: %v", ev.Name, ev.Data, err)
		}
	}
	runtime.ReadMemStats(&after)
	return emitted, after.TotalAlloc - before.TotalAlloc
}

// TestManySmallDeltasCostLinearly (issue #24 item 6): a stream of many
// small deltas, of text and of a tool call's arguments, costs each
// translated pair work in proportion to its length: what a translator
// allocates stays within a constant factor of the events it reads and
// writes. Joining the fragments as strings, which copies the whole each
// time, allocates n²/2 bytes for n fragments.
func TestManySmallDeltasCostLinearly(t *testing.T) {
	const n = 4000
	for _, pair := range translatedPairs {
		t.Run(fmt.Sprintf("%s_on_%s", pair.caller, pair.upstream), func(t *testing.T) {
			evs := manyDeltas(pair.upstream, n)
			read := uint64(0)
			for _, ev := range evs {
				read += uint64(len(ev.Data))
			}
			emitted, allocated := translate(t, pair, evs)
			// Decoding and encoding each event allocate a few times its
			// size; the quadratic joins allocated hundreds of times more.
			if limit := 40 * (read + emitted); allocated > limit {
				t.Errorf("%d deltas: allocated %d MiB translating %d KiB into %d KiB; want at most %d MiB",
					2*n, allocated>>20, read>>10, emitted>>10, limit>>20)
			}
		})
	}
}

// BenchmarkManySmallDeltas translates a stream of 2×20,000 small deltas
// (see manyDeltas) for each translated pair.
func BenchmarkManySmallDeltas(b *testing.B) {
	for _, pair := range translatedPairs {
		b.Run(fmt.Sprintf("%s_on_%s", pair.caller, pair.upstream), func(b *testing.B) {
			evs := manyDeltas(pair.upstream, 20000)
			b.ReportAllocs()
			for b.Loop() {
				translate(b, pair, evs)
			}
		})
	}
}

// TestManyPartsCostLinearly (issue #24 item 6, the same pattern in whole
// bodies): a Responses message of many refusal parts, in a caller's
// request or in an upstream's answer, is joined in time and memory in
// proportion to its size.
func TestManyPartsCostLinearly(t *testing.T) {
	const n = 10000
	parts := strings.TrimSuffix(strings.Repeat(`{"type":"refusal","refusal":"`+piece[:32]+`"},`, n), ",")
	request := `{"model":"m","input":[{"type":"message","role":"assistant","content":[` + parts + `]},{"role":"user","content":"hi"}]}`
	answer := `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"m","output":[` +
		`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[` + parts + `]}],` +
		`"usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}`
	tests := []struct {
		name string
		run  func() error
	}{
		{"Responses caller's request", func() error {
			_, err := responsesIn().Request(&sluice.Request{Protocol: sluice.ProtocolOpenAIResponses, Body: []byte(request)}, "m")
			return err
		}},
		{"Responses upstream's answer", func() error {
			tr := responsesOut()
			if _, err := tr.Request(&sluice.Request{Protocol: sluice.ProtocolOpenAIChat, Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)}, "m"); err != nil {
				return err
			}
			_, err := tr.Response([]byte(answer))
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if err := tt.run(); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			if allocated, limit := after.TotalAlloc-before.TotalAlloc, uint64(40*len(answer)); allocated > limit {
				t.Errorf("%d parts of %d KiB: allocated %d MiB; want at most %d MiB", n, len(answer)>>10, allocated>>20, limit>>20)
			}
		})
	}
}

package responses

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
	chat "github.com/sluicehq/sluice/internal/adapter/openai"
	"github.com/sluicehq/sluice/internal/protocol/openai"
)

// FuzzFromOpenAIStream feeds arbitrary event text: the translator never
// panics, and a stream it ends with [DONE] without an error is a
// well-formed chat stream.
func FuzzFromOpenAIStream(f *testing.F) {
	golden, err := os.ReadFile(dir + "stream.responses.sse")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"code\":\"x\",\"message\":\"m\"}\n\n"))
	f.Add([]byte("data: {\"type\":\"response.output_item.done\",\"output_index\":4,\"item\":{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"{}\"}}\n\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"max_output_tokens\"}}}\n\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		out, err := adaptertest.Stream(NewFromOpenAI(), adaptertest.Parse(text))
		if adaptertest.Ends(out, "") && err == nil {
			if err := checkChatStream(out, false); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// FuzzFromOpenAIRoundTrip turns a valid chat stream (adaptertest.ChatStream)
// into a Responses stream (openai.FromResponses, fuzzed in its own
// package) and back: the chat stream that comes out is well-formed and
// says what the one that went in said: text, refusals, reasoning and tool
// calls.
func FuzzFromOpenAIRoundTrip(f *testing.F) {
	f.Add([]byte{0, 0, 2, 3, 3, 2, 8, 13, 0})
	f.Add([]byte{1, 0, 1, 2, 2, 3, 7, 11})
	f.Fuzz(func(t *testing.T, ops []byte) {
		in := adaptertest.ChatStream(ops)
		mid, err := adaptertest.Stream(chat.NewFromResponses(), in)
		if err != nil || !adaptertest.Ends(mid, "response.completed") {
			t.Fatalf("to Responses: %v; want nil, ending response.completed", err)
		}
		out, err := adaptertest.Stream(NewFromOpenAI(), mid)
		if err != nil || !adaptertest.Ends(out, "") {
			t.Fatalf("back to chat: %v; want nil, ending [DONE]", err)
		}
		if err := checkChatStream(out, false); err != nil {
			t.Fatal(err)
		}
		if got, want := said(t, out), said(t, in); got != want {
			t.Errorf("round trip says\n%s\nwant\n%s", got, want)
		}
	})
}

// said is what a chat stream says: its text, refusals, reasoning and each
// tool call's id, name and arguments.
func said(t *testing.T, evs []adapter.Event) string {
	t.Helper()
	var text, refusal, reasoning strings.Builder
	var calls []string
	for _, ev := range evs[:len(evs)-1] { // [DONE] last
		var c openai.Chunk
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
			refusal.WriteString(ch.Delta.Refusal)
			reasoning.WriteString(ch.Delta.ReasoningContent)
			for _, tc := range ch.Delta.ToolCalls {
				if *tc.Index == len(calls) {
					calls = append(calls, tc.ID+" "+tc.Function.Name+" ")
				}
				calls[*tc.Index] += tc.Function.Arguments
			}
		}
	}
	return "text: " + text.String() + "\nrefusal: " + refusal.String() + "\nreasoning: " + reasoning.String() + "\ncalls: " + strings.Join(calls, "; ")
}

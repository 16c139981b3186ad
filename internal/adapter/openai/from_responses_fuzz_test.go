package openai

import (
	"fmt"
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/adapter"
	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
)

// FuzzFromResponsesStream feeds arbitrary event text: the translator never
// panics, and a stream it calls done without an error is a well-formed
// Responses stream.
func FuzzFromResponsesStream(f *testing.F) {
	golden, err := os.ReadFile(fromResponsesDir + "stream.chat.sse")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add([]byte("data: {\"error\":{\"message\":\"x\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		out, done, err := adaptertest.Stream(NewFromResponses(), adaptertest.Parse(text))
		if done && err == nil {
			checkResponsesStream(t, out)
		}
	})
}

// FuzzFromResponsesValidStream builds a valid chat stream from ops (text
// and refusal deltas, new tool calls, argument fragments of any call so
// far, in any order): the Responses stream is complete and well-formed,
// and its final response holds exactly what the deltas said.
func FuzzFromResponsesValidStream(f *testing.F) {
	f.Add([]byte{0, 0, 2, 3, 3, 2, 8, 13, 0})
	f.Add([]byte{1, 0, 1, 2, 2, 3, 8})
	f.Fuzz(func(t *testing.T, ops []byte) {
		in := chatStream(ops)
		out, done, err := adaptertest.Stream(NewFromResponses(), in)
		if !done || err != nil {
			t.Fatalf("Stream = done %v, %v; want done, nil", done, err)
		}
		checkResponsesStream(t, out)
	})
}

// chatStream is the valid chat stream that ops describe (see
// FuzzFromResponsesValidStream), with a finish chunk, usage and [DONE].
func chatStream(ops []byte) []adapter.Event {
	const head = `{"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":`
	var evs []adapter.Event
	chunk := func(delta string) {
		evs = append(evs, adapter.Event{Data: []byte(head + delta + `,"finish_reason":null}]}`)})
	}
	calls := 0
	for i, op := range ops {
		switch op % 4 {
		case 0:
			chunk(fmt.Sprintf(`{"content":"t%d "}`, i))
		case 1:
			chunk(fmt.Sprintf(`{"refusal":"r%d "}`, i))
		case 2:
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":"call_%d","type":"function","function":{"name":"f%d","arguments":""}}]}`, calls, i, i))
			calls++
		case 3:
			if calls > 0 {
				chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":"a%d,"}}]}`, int(op/4)%calls, i))
			}
		}
	}
	finish := "stop"
	if calls > 0 {
		finish = "tool_calls"
	}
	evs = append(evs,
		adapter.Event{Data: []byte(`{"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"` + finish + `"}]}`)},
		adapter.Event{Data: []byte(`{"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}`)},
		adapter.Event{Data: doneData},
	)
	return evs
}

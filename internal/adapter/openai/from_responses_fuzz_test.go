package openai

import (
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/adapter/adaptertest"
)

// FuzzFromResponsesStream feeds arbitrary event text: the translator never
// panics, and a stream it ends with a terminal event without an error is a
// well-formed Responses stream.
func FuzzFromResponsesStream(f *testing.F) {
	golden, err := os.ReadFile(fromResponsesDir + "stream.chat.sse")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add([]byte("data: {\"error\":{\"message\":\"x\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		out, err := adaptertest.Stream(NewFromResponses(), adaptertest.Parse(text))
		ended := adaptertest.Ends(out, "response.completed") || adaptertest.Ends(out, "response.incomplete")
		if ended && err == nil {
			checkResponsesStream(t, out)
		}
	})
}

// FuzzFromResponsesValidStream builds a valid chat stream from ops (see
// adaptertest.ChatStream): the Responses stream is complete and
// well-formed, and its final response holds exactly what the deltas said.
func FuzzFromResponsesValidStream(f *testing.F) {
	f.Add([]byte{0, 0, 2, 3, 3, 2, 8, 13, 0})
	f.Add([]byte{1, 0, 1, 2, 2, 3, 8})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > maxToolCallIndex {
			// Each op starts at most one call: longer ops may make more
			// parallel calls than the translator takes, which it refuses.
			t.Skip()
		}
		in := adaptertest.ChatStream(ops)
		out, err := adaptertest.Stream(NewFromResponses(), in)
		if err != nil || !adaptertest.Ends(out, "response.completed") {
			t.Fatalf("Stream = %v; want nil, ending response.completed", err)
		}
		checkResponsesStream(t, out)
	})
}
